//! `corral cluster` and `corral whoami`.

use std::process::ExitCode;

use corral_proto::api::corral_client::CorralClient;
use corral_proto::api::{ClusterStatusReply, Empty};

use crate::connection::{Cluster, FIRST_ROUND_DEADLINE, Retry};
use crate::format::cluster_status;

/// Members, leader, term, indexes, as the leader sees them when one answers.
pub async fn run(cluster: &Cluster, json: bool) -> anyhow::Result<ExitCode> {
    let first = cluster
        .call(Retry::Idempotent, |mut c| async move {
            c.cluster_status(Empty {}).await
        })
        .await?;
    let reply = leader_view(cluster, first).await;
    if json {
        let members: Vec<serde_json::Value> = reply
            .members
            .iter()
            .map(|m| {
                serde_json::json!({
                    "id": m.id, "peer": m.peer_addr, "api": m.api_addr, "voter": m.voter, "lag": m.lag,
                    "clock_offset_ms": m.clock_offset_ms,
                })
            })
            .collect();
        super::print_json(&serde_json::json!({
            "cluster": reply.cluster_name,
            "answered_by": reply.this_id,
            "leader": reply.leader_id,
            "leader_api": reply.leader_api_addr,
            "term": reply.term,
            "last_log_index": reply.last_log_index,
            "last_applied": reply.last_applied,
            "members": members,
            "state_digest": reply.state_digest,
            "jobs_pending": reply.jobs_pending,
            "jobs_running": reply.jobs_running,
            "nodes": reply.nodes,
            "clock_ms": reply.clock_ms,
            "leadership_unconfirmed": reply.leadership_unconfirmed,
        }))?;
    } else {
        print!("{}", cluster_status(&reply));
    }
    Ok(ExitCode::SUCCESS)
}

/// The leader's own answer, when `first` came from another replica (a
/// follower, or a leader cut off from the others that can no longer confirm it
/// leads) and the leader, or any replica that knows one, answers; else `first`.
pub(crate) async fn leader_view(
    cluster: &Cluster,
    first: ClusterStatusReply,
) -> ClusterStatusReply {
    if first.leader_id == Some(first.this_id) {
        return first;
    }
    let answered = first
        .members
        .iter()
        .find(|m| m.id == first.this_id)
        .map(|m| m.api_addr.clone());
    let mut candidates: Vec<String> = Vec::new();
    for address in std::iter::once(first.leader_api_addr.clone())
        .chain(first.members.iter().map(|m| m.api_addr.clone()))
        .chain(cluster.addresses().iter().cloned())
    {
        if !address.is_empty()
            && Some(&address) != answered.as_ref()
            && !candidates.contains(&address)
        {
            candidates.push(address);
        }
    }
    for address in candidates {
        let asked = tokio::time::timeout(FIRST_ROUND_DEADLINE, async {
            let channel = cluster.connect(&address).await.ok()?;
            let reply = CorralClient::new(channel)
                .cluster_status(Empty {})
                .await
                .ok()?;
            Some(reply.into_inner())
        })
        .await;
        if let Ok(Some(reply)) = asked
            && reply.leader_id == Some(reply.this_id)
        {
            return reply;
        }
    }
    first
}

/// The name and role in our certificate, as the cluster reads them.
pub async fn whoami(cluster: &Cluster, json: bool) -> anyhow::Result<ExitCode> {
    let reply = cluster
        .call(Retry::Idempotent, |mut c| async move {
            c.who_am_i(Empty {}).await
        })
        .await?;
    if json {
        super::print_json(&serde_json::json!({ "name": reply.name, "role": reply.role }))?;
    } else {
        println!("{} ({})", reply.name, reply.role);
    }
    Ok(ExitCode::SUCCESS)
}
