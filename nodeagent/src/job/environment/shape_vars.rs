//! The job's shape as Slurm prints it: CPUs and tasks per node in the `4(x2)`
//! repetition form, and the task count when the user gave one.

use corral_state::job::Job;
use corral_state::slurm::repeated_counts::compress_counts;

use super::layout::{NodeLayout, block_distribution};
use super::{Env, set};

/// Sets `SLURM_JOB_CPUS_PER_NODE`, `SLURM_TASKS_PER_NODE` and, when `--ntasks`
/// or `--ntasks-per-node` was given, `SLURM_NTASKS` and `SLURM_NPROCS`.
///
/// As sbatch does: the task count is `--ntasks`, else `--ntasks-per-node` times
/// the node count, else as many tasks as the allocated CPUs hold at
/// `--cpus-per-task` each (and then `SLURM_NTASKS` is not set).
pub(super) fn add(env: &mut Env, job: &Job, layout: &NodeLayout<'_>) {
    let spec = &job.spec;
    set(
        env,
        "SLURM_JOB_CPUS_PER_NODE",
        compress_counts(&layout.cpus()),
    );
    let capacity = layout.task_capacity(spec.cpus_per_task);
    let nodes = u32::try_from(layout.len()).unwrap_or(u32::MAX);
    let asked = spec
        .ntasks
        .or_else(|| spec.ntasks_per_node.map(|per| per.saturating_mul(nodes)));
    let ntasks = asked.unwrap_or_else(|| capacity.iter().fold(0u32, |a, &c| a.saturating_add(c)));
    if asked.is_some() {
        set(env, "SLURM_NTASKS", ntasks);
        set(env, "SLURM_NPROCS", ntasks);
    }
    let per_node = block_distribution(ntasks, &capacity);
    set(env, "SLURM_TASKS_PER_NODE", compress_counts(&per_node));
}
