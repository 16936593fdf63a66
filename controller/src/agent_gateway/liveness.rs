//! Node liveness, in the leader's memory only (DESIGN.md: soft state): the time of
//! each node's last heartbeat, and the monitor that declares a node down through
//! Raft once its agent's lease and a margin have passed without one. A new leader
//! starts every node's clock afresh, so it gives each agent a full timeout.
//! Sooner, after a few missed heartbeats, the monitor marks a node not
//! responding (Slurm's NOT_RESPONDING): scheduling passes start nothing there
//! until it answers, so a gang is not dispatched half onto a node that may be
//! cut off; what runs there is left alone.
//!
//! A heartbeat renews the agent's lease only once a quorum has confirmed this
//! replica's leadership after it arrived (`LeaderConfirmation`): openraft does not
//! make a leader cut off from the majority step down, and such a leader must not
//! keep its agents' jobs running while the new leader requeues them.
//!
//! A silent node is declared down only while a majority of the roster (every
//! defined node) reaches this leader and has for the whole wait
//! (`node_majority`): otherwise the silence may be this leader's own, or an
//! outage every agent rides through on the other nodes' word. The monitor
//! also keeps the roster the sessions hand to agents.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use corral_consensus::Replica;
use corral_proto::roster::Roster;
use corral_state::Command;
use corral_state::ids::{Actor, Role};
use corral_state::node::Availability;
use corral_state::node_liveness::NodeLiveness;

use super::cluster_liveness;
use tokio::sync::watch;
use tokio::time::Instant;

use super::node_majority::{self, Echo, Gate, Runs};
use crate::clock;
use crate::retry_pause::RetryPause;

/// When each node was last heard from (this term), which nodes have been
/// silent for a few heartbeats, each node's latest heartbeat that confirmed
/// the way back, and the roster.
#[derive(Debug, Clone)]
pub struct Heartbeats {
    last: Arc<Mutex<HashMap<String, Instant>>>,
    not_responding: Arc<Mutex<BTreeSet<String>>>,
    echoes: Arc<Mutex<HashMap<String, Echo>>>,
    roster: Arc<watch::Sender<Option<Arc<Roster>>>>,
}

impl Default for Heartbeats {
    fn default() -> Self {
        Heartbeats {
            last: Arc::default(),
            not_responding: Arc::default(),
            echoes: Arc::default(),
            roster: Arc::new(watch::channel(None).0),
        }
    }
}

impl Heartbeats {
    /// Records a heartbeat of `node` that echoed an acknowledgement sent at
    /// `ack_sent` and named the roster it holds.
    pub fn echo(&self, node: &str, echo: Echo) {
        if let Ok(mut echoes) = self.echoes.lock() {
            echoes.insert(node.to_string(), echo);
        }
    }

    /// The nodes that reach this leader now holding the roster `digest`.
    pub fn reaching(&self, digest: corral_proto::roster::RosterDigest) -> BTreeSet<String> {
        self.echoes
            .lock()
            .map(|echoes| node_majority::reaching(&echoes, digest, Instant::now()))
            .unwrap_or_default()
    }

    /// Follows the roster sessions hand to agents.
    pub fn roster(&self) -> watch::Receiver<Option<Arc<Roster>>> {
        self.roster.subscribe()
    }

    /// Publishes `roster` when it differs from the one held.
    fn publish_roster(&self, roster: Roster) {
        self.roster.send_if_modified(|held| {
            if held.as_deref() == Some(&roster) {
                return false;
            }
            *held = Some(Arc::new(roster));
            true
        });
    }

    /// Records a heartbeat (or any message) from `node`.
    pub fn beat(&self, node: &str) {
        if let Ok(mut last) = self.last.lock() {
            last.insert(node.to_string(), Instant::now());
        }
    }

    fn last(&self, node: &str) -> Option<Instant> {
        self.last.lock().ok().and_then(|l| l.get(node).copied())
    }

    fn forget_all(&self) {
        if let Ok(mut last) = self.last.lock() {
            last.clear();
        }
        if let Ok(mut echoes) = self.echoes.lock() {
            echoes.clear();
        }
        self.mark_not_responding(BTreeSet::new());
    }

