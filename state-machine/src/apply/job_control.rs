//! User and operator actions on jobs: cancel, hold, release, requeue.

use super::lifecycle::{begin_ending, end_queued};
use super::{job_of, require_owner_or_operator};
use crate::command::{CancelTarget, Outcome};
use crate::ids::{Actor, JobId};
use crate::job::{EndCause, Hold, JobState, PendingReason};
use crate::rejection::Rejection;
use crate::state::ClusterState;
use crate::time::Timestamp;

pub(super) fn cancel(
    state: &mut ClusterState,
    target: &CancelTarget,
    by: &Actor,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    let (ids, strict) = cancel_targets(state, target, by)?;
    // Validate all, then act on all.
    for id in &ids {
        let job = job_of(state, *id)?;
        require_owner_or_operator(job, by, "cancel")?;
        if strict && (job.state.is_terminal() || job.state == JobState::Completing) {
            return Err(Rejection::WrongJobState {
                job: *id,
                state: job.state.slurm_name().into(),
                action: "cancel".into(),
                needed: "PENDING, RUNNING or REQUEUE_HOLD".into(),
            });
        }
    }
    let mut changed = Vec::new();
    for id in ids {
        let Some(job) = state.jobs.get(&id) else {
            continue;
        };
        match job.state {
            JobState::Pending | JobState::RequeueHold => {
                end_queued(state, id, JobState::Cancelled, now)
            }
            JobState::Running => {
                let cause = EndCause::Cancelled {
                    by: by.user.clone(),
                };
                begin_ending(state, id, cause, &[], now);
            }
            _ => continue,
        }
        changed.push(id);
    }
    Ok(Outcome::Jobs(changed))
}

/// The jobs a cancel names; `strict` when a single job was named, so that cancelling
/// a finished job is an error rather than a no-op.
fn cancel_targets(
    state: &ClusterState,
    target: &CancelTarget,
    by: &Actor,
) -> Result<(Vec<JobId>, bool), Rejection> {
    match target {
        CancelTarget::Job(id) => {
            let job = job_of(state, *id)?;
            let is_array_head = job.array.is_some_and(|a| a.array_job_id == *id);
            if is_array_head {
                Ok((unfinished(array_tasks(state, *id)), false))
            } else {
                Ok((vec![*id], true))
            }
        }
        CancelTarget::ArrayTask {
            array_job_id,
            task_id,
        } => array_tasks(state, *array_job_id)
            .find(|(_, j)| j.array.is_some_and(|a| a.task_id == *task_id))
            .map(|(id, _)| (vec![id], true))
            .ok_or_else(|| {
                Rejection::InvalidRequest(format!("job array {array_job_id} has no task {task_id}"))
            }),
        CancelTarget::User(user) => {
            if *user != by.user && !by.is_operator() {
                return Err(Rejection::PermissionDenied(format!(
                    "user '{}' may not cancel the jobs of user '{user}'",
                    by.user
                )));
            }
            let ids = state
                .queued
                .iter()
                .chain(&state.active)
                .filter(|id| state.jobs.get(id).is_some_and(|j| &j.spec.user == user))
                .copied();
            let mut ids: Vec<JobId> = ids.collect();
            ids.sort();
            Ok((ids, false))
        }
    }
}

fn array_tasks(
    state: &ClusterState,
    array_job_id: JobId,
) -> impl Iterator<Item = (JobId, &crate::job::Job)> {
    state
        .jobs
        .range(array_job_id..)
        .take_while(move |(_, j)| j.array.is_some_and(|a| a.array_job_id == array_job_id))
        .map(|(id, j)| (*id, j))
}

fn unfinished<'a>(jobs: impl Iterator<Item = (JobId, &'a crate::job::Job)>) -> Vec<JobId> {
    jobs.filter(|(_, j)| !j.state.is_terminal())
        .map(|(id, _)| id)
        .collect()
}

pub(super) fn hold(state: &mut ClusterState, id: JobId, by: &Actor) -> Result<Outcome, Rejection> {
    let job = job_of(state, id)?;
    require_owner_or_operator(job, by, "hold")?;
    if job.state != JobState::Pending {
        return Err(Rejection::WrongJobState {
            job: id,
            state: job.state.slurm_name().into(),
            action: "hold".into(),
            needed: "PENDING".into(),
        });
    }
    if job.hold == Some(Hold::Admin) && !by.is_operator() {
        return Err(Rejection::PermissionDenied(format!(
            "job {id} is held by an operator; only an operator may change that hold"
        )));
    }
    let (hold, reason) = if by.is_operator() {
        (Hold::Admin, PendingReason::JobHeldAdmin)
    } else {
        (Hold::User, PendingReason::JobHeldUser)
    };
    if let Some(job) = state.jobs.get_mut(&id) {
        job.hold = Some(hold);
        job.reason = reason;
    }
    Ok(Outcome::Jobs(vec![id]))
}

pub(super) fn release(
    state: &mut ClusterState,
    id: JobId,
    by: &Actor,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    let job = job_of(state, id)?;
    require_owner_or_operator(job, by, "release")?;
    let held = (job.state == JobState::Pending && job.hold.is_some())
        || job.state == JobState::RequeueHold;
    if !held {
        return Err(Rejection::WrongJobState {
            job: id,
            state: job.state.slurm_name().into(),
            action: "release".into(),
            needed: "a held PENDING job or REQUEUE_HOLD".into(),
        });
    }
    if job.hold == Some(Hold::Admin) && !by.is_operator() {
        return Err(Rejection::PermissionDenied(format!(
            "job {id} was held by an operator; only an operator may release it"
        )));
    }
    if let Some(job) = state.jobs.get_mut(&id) {
        job.hold = None;
        job.state = JobState::Pending;
        job.reason = PendingReason::None;
        job.eligible_since = now;
    }
    Ok(Outcome::Jobs(vec![id]))
}

pub(super) fn requeue(
    state: &mut ClusterState,
    id: JobId,
    by: &Actor,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    let job = job_of(state, id)?;
    require_owner_or_operator(job, by, "requeue")?;
    if job.state != JobState::Running {
        return Err(Rejection::WrongJobState {
            job: id,
            state: job.state.slurm_name().into(),
            action: "requeue".into(),
            needed: "RUNNING".into(),
        });
    }
    let cause = EndCause::RequeueRequested {
        by: by.user.clone(),
    };
    begin_ending(state, id, cause, &[], now);
    Ok(Outcome::Jobs(vec![id]))
}
