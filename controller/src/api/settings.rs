//! `ClusterSettings` (scontrol show config): the replicated cluster settings
//! (`ClusterConfig`) and nodes' liveness, the shape of the configured
//! topology, and the answering replica's own KillWait, MailProg and
//! preemption notice. Anyone may read them, as any Slurm user may run
//! `scontrol show config`.

use corral_proto::api::ClusterSettingsReply;
use corral_proto::records;
use tonic::Status;

use super::{ApiContext, status};

/// The settings as this replica has applied them.
pub fn settings(ctx: &ApiContext) -> Result<ClusterSettingsReply, Status> {
    let kill_wait_ms = ctx.config.leader.kill_wait_ms;
    let preempt_send_user_signal = ctx.config.leader.preempt_send_user_signal;
    let mail_program = ctx
        .config
        .leader
        .mail_program
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    ctx.replica
        .read_local(|state| {
            let topology = state.topology();
            let liveness =
                crate::agent_gateway::cluster_liveness::in_force(state, &ctx.config.liveness);
            Ok(ClusterSettingsReply {
                config_json: records::encode("cluster settings", state.config())
                    .map_err(|e| Status::internal(e.to_string()))?,
                liveness_json: records::encode("liveness settings", &liveness)
                    .map_err(|e| Status::internal(e.to_string()))?,
                liveness_replicated: state.liveness().is_some(),
                topology_switches: count(topology.switches.len()),
                topology_blocks: count(topology.blocks.len()),
                kill_wait_ms,
                mail_program,
                preempt_send_user_signal,
                as_of_ms: state.clock().as_ms(),
            })
        })
        .map_err(status::read)?
}

/// A table's size on the wire (saturating: no real topology comes close).
fn count(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}
