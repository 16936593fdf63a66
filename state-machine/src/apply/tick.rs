//! `Tick`: the leader's clock as a command. Charges running attempts, decays
//! usage, ends attempts past their time limit or preemption grace, drops
//! reservations whose window has closed, and forgets old submission keys.

use super::lifecycle::{begin_ending, charge};
use crate::command::Outcome;
use crate::ids::JobId;
use crate::job::{EndCause, JobState};
use crate::rejection::Rejection;
use crate::slurm::duration::TimeLimit;
use crate::state::ClusterState;
use crate::time::Timestamp;

pub(super) fn tick(state: &mut ClusterState, now: Timestamp) -> Result<Outcome, Rejection> {
    let active: Vec<JobId> = state.active.iter().copied().collect();
    for id in &active {
        charge(state, *id, now);
    }
    state
        .accounting
        .decay_to(now, state.config.fairshare_half_life_seconds);
    state.submit_keys.expire(now);

    let mut ended = Vec::new();
    for id in active {
        let Some(job) = state.jobs.get(&id) else {
            continue;
        };
        let Some(attempt) = job
            .live_attempt()
            .filter(|_| job.state == JobState::Running)
        else {
            continue;
        };
        let out_of_time = match job.time_limit {
            TimeLimit::Unlimited => false,
            TimeLimit::Seconds(limit) => attempt.started_at.plus_secs(limit) <= now,
        };
        let grace_over = attempt
            .preemption
            .as_ref()
            .filter(|p| p.deadline <= now)
            .map(|p| p.for_job);
        let cause = if out_of_time {
            EndCause::TimeLimit
        } else if let Some(for_job) = grace_over {
            EndCause::Preempted { for_job }
        } else {
            continue;
        };
        begin_ending(state, id, cause, &[], now);
        ended.push(id);
    }
    let expired: Vec<String> = state
        .reservations
        .values()
        .filter(|r| r.end <= now)
        .map(|r| r.name.clone())
        .collect();
    for name in expired {
        ended.extend(super::admin::remove_reservation(state, &name));
    }
    Ok(Outcome::Jobs(ended))
}
