//! What a task of a step sees beyond the batch environment: its ranks, and the
//! step's size and layout as `srun` would set them.

use corral_state::job::Job;
use corral_state::slurm::hostlist;
use corral_state::slurm::repeated_counts::compress_counts;

use super::layout::{NodeLayout, block_distribution};
use super::{Env, TaskPlacement, set};

/// Sets the task's `SLURM_PROCID`, `SLURM_LOCALID` and `SLURM_NODEID`, the
/// step's `SLURM_NTASKS` / `SLURM_NPROCS` / `SLURM_STEP_NUM_TASKS`, and, for the
/// nodes the block distribution gives tasks, `SLURM_STEP_NODELIST`,
/// `SLURM_STEP_NUM_NODES` and `SLURM_NNODES`, and `SLURM_TASKS_PER_NODE` /
/// `SLURM_STEP_TASKS_PER_NODE`.
pub(super) fn add(env: &mut Env, job: &Job, layout: &NodeLayout<'_>, task: TaskPlacement) {
    set(env, "SLURM_PROCID", task.procid);
    set(env, "SLURM_LOCALID", task.localid);
    set(env, "SLURM_NODEID", task.nodeid);
    set(env, "SLURM_NTASKS", task.ntasks);
    set(env, "SLURM_NPROCS", task.ntasks);
    set(env, "SLURM_STEP_NUM_TASKS", task.ntasks);
    let counts = block_distribution(task.ntasks, &layout.task_capacity(job.spec.cpus_per_task));
    let (nodes, per_node): (Vec<&str>, Vec<u32>) = layout
        .nodes()
        .iter()
        .zip(&counts)
        .filter(|(_, count)| **count > 0)
        .map(|(allocation, count)| (allocation.node.as_str(), *count))
        .unzip();
    set(env, "SLURM_STEP_NODELIST", hostlist::compress(&nodes));
    set(env, "SLURM_STEP_NUM_NODES", nodes.len());
    set(env, "SLURM_NNODES", nodes.len());
    let tasks_per_node = compress_counts(&per_node);
    set(env, "SLURM_TASKS_PER_NODE", &tasks_per_node);
    set(env, "SLURM_STEP_TASKS_PER_NODE", &tasks_per_node);
}
