//! Finding the leader: the hello goes to every controller at once (and to any
//! leader they name); the leader registers the node through Raft and welcomes
//! the agent, a follower names the leader, and a controller that leads but
//! cannot confirm it (cut off from the majority) says it knows no leader. The
//! first welcome wins; the other attempts are dropped, which closes their
//! connections.

use std::time::Duration;

use anyhow::{Context, bail};
use corral_proto::agent::{AgentMessage, ControllerMessage, read_frame, write_frame};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Longest wait for a QUIC handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest wait for the answer to a hello: the leader answers once the node's
/// registration commits (one Raft round), the others at once.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(3);
/// Most controllers asked in one round (the configured ones and those named).
const MAX_ASKED: usize = 16;

/// A welcome from the leader: the connection the session runs on.
pub(super) struct Attached {
    /// The connection.
    pub connection: quinn::Connection,
    /// The stream to the leader.
    pub send: quinn::SendStream,
    /// The stream from the leader.
    pub recv: quinn::RecvStream,
    /// The leader's address.
    pub address: String,
    /// When the hello was sent: the lease counts from then.
    pub hello_sent: Instant,
    /// Heartbeat period.
    pub heartbeat: Duration,
    /// Lease length.
    pub lease: Duration,
    /// `SLURM_CLUSTER_NAME`.
    pub cluster_name: String,
}

/// How a round ended.
pub(super) enum Outcome {
    /// The leader welcomed the agent.
    Attached(Box<Attached>),
    /// No controller welcomed it.
    NoLeader {
        /// Leaders the controllers named (to ask first next round).
        hints: Vec<String>,
        /// What each controller said, for the log.
        reason: String,
    },
}

/// One controller's answer.
enum Answer {
    Welcome(Box<Attached>),
    NotLeader(Option<String>),
    Refused(String),
}

/// Sends `hello` to every controller (named leaders `hints` first) and returns
/// the first welcome, or why there was none.
pub(super) async fn attach(
    endpoint: &quinn::Endpoint,
    controllers: &[String],
    hints: &[String],
    hello: AgentMessage,
) -> Outcome {
    let mut probes = JoinSet::new();
    let mut asked: Vec<String> = Vec::new();
    let mut ask = |address: &str, probes: &mut JoinSet<(String, anyhow::Result<Answer>)>| {
        if asked.len() >= MAX_ASKED || asked.iter().any(|a| a == address) {
            return;
        }
        asked.push(address.to_string());
        let (endpoint, address, hello) = (endpoint.clone(), address.to_string(), hello.clone());
        probes.spawn(async move {
            let answer = probe(&endpoint, &address, &hello).await;
            (address, answer)
        });
    };
    for address in hints.iter().chain(controllers) {
        ask(address, &mut probes);
    }
    let mut named = Vec::new();
    let mut said = Vec::new();
    while let Some(joined) = probes.join_next().await {
        let Ok((address, answer)) = joined else {
            continue;
        };
        match answer {
            Ok(Answer::Welcome(attached)) => return Outcome::Attached(attached),
            Ok(Answer::NotLeader(Some(leader))) => {
                said.push(format!("{address}: the leader is {leader}"));
                ask(&leader, &mut probes);
                if !named.contains(&leader) {
                    named.push(leader);
                }
            }
            Ok(Answer::NotLeader(None)) => said.push(format!("{address}: no leader known")),
            Ok(Answer::Refused(reason)) => {
                tracing::error!(%address, "the controller refused this agent: {reason}");
                said.push(format!("{address}: refused: {reason}"));
            }
            Err(e) => said.push(format!("{address}: {e:#}")),
        }
    }
    Outcome::NoLeader {
        hints: named,
        reason: said.join("; "),
    }
}

/// Says hello to the controller at `address` and reads its answer.
async fn probe(
    endpoint: &quinn::Endpoint,
    address: &str,
    hello: &AgentMessage,
) -> anyhow::Result<Answer> {
    let target = tokio::net::lookup_host(address)
        .await
        .with_context(|| format!("cannot resolve {address}"))?
        .next()
        .with_context(|| format!("{address} resolves to nothing"))?;
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let connection = tokio::time::timeout(CONNECT_TIMEOUT, endpoint.connect(target, host)?)
        .await
        .context("no answer to the handshake")??;
    let (mut send, mut recv) = connection.open_bi().await?;
    // The leader starts this node's liveness clock when the hello arrives, and
    // welcomes the agent only after the registration committed: the lease
    // counts from before the hello was sent.
    let hello_sent = Instant::now();
    tokio::time::timeout(ANSWER_TIMEOUT, write_frame(&mut send, hello))
        .await
        .context("the hello could not be sent in time")??;
    let reply: Option<ControllerMessage> =
        tokio::time::timeout(ANSWER_TIMEOUT, read_frame(&mut recv))
            .await
            .context("no answer to the hello in time")??;
    match reply {
        Some(ControllerMessage::Welcome {
            heartbeat_ms,
            lease_ms,
            cluster_name,
        }) => Ok(Answer::Welcome(Box::new(Attached {
            connection,
            send,
            recv,
            address: address.to_string(),
            hello_sent,
            // Bounded, so no timer arithmetic can overflow.
            heartbeat: Duration::from_millis(heartbeat_ms.clamp(10, 60_000)),
            lease: Duration::from_millis(lease_ms.clamp(20, 3_600_000)),
            cluster_name,
        }))),
        Some(ControllerMessage::NotLeader { leader }) => Ok(Answer::NotLeader(leader)),
        Some(ControllerMessage::Refused { reason }) => Ok(Answer::Refused(reason)),
        Some(other) => bail!("unexpected first answer {other:?}"),
        None => bail!("the controller closed the connection without answering"),
    }
}
