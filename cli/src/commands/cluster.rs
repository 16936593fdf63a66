//! `corral cluster` and `corral whoami`.

use std::process::ExitCode;

use corral_proto::api::Empty;

use crate::connection::{Cluster, Retry};
use crate::format::cluster_status;

/// Members, leader, term, indexes.
pub async fn run(cluster: &Cluster, json: bool) -> anyhow::Result<ExitCode> {
    let reply = cluster
        .call(Retry::Idempotent, |mut c| async move {
            c.cluster_status(Empty {}).await
        })
        .await?;
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
        }))?;
    } else {
        print!("{}", cluster_status(&reply));
    }
    Ok(ExitCode::SUCCESS)
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
