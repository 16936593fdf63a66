//! scontrol's `show config`: the cluster's settings (`ClusterSettings`) and
//! controllers (`ClusterStatus`) in Slurm's `Key = Value` layout, then a line
//! per controller replica saying whether it answers, as scontrol ends it.
//! Exit 0 when any controller answers, as scontrol does.

use std::process::ExitCode;

use corral_proto::api::Empty;
use corral_proto::records;
use corral_state::Timestamp;
use corral_state::config::ClusterConfig;
use corral_state::node_liveness::NodeLiveness;

use super::nodes::{cluster_status, print_probes, probe_controllers};
use super::older_controller;
use crate::connection::{Cluster, Retry};
use crate::format::show_config::{ConfigRecord, show_config};

/// `show config` (a key after it is accepted and, as in Slurm 22.05, changes
/// nothing: every key is printed).
pub async fn show(cluster: &Cluster) -> anyhow::Result<ExitCode> {
    let reply = cluster
        .call(Retry::Idempotent, |mut c| async move {
            c.cluster_settings(Empty {}).await
        })
        .await
        .map_err(|e| older_controller(e, "scontrol show config"))?;
    let config: ClusterConfig = records::decode("cluster settings", &reply.config_json)?;
    let liveness: Option<NodeLiveness> = if reply.liveness_json.is_empty() {
        None
    } else {
        Some(records::decode("liveness settings", &reply.liveness_json)?)
    };
    let status = cluster_status(cluster).await?;
    let mut members = status.members.clone();
    members.sort_by_key(|m| m.id);
    let controllers: Vec<String> = members.into_iter().map(|m| m.api_addr).collect();
    print!(
        "{}",
        show_config(&ConfigRecord {
            config: &config,
            topology_switches: reply.topology_switches,
            topology_blocks: reply.topology_blocks,
            kill_wait_secs: reply.kill_wait_ms / 1000,
            mail_program: (!reply.mail_program.is_empty()).then_some(reply.mail_program.as_str()),
            preempt_send_user_signal: reply.preempt_send_user_signal,
            controllers: &controllers,
            as_of: Timestamp(reply.as_of_ms),
            liveness: liveness.map(|l| (l, reply.liveness_replicated)),
        })
    );
    println!();
    let probes = probe_controllers(cluster, &status).await;
    print_probes(&probes);
    if probes.iter().any(|p| p.up) {
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(1))
    }
}
