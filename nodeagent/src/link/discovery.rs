//! Finding the leader: the hello goes to every controller at once (and to any
//! leader they name); the leader registers the node through Raft and welcomes
//! the agent, a follower names the leader, and a controller that leads but
//! cannot confirm it (cut off from the majority) says it knows no leader. The
//! first welcome wins; the other attempts are dropped, which closes their
//! connections.
//!
//! The hello names the agent protocols this build speaks
//! ([`corral_proto::agent_protocol`]). A controller of the release before
//! versions cannot read it and closes the connection unanswered; the agent
//! then says hello to it again in protocol 1, which it still speaks.

use std::time::Duration;

use anyhow::{Context, bail};
use corral_proto::agent::{
    AgentHello, AgentMessage, AgentWelcome, ControllerMessage, read_frame, write_frame,
};
use corral_proto::agent_protocol;
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
    /// The agent protocol of the session.
    pub protocol: u32,
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
    /// The controller ended the stream cleanly without a word: one that
    /// cannot read the hello does that (a controller of this build always
    /// answers).
    Unanswered,
}

/// Sends `hello` to every controller (named leaders `hints` first) and returns
/// the first welcome, or why there was none.
pub(super) async fn attach(
    endpoint: &quinn::Endpoint,
    controllers: &[String],
    hints: &[String],
    hello: AgentHello,
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
            let answer = say_hello(&endpoint, &address, hello).await;
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
            Ok(Answer::Unanswered) => {
                said.push(format!(
                    "{address}: closed the connection without answering"
                ));
            }
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

/// Says hello to the controller at `address` in the newest protocol this
/// build speaks, and again in protocol 1 if the controller could not read
/// that.
async fn say_hello(
    endpoint: &quinn::Endpoint,
    address: &str,
    hello: AgentHello,
) -> anyhow::Result<Answer> {
    let spoken = agent_protocol::SPOKEN;
    let versioned = AgentMessage::HelloV2 {
        protocol: spoken,
        hello: hello.clone(),
    };
    let answer = probe(endpoint, address, &versioned).await?;
    if !matches!(answer, Answer::Unanswered) || !spoken.speaks(agent_protocol::UNVERSIONED) {
        return Ok(answer);
    }
    let answer = probe(endpoint, address, &AgentMessage::unversioned_hello(hello)).await?;
    if matches!(answer, Answer::Welcome(_)) {
        tracing::warn!(
            %address,
            "the controller did not read this agent's hello of protocol {} and welcomed it in protocol 1: it runs a corral older than this agent's {}; upgrade the controllers before the agents",
            spoken,
            env!("CARGO_PKG_VERSION"),
        );
    }
    Ok(answer)
}

/// Says `hello` to the controller at `address` and reads its answer.
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
    // A clean end of the stream before any frame is what a controller that
    // cannot read the hello does (it finishes the stream, then waits for
    // the agent to read to its end before it closes); a reset, a lost
    // connection or a frame cut short is an error, not a reason to speak
    // an older protocol.
    let reply: Option<ControllerMessage> =
        tokio::time::timeout(ANSWER_TIMEOUT, read_frame(&mut recv))
            .await
            .context("no answer to the hello in time")??;
    let (protocol, welcome) = match reply {
        Some(ControllerMessage::Welcome {
            heartbeat_ms,
            lease_ms,
            cluster_name,
        }) => (
            agent_protocol::UNVERSIONED,
            AgentWelcome {
                heartbeat_ms,
                lease_ms,
                cluster_name,
            },
        ),
        Some(ControllerMessage::WelcomeV2 {
            protocol,
            controller_build,
            welcome,
        }) => {
            if !agent_protocol::SPOKEN.speaks(protocol) {
                bail!(
                    "the controller (corral {controller_build}) chose agent protocol {protocol}, which this agent (corral {}) does not speak ({}): upgrade the controllers and this agent to one release",
                    env!("CARGO_PKG_VERSION"),
                    agent_protocol::SPOKEN,
                );
            }
            (protocol, welcome)
        }
        Some(ControllerMessage::NotLeader { leader }) => return Ok(Answer::NotLeader(leader)),
        Some(ControllerMessage::Refused { reason }) => return Ok(Answer::Refused(reason)),
        Some(other) => bail!("unexpected first answer {other:?}"),
        None => return Ok(Answer::Unanswered),
    };
    Ok(Answer::Welcome(Box::new(Attached {
        connection,
        send,
        recv,
        address: address.to_string(),
        hello_sent,
        // Bounded, so no timer arithmetic can overflow.
        heartbeat: Duration::from_millis(welcome.heartbeat_ms.clamp(10, 60_000)),
        lease: Duration::from_millis(welcome.lease_ms.clamp(20, 3_600_000)),
        cluster_name: welcome.cluster_name,
        protocol,
    })))
}
