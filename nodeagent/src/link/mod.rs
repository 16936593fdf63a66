//! The agent's link to the leader: QUIC with mutual TLS to the controllers'
//! client ports (UDP). Each round of [`discovery`] sends the hello (node,
//! resources, attempts held here) to every controller at once; the leader
//! registers the node and welcomes the agent, the others name the leader or
//! say there is none yet. On the leader's connection a [`session`] then runs:
//! heartbeats, reports from the outbox, and the leader's launches, signals and
//! kills.
//!
//! A session ends as soon as its leader stops confirming heartbeats (two
//! heartbeat periods without an acknowledgement: the leader died, stopped,
//! or is cut off from the majority and cannot confirm that it still leads),
//! and discovery starts again after a short random pause, so a leader change
//! costs about a second and never the lease.

mod discovery;
mod instruments;
#[cfg(test)]
mod protocol_fallback_tests;
mod session;

use std::net::SocketAddr;
use std::time::Duration;

use corral_proto::agent::{AgentHello, NodeResources};
use tokio::sync::watch;

use crate::lease::Lease;
use crate::outbox::Outbox;
use crate::supervisor::Supervisor;

/// Who this agent is and where the controllers are.
#[derive(Debug, Clone)]
pub struct LinkSettings {
    /// Controllers' client addresses, `host:port`.
    pub controllers: Vec<String>,
    /// This node.
    pub node: String,
    /// Changes on every agent start.
    pub boot_id: String,
    /// What the node has.
    pub resources: NodeResources,
    /// Where this agent accepts job steps from other agents.
    pub step_address: Option<String>,
    /// Longest random pause before looking for a leader again after a session
    /// ends, so that every agent of a cluster does not knock at once.
    pub reattach_jitter: Duration,
    /// Where the channel to the controllers comes from; `None` lets the
    /// kernel choose.
    pub source_ip: Option<std::net::IpAddr>,
}

/// The latest GPU health samples, for heartbeats (see
/// [`crate::gpu::sample_periodically`]).
pub type HealthSource = watch::Receiver<Vec<crate::gpu::GpuSample>>;

/// Everything a session works with.
pub struct LinkParts {
    /// Attempts, launches and kills.
    pub supervisor: Supervisor,
    /// Reports waiting for acknowledgement.
    pub outbox: Outbox,
    /// Renewed by acknowledged heartbeats.
    pub lease: Lease,
    /// GPU health for heartbeats.
    pub health: HealthSource,
    /// The roster the leader last sent (for [`crate::outage`]).
    pub roster: watch::Sender<Option<std::sync::Arc<corral_proto::roster::Roster>>>,
}

/// Pause between discovery rounds that found no leader: short at first (an
/// election takes a few hundred milliseconds), then up to a second.
fn round_pause(failed_rounds: u32) -> Duration {
    Duration::from_millis((50u64 << failed_rounds.min(5)).min(1_000))
}

/// A session shorter than this ended at once (refused, or its first frames
/// failed): the next attach waits as after a round without a leader.
const SHORT_SESSION: Duration = Duration::from_secs(5);

/// Pause before attaching again after a session that lasted `lasted`, the
/// `short_in_a_row`-th short one in a row (0 after a session that lasted):
/// none after a real session (a failover reattaches at once), and after
/// sessions that end as soon as they begin, [`round_pause`]'s growing pause,
/// so an agent the leader keeps turning away does not reconnect (and
/// re-register through Raft) as fast as it can.
fn pause_after_session(lasted: Duration, short_in_a_row: u32) -> Duration {
    if lasted >= SHORT_SESSION {
        Duration::ZERO
    } else {
        round_pause(short_in_a_row)
    }
}

/// Up to `jitter`, at random.
fn random_pause(jitter: Duration) -> Duration {
    let ms = u64::try_from(jitter.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(rand::random_range(0..=ms))
}

/// Finds the leader, serves the session, and again when it ends; runs until
/// the process ends.
pub async fn run(settings: LinkSettings, client: quinn::ClientConfig, parts: LinkParts) {
    let bind = match settings.source_ip {
        Some(ip) => SocketAddr::new(ip, 0),
        None => SocketAddr::from(([0, 0, 0, 0], 0)),
    };
    let endpoint = match quinn::Endpoint::client(bind) {
        Ok(mut endpoint) => {
            endpoint.set_default_client_config(client);
            endpoint
        }
        Err(e) => {
            tracing::error!("cannot open a UDP socket for the agent channel on {bind}: {e}");
            return;
        }
    };
    let mut hints: Vec<String> = Vec::new();
    let mut failed_rounds = 0u32;
    let mut short_sessions = 0u32;
    let mut last_reason = String::new();
    // When the last session ended: the gap to the next welcome is measured.
    let mut leaderless_since: Option<tokio::time::Instant> = None;
    loop {
        let hello = AgentHello {
            node: settings.node.clone(),
            boot_id: settings.boot_id.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            resources: settings.resources.clone(),
            running: parts.supervisor.held(),
            step_address: settings.step_address.clone(),
        };
        match discovery::attach(&endpoint, &settings.controllers, &hints, hello).await {
            discovery::Outcome::Attached(attached) => {
                failed_rounds = 0;
                last_reason.clear();
                let began = tokio::time::Instant::now();
                if let Some(ended) = leaderless_since.take() {
                    instruments::reattach_duration()
                        .record((began - ended).as_secs_f64() * 1000.0, &[]);
                }
                let ended = session::serve(attached, &parts).await;
                leaderless_since = Some(tokio::time::Instant::now());
                hints = ended.leader_hint().into_iter().collect();
                let lasted = began.elapsed();
                let pause = pause_after_session(lasted, short_sessions);
                short_sessions = if lasted >= SHORT_SESSION {
                    0
                } else {
                    short_sessions.saturating_add(1)
                };
                tokio::time::sleep(pause + random_pause(settings.reattach_jitter)).await;
            }
            discovery::Outcome::NoLeader {
                hints: found,
                reason,
            } => {
                if reason != last_reason {
                    tracing::info!("no leader to attach to yet: {reason}");
                    last_reason = reason;
                }
                hints = found;
                let pause = round_pause(failed_rounds) + random_pause(settings.reattach_jitter);
                failed_rounds = failed_rounds.saturating_add(1);
                tokio::time::sleep(pause).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_without_a_leader_back_off_to_a_second() {
        assert_eq!(round_pause(0), Duration::from_millis(50));
        assert_eq!(round_pause(1), Duration::from_millis(100));
        assert_eq!(round_pause(4), Duration::from_millis(800));
        assert_eq!(round_pause(5), Duration::from_millis(1_000));
        assert_eq!(round_pause(u32::MAX), Duration::from_millis(1_000));
        assert!(random_pause(Duration::from_millis(100)) <= Duration::from_millis(100));
        assert_eq!(random_pause(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn sessions_that_end_at_once_back_off_and_a_real_one_reattaches_at_once() {
        let long = SHORT_SESSION;
        let short = Duration::from_millis(30);
        assert_eq!(pause_after_session(long, 7), Duration::ZERO);
        assert_eq!(pause_after_session(short, 0), Duration::from_millis(50));
        assert_eq!(pause_after_session(short, 3), Duration::from_millis(400));
        assert_eq!(pause_after_session(short, 40), Duration::from_secs(1));
    }
}
