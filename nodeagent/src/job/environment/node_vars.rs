//! What is particular to this node: its name, its index in the job, its CPUs and
//! the GPUs the job holds on it.

use super::layout::NodeLayout;
use super::{Env, LaunchContext, NO_GPU_DEVICES, gpu_list, set};

/// Sets `SLURMD_NODENAME`, `HOSTNAME`, `SLURM_TOPOLOGY_ADDR` and its pattern
/// (the node alone, `node`, in a flat cluster, as Slurm's `topology/none`),
/// the batch process's ranks
/// (`SLURM_NODEID`, `SLURM_PROCID`, `SLURM_GTIDS`: the node's index;
/// `SLURM_LOCALID`: 0),
/// `SLURM_CPUS_ON_NODE`, and the GPU variables: `CUDA_VISIBLE_DEVICES`,
/// `GPU_DEVICE_ORDINAL` and `SLURM_JOB_GPUS` (the node's indices of the job's
/// GPUs, ascending) with
/// `SLURM_GPUS_ON_NODE`, or `CUDA_VISIBLE_DEVICES=NoDevFiles` without GPUs.
pub(super) fn add(env: &mut Env, ctx: &LaunchContext<'_>, layout: &NodeLayout<'_>) {
    set(env, "SLURMD_NODENAME", ctx.node);
    set(env, "HOSTNAME", ctx.node);
    match ctx.topology {
        Some(place) => {
            set(env, "SLURM_TOPOLOGY_ADDR", &place.address);
            set(env, "SLURM_TOPOLOGY_ADDR_PATTERN", &place.pattern);
        }
        None => {
            set(env, "SLURM_TOPOLOGY_ADDR", ctx.node);
            set(env, "SLURM_TOPOLOGY_ADDR_PATTERN", "node");
        }
    }
    if let Some(index) = layout.index_of(ctx.node) {
        set(env, "SLURM_NODEID", index);
        set(env, "SLURM_PROCID", index);
        set(env, "SLURM_GTIDS", index);
        set(env, "SLURM_LOCALID", 0);
    }
    let allocation = layout.allocation(ctx.node);
    if let Some(allocation) = allocation {
        set(env, "SLURM_CPUS_ON_NODE", allocation.cpus);
    }
    let mut gpus: Vec<u32> = allocation.map(|a| a.gpus.clone()).unwrap_or_default();
    gpus.sort_unstable();
    gpus.dedup();
    if gpus.is_empty() {
        set(env, "CUDA_VISIBLE_DEVICES", NO_GPU_DEVICES);
        return;
    }
    let list = gpu_list(&gpus);
    set(env, "CUDA_VISIBLE_DEVICES", &list);
    set(env, "GPU_DEVICE_ORDINAL", &list);
    set(env, "SLURM_JOB_GPUS", &list);
    set(env, "SLURM_GPUS_ON_NODE", gpus.len());
}
