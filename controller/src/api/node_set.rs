//! Changes to which nodes the cluster has: a definition naming a new node, or
//! a node's removal. Agents ride through an outage of the controllers on the
//! word of a majority of the roster the leader last gave them, and a leader
//! declares nodes down only while a majority of its roster answers it
//! (`agent_gateway::node_majority`). Two majorities meet only if the rosters
//! differ by one node and the older one is no longer held by a majority, as
//! in Raft's one-server-at-a-time membership changes. So, on the leader, new
//! nodes are added one at a time and a removal is one node, each only once a
//! majority of the nodes holds the roster the previous change made (waiting
//! up to [`PATIENCE`]). In a cluster none of whose nodes has ever registered
//! no agent holds a roster yet: its nodes are defined all at once.

use std::time::Duration;

use corral_proto::admin::AdminChange;
use corral_proto::roster::majority_of;
use corral_state::ids::Actor;
use corral_state::node::NodeDefinition;
use tonic::Status;

use super::{ApiContext, status};
use crate::clock;

/// How long one node's change waits for a majority to hold the roster.
const PATIENCE: Duration = Duration::from_secs(30);

/// How often the wait looks again.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// Whether `change` adds or removes a node, given the nodes defined now.
pub fn changes_node_set(change: &AdminChange, defined: impl Fn(&str) -> bool) -> bool {
    match change {
        AdminChange::DefineNodes(nodes) => nodes.iter().any(|n| !defined(&n.name)),
        AdminChange::RemoveNode(_) => true,
        _ => false,
    }
}

/// Makes `change` (which adds or removes nodes) as `by`, one node at a time.
pub async fn change(ctx: &ApiContext, change: AdminChange, by: Actor) -> Result<(), Status> {
    let leadership = ctx.replica.leadership().borrow().clone();
    if !leadership.is_self {
        return Err(status::not_leader(leadership.leader));
    }
    let _one_at_a_time = ctx.node_set_changes.lock().await;
    let (defined, registered) = ctx
        .replica
        .read_local(|s| {
            let defined: Vec<String> = s.nodes().keys().cloned().collect();
            let registered = s.nodes().values().any(|n| n.registration.is_some());
            (defined, registered)
        })
        .map_err(status::read)?;
    let propose = |change: AdminChange| async {
        ctx.propose_one(change.into_command(by.clone(), clock::now()))
            .await
            .map(|_| ())
    };
    if !registered {
        return propose(change).await;
    }
    match change {
        AdminChange::DefineNodes(nodes) => {
            let (known, new): (Vec<NodeDefinition>, Vec<NodeDefinition>) =
                nodes.into_iter().partition(|n| defined.contains(&n.name));
            if !known.is_empty() {
                propose(AdminChange::DefineNodes(known)).await?;
            }
            for node in new {
                majority_holds_roster(ctx).await?;
                propose(AdminChange::DefineNodes(vec![node])).await?;
            }
            Ok(())
        }
        other => {
            majority_holds_roster(ctx).await?;
            propose(other).await
        }
    }
}

/// Waits until a majority of the roster reaches this leader holding it.
async fn majority_holds_roster(ctx: &ApiContext) -> Result<(), Status> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let leadership = ctx.replica.leadership().borrow().clone();
        if !leadership.is_self {
            return Err(status::not_leader(leadership.leader));
        }
        let (digest, size) = ctx
            .replica
            .read_local(|s| {
                let roster = crate::agent_gateway::liveness::roster_of(s);
                (roster.digest, roster.members.len())
            })
            .map_err(status::read)?;
        let holding = ctx.heartbeats.reaching(digest).len();
        let needed = majority_of(size);
        if holding >= needed {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Status::failed_precondition(format!(
                "only {holding} of the {size} nodes answer this leader holding the current node list, and {needed} must before another node is added or removed: agents keep their jobs through an outage of the controllers on the word of a majority of the node list they hold, and that is safe only if each list differs from the last by one node that a majority has heard of. Start the nodes' agents (or wait for them to reattach) and try again"
            )));
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> NodeDefinition {
        NodeDefinition {
            name: name.into(),
            cpus: 8,
            memory_mb: 1024,
            gpus: Vec::new(),
            features: Default::default(),
        }
    }

    #[test]
    fn only_new_names_and_removals_change_the_node_set() {
        let defined = |n: &str| n == "gpu01";
        assert!(!changes_node_set(
            &AdminChange::DefineNodes(vec![node("gpu01")]),
            defined
        ));
        assert!(changes_node_set(
            &AdminChange::DefineNodes(vec![node("gpu01"), node("gpu02")]),
            defined
        ));
        assert!(changes_node_set(
            &AdminChange::RemoveNode("gpu01".into()),
            defined
        ));
        assert!(!changes_node_set(
            &AdminChange::RemovePartition("p".into()),
            defined
        ));
    }
}