    /// The nodes silent for a few heartbeats: no new work goes there.
    pub fn not_responding(&self) -> BTreeSet<String> {
        self.not_responding
            .lock()
            .map(|set| set.clone())
            .unwrap_or_default()
    }

    /// Replaces the not-responding set, logging each change.
    fn mark_not_responding(&self, now: BTreeSet<String>) {
        let Ok(mut set) = self.not_responding.lock() else {
            return;
        };
        for node in now.difference(&set) {
            tracing::warn!(%node, "node not responding: no heartbeat lately; no new work goes there until it answers");
        }
        for node in set.difference(&now) {
            tracing::info!(%node, "node responding again");
        }
        *set = now;
    }
}

/// When this replica's leadership was last confirmed by a quorum: the instant
/// the latest successful confirmation began (every voter that answered it had
/// not yet voted for a newer leader, so no newer leader began before then).
#[derive(Debug, Clone)]
pub struct LeaderConfirmation {
    confirmed: Arc<watch::Sender<Option<Instant>>>,
}

impl Default for LeaderConfirmation {
    fn default() -> Self {
        LeaderConfirmation {
            confirmed: Arc::new(watch::channel(None).0),
        }
    }
}

impl LeaderConfirmation {
    /// Follows the confirmations.
    pub fn subscribe(&self) -> watch::Receiver<Option<Instant>> {
        self.confirmed.subscribe()
    }

    fn confirmed_from(&self, start: Instant) {
        self.confirmed.send_replace(Some(start));
    }
}

/// How often the leader confirms its leadership for heartbeat acknowledgements.
const CONFIRM_EVERY: Duration = Duration::from_millis(100);

