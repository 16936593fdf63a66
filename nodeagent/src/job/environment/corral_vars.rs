//! corral's own variables: where this attempt checkpoints, which checkpoint it
//! resumes from, which attempt it is, and which leader (replica and term)
//! sent its launch.

use super::{Env, LaunchContext, set};

/// Sets `CORRAL_CHECKPOINT_DIR`, `CORRAL_ATTEMPT` and, when the job has committed
/// a checkpoint, `CORRAL_RESUME_FROM` (its path).
pub(super) fn add(env: &mut Env, ctx: &LaunchContext<'_>) {
    set(env, "CORRAL_CHECKPOINT_DIR", ctx.checkpoint_dir);
    set(env, "CORRAL_ATTEMPT", ctx.attempt.number);
    let (replica, term) = ctx.dispatched_by;
    set(env, "CORRAL_DISPATCHED_BY", format!("{replica}:{term}"));
    if let Some(checkpoint) = &ctx.job.last_checkpoint {
        set(env, "CORRAL_RESUME_FROM", &checkpoint.path);
    }
}
