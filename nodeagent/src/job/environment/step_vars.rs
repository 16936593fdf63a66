//! What a task of a step sees beyond the batch environment: its ranks, the
//! step's number, size, layout and distribution as `srun` sets them, and the
//! GPUs it is bound to.
//!
//! GPUs: every task sees the job's GPUs on its node (`SLURM_STEP_GPUS` lists
//! them too), unless the step has `--gpus-per-task=N`, which in Slurm 22.05
//! implies `--gpu-bind=per_task:N`: the task of local rank L then sees the
//! node's job GPUs L*N to L*N+N-1 (ascending), as `CUDA_VISIBLE_DEVICES`,
//! `GPU_DEVICE_ORDINAL` and `SLURM_STEP_GPUS`, with
//! `SLURMD_TRES_BIND=gpu:per_task:N`.

use corral_proto::step::StepLayout;
use corral_state::slurm::hostlist;
use corral_state::slurm::repeated_counts::compress_counts;

use super::{Env, NO_GPU_DEVICES, TaskPlacement, gpu_list, set};

/// Sets the task's `SLURM_PROCID`, `SLURM_LOCALID` and `SLURM_NODEID` (its
/// node's index among the step's nodes), the step's `SLURM_STEP_ID` /
/// `SLURM_STEPID`, `SLURM_NTASKS` / `SLURM_NPROCS` / `SLURM_STEP_NUM_TASKS`,
/// `SLURM_STEP_NODELIST`, `SLURM_STEP_NUM_NODES` and `SLURM_NNODES`,
/// `SLURM_GTIDS` (the global ranks on this node), and
/// `SLURM_TASKS_PER_NODE` / `SLURM_STEP_TASKS_PER_NODE`, `SLURM_DISTRIBUTION`,
/// and the GPU variables (see the module docs); `node_gpus` are the job's
/// GPUs on the task's node.
pub(super) fn add(env: &mut Env, step: &StepLayout, task: TaskPlacement, node_gpus: &[u32]) {
    set(env, "SLURM_PROCID", task.procid);
    set(env, "SLURM_LOCALID", task.localid);
    set(env, "SLURM_NODEID", task.nodeid);
    set(env, "SLURM_STEP_ID", step.step);
    set(env, "SLURM_STEPID", step.step);
    set(env, "SLURM_NTASKS", task.ntasks);
    set(env, "SLURM_NPROCS", task.ntasks);
    set(env, "SLURM_STEP_NUM_TASKS", task.ntasks);
    let nodes: Vec<&str> = step.nodes.iter().map(String::as_str).collect();
    set(env, "SLURM_STEP_NODELIST", hostlist::compress(&nodes));
    set(env, "SLURM_STEP_NUM_NODES", nodes.len());
    set(env, "SLURM_NNODES", nodes.len());
    // The global ranks of the step's tasks on this node: 3,4,5 (block) or
    // 1,3,5 (cyclic).
    let gtids: Vec<String> = step
        .nodes
        .get(task.nodeid as usize)
        .and_then(|node| step.ranks_on(node))
        .map(|(ranks, _)| ranks.iter().map(u32::to_string).collect())
        .unwrap_or_default();
    set(env, "SLURM_GTIDS", gtids.join(","));
    let tasks_per_node = compress_counts(&step.tasks);
    set(env, "SLURM_TASKS_PER_NODE", &tasks_per_node);
    set(env, "SLURM_STEP_TASKS_PER_NODE", &tasks_per_node);
    set(env, "SLURM_DISTRIBUTION", step.distribution.slurm_name());
    add_gpus(env, step, task, node_gpus);
}

/// The GPUs the task sees (see the module docs).
fn add_gpus(env: &mut Env, step: &StepLayout, task: TaskPlacement, node_gpus: &[u32]) {
    let mut gpus = node_gpus.to_vec();
    gpus.sort_unstable();
    gpus.dedup();
    if let Some(per_task) = step.gpus_per_task.filter(|n| *n > 0) {
        let first = task.localid.saturating_mul(per_task) as usize;
        let last = first.saturating_add(per_task as usize).min(gpus.len());
        gpus = gpus
            .get(first..last)
            .map(<[u32]>::to_vec)
            .unwrap_or_default();
        set(env, "SLURMD_TRES_BIND", format!("gpu:per_task:{per_task}"));
    }
    if gpus.is_empty() {
        if step.gpus_per_task.is_some() {
            set(env, "CUDA_VISIBLE_DEVICES", NO_GPU_DEVICES);
            env.remove("GPU_DEVICE_ORDINAL");
        }
        return;
    }
    let list = gpu_list(&gpus);
    set(env, "SLURM_STEP_GPUS", &list);
    if step.gpus_per_task.is_some() {
        set(env, "CUDA_VISIBLE_DEVICES", &list);
        set(env, "GPU_DEVICE_ORDINAL", &list);
    }
}
