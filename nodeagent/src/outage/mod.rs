//! Controller outages are not node failures. An agent whose lease is about to
//! run out because no leader acknowledges it asks every other node's agent,
//! over the step channel, whether a leader reaches it; while a majority of the
//! roster the leader last gave it (this node included) answers that none does,
//! the controllers are away rather than this node cut off, and the lease is
//! extended by [`peer_keep`] at a time: the jobs run on, as they
//! do under Slurm while slurmctld is down. Otherwise the lease runs out and
//! the jobs are fenced as before. [`verdict`] says why this is safe.
//!
//! Nothing here turns unless the lease is near its end and no leader answers:
//! a healthy cluster sends no checks at all.

pub mod verdict;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use corral_proto::agent::{read_frame, write_frame};
use corral_proto::roster::Roster;
use corral_proto::step::{StepControl, StepEvent};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::lease::Lease;
use verdict::{Answer, Verdict, judge};

/// An agent "reaches a leader" when a leader acknowledged one of its
/// heartbeats this recently. Shorter than the lease, so that when every
/// controller goes away every agent says so before its lease runs out (with
/// a lease under 7 s, an outage still ends the jobs); and longer than the
/// controller's `ACK_ECHO_WITHIN` plus `LONGEST_GAP` (4 s), for safety.
pub const REACH_WINDOW: Duration = Duration::from_secs(5);

/// What one successful check grants: the lease runs on this long from the
/// check's start, four fifths of the lease (8 s of the default 10 s). A
/// leader declares a node down only after a majority has reached it for the
/// lease and margin (15 s), and no check started in that time succeeds, so
/// this leaves more time to end the jobs than a lease renewed by a heartbeat
/// does. Long enough that an agent still looking for the leader when the
/// controllers come back (its peers found it already, and say so) keeps its
/// jobs while it attaches.
pub fn peer_keep(lease: Duration) -> Duration {
    lease * 4 / 5
}

/// How often checks run while one is needed.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Checks begin when the lease ends within this: with the default 10 s
/// lease, 6 s after the last acknowledgement, once every node that lost the
/// controllers with this one is past its [`REACH_WINDOW`], leaving room for
/// three checks (the first opens its connections) before the lease ends.
const CHECK_AHEAD: Duration = Duration::from_secs(4);

/// How long a check waits for answers: a first check opens QUIC connections
/// to every node at once, which took over 800 ms on a loaded 2-core CI
/// machine. Safe at any length: what a check grants counts from its start.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// The roster the leader last gave this agent.
pub type HeldRoster = watch::Receiver<Option<Arc<Roster>>>;

/// How this agent stands with the controllers, as it answers other agents.
#[derive(Debug, Clone)]
pub struct Standing {
    /// The lease (and when a leader last acknowledged this agent).
    pub lease: Lease,
    /// The roster held.
    pub roster: HeldRoster,
}

impl Standing {
    /// The answer to another agent's `Reach`.
    pub fn answer(&self) -> StepEvent {
        StepEvent::Reach {
            reaches_leader: self.lease.reaches_leader(REACH_WINDOW),
            roster: self.roster.borrow().as_ref().map(|r| r.digest),
        }
    }
}

/// What the keeper last decided, so each change is logged once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A leader holds the lease.
    Led,
    /// The lease runs on the other nodes' word.
    Keeping,
    /// Too few nodes agree: the lease is left to run out.
    Refused,
}

