//! What a task of a step sees beyond the batch environment: its ranks, and the
//! step's number, size and layout as `srun` sets them.

use corral_proto::step::StepLayout;
use corral_state::slurm::hostlist;
use corral_state::slurm::repeated_counts::compress_counts;

use super::{Env, TaskPlacement, set};

/// Sets the task's `SLURM_PROCID`, `SLURM_LOCALID` and `SLURM_NODEID` (its
/// node's index among the step's nodes), the step's `SLURM_STEP_ID` /
/// `SLURM_STEPID`, `SLURM_NTASKS` / `SLURM_NPROCS` / `SLURM_STEP_NUM_TASKS`,
/// `SLURM_STEP_NODELIST`, `SLURM_STEP_NUM_NODES` and `SLURM_NNODES`,
/// `SLURM_GTIDS` (the global ranks on this node), and
/// `SLURM_TASKS_PER_NODE` / `SLURM_STEP_TASKS_PER_NODE`.
pub(super) fn add(env: &mut Env, step: &StepLayout, task: TaskPlacement) {
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
    // The global ranks of the step's tasks on this node: 3,4,5.
    let on_node = step.tasks.get(task.nodeid as usize).copied().unwrap_or(0);
    let first = task.procid.saturating_sub(task.localid);
    let gtids: Vec<String> = (0..on_node).map(|i| (first + i).to_string()).collect();
    set(env, "SLURM_GTIDS", gtids.join(","));
    let tasks_per_node = compress_counts(&step.tasks);
    set(env, "SLURM_TASKS_PER_NODE", &tasks_per_node);
    set(env, "SLURM_STEP_TASKS_PER_NODE", &tasks_per_node);
}
