//! Reports from node agents: attempt started, batch script exited, node released,
//! checkpoint committed, attempt killed by an application XID. Every report names
//! its attempt; a report for any attempt but the job's newest is rejected as stale.

use super::job_of;
use super::lifecycle::{begin_ending, release_node};
use crate::command::Outcome;
use crate::ids::{AttemptNumber, JobId};
use crate::job::{Attempt, Checkpoint, EndCause, ExitStatus, Job};
use crate::partition::PreemptMode;
use crate::preemption;
use crate::rejection::Rejection;
use crate::slurm::duration::TimeLimit;
use crate::state::ClusterState;
use crate::time::Timestamp;

/// The job's newest attempt if it is `attempt`, else `StaleAttempt`.
fn newest_attempt(job: &Job, attempt: AttemptNumber) -> Result<&Attempt, Rejection> {
    match job.current_attempt() {
        Some(a) if a.number == attempt => Ok(a),
        other => Err(Rejection::StaleAttempt {
            job: job.id,
            got: attempt,
            live: other.filter(|a| a.is_live()).map(|a| a.number),
        }),
    }
}

/// The job's live attempt if it is `attempt` and includes `node`.
pub(super) fn live_attempt_on<'j>(
    job: &'j Job,
    attempt: AttemptNumber,
    node: &str,
) -> Result<&'j Attempt, Rejection> {
    let found = newest_attempt(job, attempt)?;
    if !found.is_live() {
        return Err(Rejection::StaleAttempt {
            job: job.id,
            got: attempt,
            live: None,
        });
    }
    if !found.allocation.iter().any(|a| a.node == node) {
        return Err(Rejection::NotInAllocation {
            job: job.id,
            attempt,
            node: node.to_string(),
        });
    }
    Ok(found)
}

pub(super) fn attempt_started(
    state: &mut ClusterState,
    id: JobId,
    attempt: AttemptNumber,
    node: &str,
) -> Result<Outcome, Rejection> {
    live_attempt_on(job_of(state, id)?, attempt, node)?;
    if let Some(a) = state.jobs.get_mut(&id).and_then(|j| j.attempts.last_mut()) {
        a.started_on.insert(node.to_string());
    }
    Ok(Outcome::Done)
}

pub(super) fn batch_exited(
    state: &mut ClusterState,
    id: JobId,
    attempt: AttemptNumber,
    node: &str,
    status: ExitStatus,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    let found = live_attempt_on(job_of(state, id)?, attempt, node)?;
    if found.batch_host() != Some(node) {
        return Err(Rejection::InvalidRequest(format!(
            "node '{node}' is not the batch host of job {id} attempt {attempt}"
        )));
    }
    let ending = found.ending.is_some();
    // A script that ends while a preemption notice runs ends because of it,
    // however it ends (on the notice, with an error, by the signal): Slurm
    // requeues it as preempted, never charges it to the job.
    let job = job_of(state, id)?;
    let out_of_time = match job.time_limit {
        TimeLimit::Unlimited => false,
        TimeLimit::Seconds(limit) => found.started_at.plus_secs(limit) <= now,
    };
    // A job that cannot go back to the queue and finished its work during
    // the grace has completed: only a requeue would make the preemption its
    // end. Past its time limit it timed out, as a `Tick` would have said.
    let requeueable = job.spec.requeue && preemption::mode_of(state, job) == PreemptMode::Requeue;
    let cause = match &found.preemption {
        Some(_) if out_of_time => EndCause::TimeLimit,
        Some(_) if status.is_success() && !requeueable => EndCause::Exited(status),
        Some(notice) => EndCause::Preempted {
            for_job: notice.for_job,
        },
        None => EndCause::Exited(status),
    };
    if let Some(a) = state.jobs.get_mut(&id).and_then(|j| j.attempts.last_mut()) {
        a.batch_exit = Some(status);
    }
    if ending {
        release_node(state, id, node);
    } else {
        begin_ending(state, id, cause, &[node], now);
    }
    Ok(Outcome::Jobs(vec![id]))
}

pub(super) fn node_released(
    state: &mut ClusterState,
    id: JobId,
    attempt: AttemptNumber,
    node: &str,
    _now: Timestamp,
) -> Result<Outcome, Rejection> {
    let job = job_of(state, id)?;
    let found = live_attempt_on(job, attempt, node)?;
    if found.ending.is_none() {
        return Err(Rejection::WrongJobState {
            job: id,
            state: job.state.slurm_name().into(),
            action: "release a node".into(),
            needed: "COMPLETING".into(),
        });
    }
    release_node(state, id, node);
    Ok(Outcome::Jobs(vec![id]))
}

/// A checkpoint may come from the newest attempt while it runs or ends, or after it
/// was requeued (a late report is still the newest checkpoint: no newer attempt
/// has started), but not for a finished job.
pub(super) fn checkpoint(
    state: &mut ClusterState,
    id: JobId,
    attempt: AttemptNumber,
    node: &str,
    step: u64,
    path: String,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    let job = job_of(state, id)?;
    if job.state.is_terminal() {
        return Err(Rejection::WrongJobState {
            job: id,
            state: job.state.slurm_name().into(),
            action: "record a checkpoint".into(),
            needed: "an unfinished job".into(),
        });
    }
    let newest = newest_attempt(job, attempt)?;
    if !newest.allocation.iter().any(|a| a.node == node) {
        return Err(Rejection::NotInAllocation {
            job: id,
            attempt,
            node: node.to_string(),
        });
    }
    super::check_text("checkpoint path", &path, super::MAX_PATH_BYTES)?;
    if path.is_empty() {
        return Err(Rejection::InvalidRequest(
            "a checkpoint needs a path".into(),
        ));
    }
    if let Some(last) = &job.last_checkpoint {
        if step == last.step && path == last.path {
            return Ok(Outcome::Done);
        }
        if step <= last.step {
            return Err(Rejection::InvalidRequest(format!(
                "checkpoint step {step} is not newer than the committed step {} ({})",
                last.step, last.path
            )));
        }
    }
    let checkpoint = Checkpoint {
        attempt,
        step,
        path,
        at: now,
    };
    if let Some(job) = state.jobs.get_mut(&id) {
        if let Some(a) = job.attempts.last_mut() {
            a.checkpoint = Some(checkpoint.clone());
        }
        job.last_checkpoint = Some(checkpoint);
    }
    Ok(Outcome::Done)
}

/// An application XID killed the attempt's processes on `node` (the agent did it
/// at once): the attempt ends and, as after a GPU failure, the job goes back to
/// the queue if it may be requeued (FAILED otherwise). The GPU stays in service.
pub(super) fn application_xid(
    state: &mut ClusterState,
    id: JobId,
    attempt: AttemptNumber,
    node: &str,
    gpu: u32,
    xid: u32,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    let job = job_of(state, id)?;
    let found = live_attempt_on(job, attempt, node)?;
    if found.ending.is_some() {
        return Err(Rejection::WrongJobState {
            job: id,
            state: job.state.slurm_name().into(),
            action: "end an attempt for an application XID".into(),
            needed: "RUNNING".into(),
        });
    }
    let holds_gpu = found
        .allocation
        .iter()
        .any(|a| a.node == node && a.gpus.contains(&gpu));
    if !holds_gpu {
        return Err(Rejection::InvalidRequest(format!(
            "GPU {gpu} of node '{node}' is not allocated to job {id} attempt {attempt}"
        )));
    }
    let cause = EndCause::ApplicationXid {
        node: node.to_string(),
        gpu,
        xid,
    };
    begin_ending(state, id, cause, &[], now);
    Ok(Outcome::Jobs(vec![id]))
}