/// Extends `standing`'s lease while the controllers are away and a majority
/// of the nodes says so; runs until the process ends. `endpoint` reaches the
/// other agents' step channels.
pub async fn keep_through_outages(node: String, endpoint: quinn::Endpoint, standing: Standing) {
    let mut ticks = tokio::time::interval(CHECK_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut connections: HashMap<String, quinn::Connection> = HashMap::new();
    let mut mode = Mode::Led;
    let expiry = standing.lease.expiry();
    loop {
        ticks.tick().await;
        if standing.lease.reaches_leader(REACH_WINDOW) {
            if mode != Mode::Led {
                tracing::info!("a leader acknowledges this agent again");
                mode = Mode::Led;
                connections.clear();
            }
            continue;
        }
        let ends = *expiry.borrow();
        let Some(ends) = ends else { continue };
        if ends > Instant::now() + CHECK_AHEAD {
            continue;
        }
        let Some(roster) = standing.roster.borrow().clone() else {
            continue;
        };
        let started = Instant::now();
        let answers = ask_all(&endpoint, &node, &roster, &mut connections).await;
        match judge(&roster, &node, &answers) {
            Verdict::Keep { agreeing, of } => {
                standing
                    .lease
                    .extend_by_peers(started, peer_keep(standing.lease.length()));
                if mode != Mode::Keeping {
                    tracing::warn!(
                        agreeing,
                        of,
                        "no leader acknowledges this agent, and {agreeing} of the {of} nodes (this one included) reach none either: the controllers are away, not this node; its jobs keep running"
                    );
                    mode = Mode::Keeping;
                }
            }
            Verdict::Fence {
                agreeing,
                needed,
                of,
                reaching_leader,
            } => {
                if mode != Mode::Refused {
                    tracing::warn!(
                        agreeing,
                        needed,
                        of,
                        ?reaching_leader,
                        "no leader acknowledges this agent and only {agreeing} of the {of} nodes (this one included; {needed} needed) reach none either: this node may be the one cut off, so its jobs end when its lease does"
                    );
                    mode = Mode::Refused;
                }
            }
        }
    }
}

/// Asks every other member of `roster` at once; those that do not answer
/// within [`ANSWER_WITHIN`] are left out. Connections are kept for the next
/// check.
async fn ask_all(
    endpoint: &quinn::Endpoint,
    me: &str,
    roster: &Roster,
    connections: &mut HashMap<String, quinn::Connection>,
) -> Vec<Answer> {
    let mut asks = JoinSet::new();
    for (node, address) in &roster.members {
        let Some(address) = address.clone() else {
            continue;
        };
        if node == me {
            continue;
        }
        let known = connections
            .remove(node)
            .filter(|c| c.close_reason().is_none());
        let (endpoint, node) = (endpoint.clone(), node.clone());
        asks.spawn(async move {
            let asked = ask(&endpoint, known, &node, &address).await;
            (node, asked)
        });
    }
    let mut answers = Vec::new();
    let deadline = Instant::now() + ANSWER_WITHIN;
    while let Ok(Some(done)) = tokio::time::timeout_at(deadline, asks.join_next()).await {
        let Ok((node, asked)) = done else { continue };
        match asked {
            Ok((connection, answer)) => {
                connections.insert(node, connection);
                answers.push(answer);
            }
            Err(e) => tracing::debug!(%node, "asking whether a leader reaches it: {e}"),
        }
    }
    asks.abort_all();
    answers
}

/// Asks `node`'s agent at `address` (over `connection` when one is open).
async fn ask(
    endpoint: &quinn::Endpoint,
    connection: Option<quinn::Connection>,
    node: &str,
    address: &str,
) -> Result<(quinn::Connection, Answer), String> {
    let connection = match connection {
        Some(connection) => connection,
        None => {
            let target = crate::step::peer::resolve(address).await?;
            endpoint
                .connect(target, node)
                .map_err(|e| e.to_string())?
                .await
                .map_err(|e| e.to_string())?
        }
    };
    let (mut send, mut recv) = connection.open_bi().await.map_err(|e| e.to_string())?;
    write_frame(&mut send, &StepControl::Reach)
        .await
        .map_err(|e| e.to_string())?;
    let _ = send.finish();
    match read_frame::<_, StepEvent>(&mut recv).await {
        Ok(Some(StepEvent::Reach {
            reaches_leader,
            roster,
        })) => Ok((
            connection,
            Answer {
                node: node.to_string(),
                reaches_leader,
                roster,
            },
        )),
        Ok(other) => Err(format!("answered {other:?}")),
        Err(e) => Err(e.to_string()),
    }
}
