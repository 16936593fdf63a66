//! The environment Slurm gives a batch script and the tasks of its steps, built
//! as a pure function of the job record, so every name, value and format can be
//! checked against sbatch's "OUTPUT ENVIRONMENT VARIABLES" without starting
//! anything.
//!
//! The job's exported environment (the `BatchScript`'s) comes first; every
//! variable this module manages is then removed from it and set afresh, so a
//! `SLURM_*` value the submitting shell carried from another job never leaks into
//! this one. Variables Slurm sets only when the user asked for something
//! (`--cpus-per-task`, `--mem`, `--ntasks`, ...) are set here under the same
//! conditions.
//!
//! Node order: per-node lists (`SLURM_TASKS_PER_NODE`, `SLURM_JOB_CPUS_PER_NODE`)
//! and node indices (`SLURM_NODEID`) follow `SLURM_JOB_NODELIST`, which is
//! hostlist-sorted, as in Slurm. When the allocation lists its batch host first
//! in that order (as Slurm's always does), the batch host is node 0.
//!
//! GPUs: `CUDA_VISIBLE_DEVICES` lists the GPU indices allocated on this node as
//! the node numbers them (Slurm's behaviour with `ConstrainDevices=no`: corral
//! does not confine devices with cgroups, so the global index is the one CUDA
//! sees). A job without GPUs on a node gets `CUDA_VISIBLE_DEVICES=NoDevFiles`,
//! the value Slurm's GPU plugin used for that case: with no device cgroup it is
//! the only thing that keeps such a job off GPUs other jobs hold. On a node
//! with MIG instances the agent names them by UUID last ([`name_gpu_devices`]).

mod array_vars;
mod corral_vars;
mod gpu_devices;
mod job_vars;
pub mod layout;
pub mod login_vars;
mod node_vars;
mod request_vars;
mod shape_vars;
mod step_vars;

use std::collections::BTreeMap;
use std::fmt::Display;

use corral_proto::step::StepLayout;
use corral_state::job::{Attempt, Job};
use corral_state::topology::TopologyAddress;

pub use gpu_devices::name_gpu_devices;
use layout::NodeLayout;

/// What one launch of a job on one node needs to know.
#[derive(Debug, Clone, Copy)]
pub struct LaunchContext<'a> {
    /// The job.
    pub job: &'a Job,
    /// The attempt being launched.
    pub attempt: &'a Attempt,
    /// This node's name (one of the attempt's allocation).
    pub node: &'a str,
    /// The cluster's name (`SLURM_CLUSTER_NAME`).
    pub cluster_name: &'a str,
    /// Where this attempt writes checkpoints (`CORRAL_CHECKPOINT_DIR`).
    pub checkpoint_dir: &'a str,
    /// The job's exported environment (the `BatchScript`'s).
    pub base_env: &'a BTreeMap<String, String>,
    /// The leader that sent the launch: replica id and term.
    pub dispatched_by: (u64, u64),
    /// Where this node sits in the switch tree; `None` in a flat cluster.
    pub topology: Option<&'a TopologyAddress>,
}

/// One task of a step: its rank in the step, on its node, and the node's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskPlacement {
    /// Rank among all the step's tasks (`SLURM_PROCID`).
    pub procid: u32,
    /// Rank among the step's tasks on this node (`SLURM_LOCALID`).
    pub localid: u32,
    /// This node's index in `SLURM_JOB_NODELIST` (`SLURM_NODEID`).
    pub nodeid: u32,
    /// Tasks in the step (`SLURM_NTASKS`).
    pub ntasks: u32,
}

/// What `CUDA_VISIBLE_DEVICES` holds on a node where the job has no GPUs.
pub const NO_GPU_DEVICES: &str = "NoDevFiles";

/// Every variable this module may set. They are removed from the base
/// environment first, so only this job's values (or none) remain.
const MANAGED: &[&str] = &[
    // Not SLURM_DISTRIBUTION: sbatch's -m sets it in the job's environment.
    "CORRAL_AGENT_ID",
    "CORRAL_ATTEMPT",
    "CORRAL_CHECKPOINT_DIR",
    "CORRAL_DISPATCHED_BY",
    "CORRAL_RESUME_FROM",
    "CORRAL_STEP_SOCKET",
    "CUDA_VISIBLE_DEVICES",
    "ENVIRONMENT",
    "GPU_DEVICE_ORDINAL",
    "HOSTNAME",
    "SLURMD_NODENAME",
    "SLURMD_TRES_BIND",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MAX",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_STEP",
    "SLURM_CLUSTER_NAME",
    "SLURM_CPUS_ON_NODE",
    "SLURM_CPUS_PER_GPU",
    "SLURM_CPUS_PER_TASK",
    "SLURM_GPUS",
    "SLURM_GPUS_ON_NODE",
    "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_PER_TASK",
    "SLURM_GTIDS",
    "SLURM_JOBID",
    "SLURM_JOB_ACCOUNT",
    "SLURM_JOB_CPUS_PER_NODE",
    "SLURM_JOB_END_TIME",
    "SLURM_JOB_GID",
    "SLURM_JOB_GPUS",
    "SLURM_JOB_ID",
    "SLURM_JOB_NAME",
    "SLURM_JOB_NODELIST",
    "SLURM_JOB_NUM_NODES",
    "SLURM_JOB_PARTITION",
    "SLURM_JOB_QOS",
    "SLURM_JOB_RESERVATION",
    "SLURM_JOB_START_TIME",
    "SLURM_JOB_UID",
    "SLURM_JOB_USER",
    "SLURM_LOCALID",
    "SLURM_MEM_PER_CPU",
    "SLURM_MEM_PER_GPU",
    "SLURM_MEM_PER_NODE",
    "SLURM_NNODES",
    "SLURM_NODEID",
    "SLURM_NODELIST",
    "SLURM_NODE_ALIASES",
    "SLURM_NPROCS",
    "SLURM_NTASKS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_PRIO_PROCESS",
    "SLURM_PROCID",
    "SLURM_RESTART_COUNT",
    "SLURM_STEPID",
    "SLURM_STEP_GPUS",
    "SLURM_STEP_ID",
    "SLURM_STEP_NODELIST",
    "SLURM_STEP_NUM_NODES",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_SUBMIT_DIR",
    "SLURM_SUBMIT_HOST",
    "SLURM_TASKS_PER_NODE",
    "SLURM_TASK_PID",
    "SLURM_TOPOLOGY_ADDR",
    "SLURM_TOPOLOGY_ADDR_PATTERN",
];