/// Confirms this replica's leadership with a quorum, over and over, while it
/// leads. Runs until `stop` turns true.
pub async fn confirm_leadership(
    replica: Arc<Replica>,
    confirmation: LeaderConfirmation,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if *stop.borrow() {
            return;
        }
        if replica.leadership().borrow().is_self {
            let start = Instant::now();
            let confirmed = tokio::select! {
                read = tokio::time::timeout(Duration::from_secs(2), replica.read(|_| ())) => matches!(read, Ok(Ok(()))),
                _ = stop.changed() => return,
            };
            if confirmed {
                confirmation.confirmed_from(start);
            }
        }
        tokio::select! {
            () = tokio::time::sleep(CONFIRM_EVERY) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Heartbeats received (sequence number, when) and not yet acknowledged.
pub type PendingAcks = VecDeque<(u64, Instant)>;

/// Takes out the heartbeats that may be acknowledged: those received before a
/// quorum confirmation that began at `confirmed` (in arrival order).
pub fn acknowledgeable(pending: &mut PendingAcks, confirmed: Option<Instant>) -> Vec<u64> {
    let Some(confirmed) = confirmed else {
        return Vec::new();
    };
    let mut out = Vec::new();
    while let Some((seq, _)) = pending.front().filter(|(_, at)| *at <= confirmed) {
        out.push(*seq);
        pending.pop_front();
    }
    out
}

/// The leader's actor for commands it makes on its own.
pub fn leader_actor() -> Actor {
    Actor {
        user: "corral".into(),
        role: Role::Admin,
    }
}

/// Declares nodes down while this replica leads, and marks those silent for
/// a few heartbeats as not responding, by the cluster's liveness settings
/// (this controller's `file_liveness` until it has some:
/// [`super::cluster_liveness`]). Runs until `stop` turns true.
pub async fn monitor(
    replica: Arc<Replica>,
    heartbeats: Heartbeats,
    file_liveness: NodeLiveness,
    mut stop: watch::Receiver<bool>,
) {
    let mut leadership = replica.leadership();
    let without_quorum = replica.leads_without_quorum();
    // The term this replica leads in, and since when (a lost and regained
    // leadership is a new term even if the watch coalesced the changes).
    let mut leading: Option<(u64, Instant)> = None;
    let mut ticks = tokio::time::interval(Duration::from_millis(250));
    // After a declaration that did not commit, the next waits a pause that
    // doubles: a leader that cannot commit does not propose (and log) the
    // same declarations four times a second.
    let mut pause = RetryPause::new(
        Duration::from_millis(500),
        Duration::from_secs(8),
        Duration::MAX,
    );
    let mut next_try = Instant::now();
    let mut runs = Runs::default();
    // The silent nodes last withheld from a declaration, so each change is
    // logged once.
    let mut withheld: BTreeSet<String> = BTreeSet::new();
    // Whether this term's state has been read linearizably: a replica that
    // leads again at once after a restart (its vote survived) may not have
    // applied its log yet, and its local state is then empty or old.
    let mut caught_up = false;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            changed = leadership.changed() => if changed.is_err() { return },
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        let (leads, term) = {
            let l = leadership.borrow();
            (l.is_self, l.term)
        };
        let since = match (leads, leading) {
            (false, _) => {
                if leading.take().is_some() {
                    heartbeats.mark_not_responding(BTreeSet::new());
                    runs.clear();
                }
                continue;
            }
            (true, Some((led, since))) if led == term => since,
            (true, _) => {
                // A new term: every node gets a full timeout from now.
                heartbeats.forget_all();
                runs.clear();
                caught_up = false;
                leading = Some((term, Instant::now()));
                continue;
            }
        };
        if !caught_up {
            let read = tokio::time::timeout(Duration::from_secs(2), replica.read(|_| ()));
            tokio::select! {
                read = read => caught_up = matches!(read, Ok(Ok(()))),
                _ = stop.changed() => return,
            }
            if !caught_up {
                continue;
            }
        }
        let Ok((up, roster, not_responding_after)) = replica.read_local(|s| {
            let up: Vec<(String, Duration)> = s
                .nodes()
                .values()
                .filter(|n| matches!(n.availability, Availability::Up { .. }))
                .map(|n| {
                    let down_after = cluster_liveness::down_after(s, &file_liveness, n);
                    (n.name.clone(), down_after)
                })
                .collect();
            let not_responding = cluster_liveness::not_responding_after(s, &file_liveness);
            (up, roster_of(s), not_responding)
        }) else {
            continue;
        };
        let roster_size = roster.members.len();
        let digest = roster.digest;
        heartbeats.publish_roster(roster);
        let now = Instant::now();
        if *without_quorum.borrow() {
            runs.clear();
        } else {
            runs.observe(now, &heartbeats.reaching(digest));
        }
        let quiet_after: Vec<(String, Duration)> = up
            .iter()
            .map(|(node, _)| (node.clone(), not_responding_after))
            .collect();
        let quiet = silent_nodes(&quiet_after, |node| heartbeats.last(node), since, now);
        heartbeats.mark_not_responding(quiet.into_iter().map(|(node, _, _)| node).collect());
        let silent = silent_nodes(&up, |node| heartbeats.last(node), since, now);
        // A majority must have reached this leader for the longest timeout
        // among the nodes to declare.
        let down_after = silent
            .iter()
            .map(|(_, _, after)| *after)
            .max()
            .unwrap_or_default();
        // A leader no quorum acknowledges cannot commit a declaration (and
        // may be the one cut off): it declares nothing until a quorum answers.
        if silent.is_empty() || *without_quorum.borrow() || now < next_try {
            if silent.is_empty() {
                withheld.clear();
            }
            continue;
        }
        if let Gate::Closed { held, needed, of } =
            node_majority::gate(runs.held(now, down_after), roster_size)
        {
            let names: BTreeSet<String> = silent.iter().map(|(n, _, _)| n.clone()).collect();
            if names != withheld {
                tracing::warn!(
                    silent = ?names,
                    "not declaring {} silent node(s) down: only {held} of the {of} nodes have reached this leader for the last {:.0} s ({needed} needed), so this may be an outage on the controllers' side, which agents ride through; once a majority answers, they are declared down, or an operator does it now with `scontrol update NodeName=... State=DOWN`",
                    names.len(),
                    down_after.as_secs_f64()
                );
                withheld = names;
            }
            continue;
        }
        withheld.clear();
        // Every due node in one proposal: a slow commit for one node must not
        // hold up the others' declarations.
        let at = clock::now();
        let commands: Vec<Command> = silent
            .iter()
            .map(|(node, quiet, down_after)| {
                let reason = format!(
                    "no heartbeat from its agent for {:.1} s (lease and margin: {:.1} s)",
                    quiet.as_secs_f64(),
                    down_after.as_secs_f64()
                );
                tracing::warn!(%node, "declaring node down: {reason}");
                Command::NodeDown {
                    node: node.clone(),
                    reason,
                    by: leader_actor(),
                    at,
                }
            })
            .collect();
        match replica.propose_all(commands).await {
            Ok(results) => {
                pause.reset();
                for ((node, _, _), result) in silent.iter().zip(results) {
                    match result {
                        Ok(_) => heartbeats.beat(node),
                        Err(rejection) => {
                            tracing::warn!(%node, "node down refused: {rejection}");
                        }
                    }
                }
            }
            Err(e) => {
                let wait = pause.after(Duration::ZERO);
                next_try = Instant::now() + wait;
                tracing::warn!(
                    in_a_row = pause.failures(),
                    "node down not committed: {e}; trying again in {wait:?}"
                );
            }
        }
    }
}

/// The roster: every defined node, with its agent's step address.
pub(crate) fn roster_of(state: &corral_state::ClusterState) -> Roster {
    Roster::new(
        state
            .nodes()
            .values()
            .map(|n| {
                let address = n.registration.as_ref().and_then(|r| r.step_address.clone());
                (n.name.clone(), address)
            })
            .collect(),
    )
}

/// The nodes of `up` silent for their timeout (given beside each) or longer
/// by `now`, with how long and the timeout: each counted from its last
/// heartbeat (`last`), and never from before `since`, when this replica
/// began to lead.
pub fn silent_nodes(
    up: &[(String, Duration)],
    last: impl Fn(&str) -> Option<Instant>,
    since: Instant,
    now: Instant,
) -> Vec<(String, Duration, Duration)> {
    up.iter()
        .filter_map(|(node, after)| {
            let heard = last(node).map_or(since, |l| l.max(since));
            let quiet = now.saturating_duration_since(heard);
            (quiet >= *after).then(|| (node.clone(), quiet, *after))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_silent_from_its_last_heartbeat_or_the_election_whichever_is_later() {
        let elected = Instant::now();
        let at = |s: u64| elected + Duration::from_secs(s);
        let down_after = Duration::from_secs(15);
        let up: Vec<(String, Duration)> = ["a", "b", "c"]
            .iter()
            .map(|n| (n.to_string(), down_after))
            .collect();
        let last = |node: &str| match node {
            "a" => Some(at(2)),
            // Heard only under the previous leader.
            "b" => elected.checked_sub(Duration::from_secs(60)),
            _ => None,
        };
        assert!(silent_nodes(&up, last, elected, at(14)).is_empty());
        let due: Vec<String> = silent_nodes(&up, last, elected, at(15))
            .into_iter()
            .map(|(n, _, _)| n)
            .collect();
        assert_eq!(due, vec!["b", "c"]);
        assert_eq!(
            silent_nodes(&up, last, elected, at(17)),
            vec![
                ("a".to_string(), Duration::from_secs(15), down_after),
                ("b".to_string(), Duration::from_secs(17), down_after),
                ("c".to_string(), Duration::from_secs(17), down_after)
            ]
        );
        // Each node by its own timeout (one that may hold an older, longer lease).
        let mixed = vec![
            ("a".to_string(), down_after),
            ("b".to_string(), Duration::from_secs(30)),
        ];
        let due: Vec<String> = silent_nodes(&mixed, last, elected, at(20))
            .into_iter()
            .map(|(n, _, _)| n)
            .collect();
        assert_eq!(due, vec!["a"]);
    }

    #[test]
    fn a_heartbeat_is_acknowledged_only_after_a_later_quorum_confirmation() {
        let start = Instant::now();
        let later = start + Duration::from_millis(50);
        let mut pending = PendingAcks::from([(1, start), (2, later)]);
        assert!(acknowledgeable(&mut pending, None).is_empty());
        // A confirmation that began before heartbeat 2 arrived says nothing about
        // whether this replica still led when it did.
        assert_eq!(acknowledgeable(&mut pending, Some(start)), vec![1]);
        assert_eq!(pending.len(), 1);
        assert!(acknowledgeable(&mut pending, Some(later - Duration::from_millis(1))).is_empty());
        assert_eq!(acknowledgeable(&mut pending, Some(later)), vec![2]);
        assert!(pending.is_empty());
    }
}
