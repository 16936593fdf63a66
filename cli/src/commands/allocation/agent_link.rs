//! The way from a login node to a job's agents: the batch host's step address
//! (from its node's registration), reached over QUIC with the user's own
//! certificate, as the agents reach each other for steps. The agent checks
//! that the certificate's name is the job's user.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use corral_proto::agent::{read_frame, write_frame};
use corral_proto::api::ListNodesRequest;
use corral_proto::step::{NodeUsage, STEP_ALPN, StepControl, StepEvent};
use corral_state::job::{Job, JobState};

use crate::connection::Cluster;

/// How long reaching an agent may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection to the agent of a job's batch host.
pub struct AgentLink {
    /// The node.
    pub node: String,
    /// The connection; each request is a stream of its own.
    pub connection: quinn::Connection,
    /// Kept open as long as the connection is used.
    _endpoint: quinn::Endpoint,
}

impl AgentLink {
    /// Opens a request stream.
    pub async fn open(&self) -> anyhow::Result<(quinn::SendStream, quinn::RecvStream)> {
        self.connection
            .open_bi()
            .await
            .with_context(|| format!("lost the agent of {}", self.node))
    }
}

/// The batch host of `job`'s running attempt; an error in words when the job
/// does not run.
pub fn batch_host(job: &Job) -> anyhow::Result<&str> {
    if job.state != JobState::Running {
        bail!(
            "job {} is {}, not running: srun --jobid reaches running jobs only",
            job.id,
            job.state.slurm_name()
        );
    }
    job.current_attempt()
        .and_then(corral_state::job::Attempt::batch_host)
        .ok_or_else(|| anyhow!("job {} runs on no node", job.id))
}

/// Connects to `node`'s agent, whose step address its registration gives.
pub async fn connect(cluster: &Cluster, node: &str) -> anyhow::Result<AgentLink> {
    let (nodes, _) = super::super::nodes::fetch(
        cluster,
        ListNodesRequest {
            nodes: node.to_string(),
            ..ListNodesRequest::default()
        },
    )
    .await?;
    let address = nodes
        .iter()
        .find(|n| n.name == node)
        .and_then(|n| n.registration.as_ref())
        .and_then(|r| r.step_address.clone())
        .ok_or_else(|| {
            anyhow!(
                "the agent of {node} registered no step address (it runs with --step-listen off), so srun cannot reach it from here"
            )
        })?;
    let target = tokio::net::lookup_host(&address)
        .await
        .with_context(|| format!("cannot resolve {node}'s step address {address}"))?
        .next()
        .ok_or_else(|| anyhow!("{node}'s step address {address} resolves to nothing"))?;
    let bind: SocketAddr = if target.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let mut endpoint = quinn::Endpoint::client(bind).context("cannot open a UDP socket")?;
    endpoint.set_default_client_config(cluster.tls().quic_client_config_for(STEP_ALPN)?);
    let connecting = endpoint
        .connect(target, node)
        .with_context(|| format!("cannot reach the agent of {node} at {address}"))?;
    let connection = tokio::time::timeout(CONNECT_TIMEOUT, connecting)
        .await
        .map_err(|_| {
            anyhow!(
                "the agent of {node} at {address} did not answer within {} s",
                CONNECT_TIMEOUT.as_secs()
            )
        })?
        .with_context(|| format!("cannot reach the agent of {node} at {address}"))?;
    Ok(AgentLink {
        node: node.to_string(),
        connection,
        _endpoint: endpoint,
    })
}

/// What job `job`'s processes on `node` use now, from its agent (sstat,
/// scontrol listpids).
async fn job_usage(cluster: &Cluster, node: &str, job: u64) -> anyhow::Result<NodeUsage> {
    let link = connect(cluster, node).await?;
    let (mut send, mut recv) = link.open().await?;
    let request = StepControl::Usage {
        job: corral_state::ids::JobId(job),
    };
    write_frame(&mut send, &request).await?;
    let answer = tokio::time::timeout(CONNECT_TIMEOUT, read_frame::<_, StepEvent>(&mut recv))
        .await
        .map_err(|_| {
            anyhow!(
                "the agent of {node} did not answer within {} s",
                CONNECT_TIMEOUT.as_secs()
            )
        })??;
    link.connection.close(0u32.into(), b"done");
    match answer {
        Some(StepEvent::Usage(usage)) => Ok(*usage),
        Some(StepEvent::Refused(reason)) => Err(anyhow::anyhow!("{reason}")),
        other => Err(anyhow::anyhow!("unexpected answer {other:?}")),
    }
}

/// What job `job` uses on each of `nodes` (the nodes of its running attempt
/// when `None`), asked of their agents one after another (a round trip each,
/// which a job's node count keeps short); a node whose agent does not answer
/// is said on standard error, prefixed with `program`, and left out.
pub async fn job_usage_on_nodes(
    cluster: &Cluster,
    job: &Job,
    nodes: Option<Vec<String>>,
    program: &str,
) -> (Vec<String>, Vec<NodeUsage>) {
    let nodes = nodes.unwrap_or_else(|| {
        job.current_attempt()
            .map(|a| a.allocation.iter().map(|n| n.node.clone()).collect())
            .unwrap_or_default()
    });
    let mut usage = Vec::new();
    for node in &nodes {
        match job_usage(cluster, node, job.id.0).await {
            Ok(node_usage) => usage.push(node_usage),
            Err(e) => eprintln!("{program}: error: {node}: {e:#}"),
        }
    }
    (nodes, usage)
}