/// An environment being built.
type Env = BTreeMap<String, String>;

/// GPU indices as the variables list them: `0,1,2,3`.
fn gpu_list(gpus: &[u32]) -> String {
    gpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Sets `name` to `value`, replacing what was there.
fn set(env: &mut Env, name: &str, value: impl Display) {
    env.insert(name.to_string(), value.to_string());
}

/// The environment of the batch script on `ctx.node`.
///
/// On the batch host this is exactly what Slurm gives a batch script, with
/// `SLURM_NODEID`, `SLURM_PROCID` and `SLURM_LOCALID` all 0. On another node of
/// the allocation (where corral runs the script only when a launch asks for it)
/// the node-specific values describe that node, and `SLURM_NODEID` and
/// `SLURM_PROCID` are its index in `SLURM_JOB_NODELIST`: one process per node,
/// ranked by node. A node outside the allocation gets no node-specific values
/// and no GPUs; the agent refuses such launches before building anything.
pub fn batch_environment(ctx: &LaunchContext<'_>) -> BTreeMap<String, String> {
    let mut env = ctx.base_env.clone();
    for name in MANAGED {
        env.remove(*name);
    }
    let layout = NodeLayout::of(ctx.attempt);
    job_vars::add(&mut env, ctx, &layout);
    shape_vars::add(&mut env, ctx.job, &layout);
    array_vars::add(&mut env, ctx.job);
    request_vars::add(&mut env, &ctx.job.spec);
    node_vars::add(&mut env, ctx, &layout);
    corral_vars::add(&mut env, ctx);
    env
}

/// The variables of the batch environment that are not the batch host's own
/// nor the batch script's: `salloc` does not give them to its command.
const NOT_FOR_SALLOC: &[&str] = &[
    "CORRAL_AGENT_ID",
    "CORRAL_DISPATCHED_BY",
    "CORRAL_STEP_SOCKET",
    "CUDA_VISIBLE_DEVICES",
    "ENVIRONMENT",
    "GPU_DEVICE_ORDINAL",
    "HOSTNAME",
    "SLURMD_NODENAME",
    "SLURM_CPUS_ON_NODE",
    "SLURM_GPUS_ON_NODE",
    "SLURM_GTIDS",
    "SLURM_JOB_END_TIME",
    "SLURM_JOB_GID",
    "SLURM_JOB_GPUS",
    "SLURM_JOB_START_TIME",
    "SLURM_JOB_UID",
    "SLURM_JOB_USER",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_PRIO_PROCESS",
    "SLURM_PROCID",
    "SLURM_TASK_PID",
    "SLURM_TOPOLOGY_ADDR",
    "SLURM_TOPOLOGY_ADDR_PATTERN",
    "TMPDIR",
];

/// What `salloc` sets for its command on the login node: the job-wide
/// variables of the batch environment (`SLURM_JOB_ID`, `SLURM_JOB_NODELIST`,
/// `SLURM_TASKS_PER_NODE`, ...), none of the batch host's own, and nothing of
/// the job's exported environment (the command keeps its own).
pub fn allocation_environment(ctx: &LaunchContext<'_>) -> BTreeMap<String, String> {
    let none = BTreeMap::new();
    let mut env = batch_environment(&LaunchContext {
        base_env: &none,
        ..*ctx
    });
    env.retain(|name, _| !NOT_FOR_SALLOC.contains(&name.as_str()));
    env
}

/// The environment of one task of `step` on `ctx.node`: the batch environment
/// built on `ctx.base_env` (for `srun`, its own environment), with the task's
/// ranks and the step's number and shape (`SLURM_NTASKS`,
/// `SLURM_TASKS_PER_NODE`, `SLURM_STEP_*`); [`layout::placements`] gives the
/// placements of a node's tasks.
pub fn task_environment(
    ctx: &LaunchContext<'_>,
    step: &StepLayout,
    task: TaskPlacement,
) -> BTreeMap<String, String> {
    let mut env = batch_environment(ctx);
    let node_gpus = NodeLayout::of(ctx.attempt)
        .allocation(ctx.node)
        .map(|a| a.gpus.clone())
        .unwrap_or_default();
    step_vars::add(&mut env, step, task, &node_gpus);
    env
}
