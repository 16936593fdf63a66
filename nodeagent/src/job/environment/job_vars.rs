//! Who and what the job is: its id, name, owner, account, partition, nodes,
//! where it was submitted from, how often it restarted and when it runs.

use corral_state::slurm::duration::TimeLimit;

use super::layout::NodeLayout;
use super::{Env, LaunchContext, set};

/// Sets the job-wide identity variables.
fn add_identity(env: &mut Env, ctx: &LaunchContext<'_>) {
    let job = ctx.job;
    let spec = &job.spec;
    set(env, "SLURM_CLUSTER_NAME", ctx.cluster_name);
    set(env, "SLURM_JOB_ID", job.id);
    set(env, "SLURM_JOBID", job.id);
    set(env, "SLURM_JOB_NAME", &spec.name);
    set(env, "SLURM_JOB_USER", &spec.user);
    set(env, "SLURM_JOB_UID", spec.uid);
    set(env, "SLURM_JOB_GID", spec.gid);
    set(env, "SLURM_JOB_PARTITION", &job.partition);
    set(env, "SLURM_JOB_ACCOUNT", &job.account);
    if let Some(qos) = &job.qos {
        set(env, "SLURM_JOB_QOS", qos);
    }
    if let Some(reservation) = &spec.reservation {
        set(env, "SLURM_JOB_RESERVATION", reservation);
    }
    set(env, "SLURM_SUBMIT_DIR", &spec.submit_dir);
    set(env, "SLURM_SUBMIT_HOST", &spec.submit_host);
    set(env, "ENVIRONMENT", "BATCH");
    // Slurm's values where corral has nothing to name: no node aliases
    // (cloud nodes), and the submitting process's scheduling priority, which
    // sbatch reads as 0 unless the shell was niced (corral does not carry it).
    set(env, "SLURM_NODE_ALIASES", "(null)");
    set(env, "SLURM_PRIO_PROCESS", 0);
    // slurmd sets TMPDIR when the job's environment has none.
    if !env.contains_key("TMPDIR") {
        set(env, "TMPDIR", "/tmp");
    }
    // Slurm sets it only once the job has been requeued or restarted.
    if job.requeue_count > 0 {
        set(env, "SLURM_RESTART_COUNT", job.requeue_count);
    }
}

/// Sets the job's nodes and the times of this run (Unix seconds; the end only
/// under a time limit).
pub(super) fn add(env: &mut Env, ctx: &LaunchContext<'_>, layout: &NodeLayout<'_>) {
    add_identity(env, ctx);
    set(env, "SLURM_JOB_NODELIST", layout.nodelist());
    set(env, "SLURM_NODELIST", layout.nodelist());
    set(env, "SLURM_JOB_NUM_NODES", layout.len());
    set(env, "SLURM_NNODES", layout.len());
    let start = ctx.attempt.started_at;
    set(env, "SLURM_JOB_START_TIME", start.as_secs());
    if let TimeLimit::Seconds(limit) = ctx.job.time_limit {
        set(env, "SLURM_JOB_END_TIME", start.plus_secs(limit).as_secs());
    }
}
