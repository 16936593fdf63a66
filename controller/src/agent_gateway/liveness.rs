//! Node liveness, in the leader's memory only (DESIGN.md: soft state): the time of
//! each node's last heartbeat, and the monitor that declares a node down through
//! Raft once its agent's lease and a margin have passed without one. A new leader
//! starts every node's clock afresh, so it gives each agent a full timeout.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use corral_consensus::Replica;
use corral_state::Command;
use corral_state::ids::{Actor, Role};
use corral_state::node::Availability;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::clock;

/// When each node was last heard from (this term).
#[derive(Debug, Default, Clone)]
pub struct Heartbeats {
    last: Arc<Mutex<HashMap<String, Instant>>>,
}

impl Heartbeats {
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
    }
}

/// The leader's actor for commands it makes on its own.
pub fn leader_actor() -> Actor {
    Actor {
        user: "corral".into(),
        role: Role::Admin,
    }
}

/// Declares nodes down while this replica leads. Runs until `stop` turns true.
pub async fn monitor(
    replica: Arc<Replica>,
    heartbeats: Heartbeats,
    down_after: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut leadership = replica.leadership();
    let mut leading_since: Option<Instant> = None;
    let mut ticks = tokio::time::interval(Duration::from_millis(250));
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            changed = leadership.changed() => if changed.is_err() { return },
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        let leads = leadership.borrow().is_self;
        match (leads, leading_since) {
            (false, _) => {
                leading_since = None;
                continue;
            }
            (true, None) => {
                // A new term: every node gets a full timeout from now.
                heartbeats.forget_all();
                leading_since = Some(Instant::now());
                continue;
            }
            (true, Some(_)) => {}
        }
        let since = leading_since.unwrap_or_else(Instant::now);
        let up: Vec<String> = match replica.read_local(|s| {
            s.nodes()
                .values()
                .filter(|n| matches!(n.availability, Availability::Up { .. }))
                .map(|n| n.name.clone())
                .collect()
        }) {
            Ok(up) => up,
            Err(_) => continue,
        };
        let now = Instant::now();
        for node in up {
            let last = heartbeats.last(&node).map_or(since, |l| l.max(since));
            let silent = now.saturating_duration_since(last);
            if silent < down_after {
                continue;
            }
            let reason = format!(
                "no heartbeat from its agent for {:.1} s (lease and margin: {:.1} s)",
                silent.as_secs_f64(),
                down_after.as_secs_f64()
            );
            tracing::warn!(%node, "declaring node down: {reason}");
            let command = Command::NodeDown {
                node: node.clone(),
                reason,
                by: leader_actor(),
                at: clock::now(),
            };
            match replica.propose(command).await {
                Ok(Ok(_)) => heartbeats.beat(&node),
                Ok(Err(rejection)) => tracing::warn!(%node, "node down refused: {rejection}"),
                Err(e) => tracing::warn!(%node, "node down not committed: {e}"),
            }
        }
    }
}
