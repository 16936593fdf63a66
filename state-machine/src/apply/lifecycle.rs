//! The life of an attempt: start on a plan, charge usage, begin ending (COMPLETING),
//! release node by node, and finish (a terminal state, or back to the queue).
//!
//! Callers validate first; these functions assume the job and its live attempt exist
//! and only skip (never panic) if they do not.

use std::collections::BTreeSet;

use crate::command::PlannedAllocation;
use crate::ids::JobId;
use crate::job::{Attempt, AttemptEnd, EndCause, Ending, JobState, PendingReason};
use crate::node::NodeUse;
use crate::partition::PreemptMode;
use crate::preemption;
use crate::state::ClusterState;
use crate::time::Timestamp;

/// Starts a new attempt on a validated allocation.
pub(super) fn start_attempt(state: &mut ClusterState, planned: PlannedAllocation, at: Timestamp) {
    let Some(job) = state.jobs.get_mut(&planned.job) else {
        return;
    };
    let exclusive = job.resources.exclusive;
    for part in &planned.nodes {
        let Some(node) = state.nodes.get_mut(&part.node) else {
            continue;
        };
        for gpu in &part.gpus {
            if let Some(slot) = node.gpus.get_mut(*gpu as usize) {
                slot.allocated_to = Some((planned.job, planned.attempt));
            }
        }
        node.allocations.insert(
            planned.job,
            NodeUse {
                attempt: planned.attempt,
                cpus: part.cpus,
                memory_mb: part.memory_mb,
                exclusive,
            },
        );
    }
    job.attempts.push(Attempt {
        number: planned.attempt,
        allocation: planned.nodes,
        started_at: at,
        started_on: BTreeSet::new(),
        checkpoint: None,
        charged_until: at,
        gpu_ms: 0,
        preemption: None,
        ending: None,
        batch_exit: None,
        end: None,
    });
    job.state = JobState::Running;
    job.reason = PendingReason::None;
    state.queued.remove(&planned.job);
    state.active.insert(planned.job);
}

/// Charges the job's live attempt for GPU time up to `until` (never past the moment
/// its end was decided).
pub(super) fn charge(state: &mut ClusterState, job_id: JobId, until: Timestamp) {
    let ClusterState {
        jobs, accounting, ..
    } = state;
    let Some(job) = jobs.get_mut(&job_id) else {
        return;
    };
    let Some(attempt) = job.attempts.last_mut().filter(|a| a.is_live()) else {
        return;
    };
    let stop = attempt.ending.as_ref().map_or(until, |e| e.at.min(until));
    if stop <= attempt.charged_until {
        return;
    }
    let gpu_ms = attempt
        .gpu_count()
        .saturating_mul(stop.ms_since(attempt.charged_until));
    attempt.charged_until = stop;
    attempt.gpu_ms = attempt.gpu_ms.saturating_add(gpu_ms);
    accounting.charge(&job.spec.user, &job.account, job.qos.as_deref(), gpu_ms);
}

/// Moves a RUNNING job to COMPLETING for `cause`. Nodes in `released` have already
/// confirmed that the attempt's processes are gone (or were fenced by being declared
/// down). Finishes the attempt at once if no node remains.
pub(super) fn begin_ending(
    state: &mut ClusterState,
    job_id: JobId,
    cause: EndCause,
    released: &[&str],
    at: Timestamp,
) {
    charge(state, job_id, at);
    let Some(job) = state.jobs.get_mut(&job_id) else {
        return;
    };
    let Some(attempt) = job
        .attempts
        .last_mut()
        .filter(|a| a.is_live() && a.ending.is_none())
    else {
        return;
    };
    let unreleased = attempt
        .allocation
        .iter()
        .map(|a| a.node.clone())
        .filter(|n| !released.contains(&n.as_str()))
        .collect();
    attempt.ending = Some(Ending {
        cause,
        at,
        unreleased,
    });
    job.state = JobState::Completing;
    for node in released {
        free_node(state, job_id, node);
    }
    finish_if_released(state, job_id);
}

/// Records that `node` no longer runs the ending attempt, freeing what the attempt
/// held there; finishes the attempt when it was the last node.
pub(super) fn release_node(state: &mut ClusterState, job_id: JobId, node: &str) {
    let Some(ending) = state
        .jobs
        .get_mut(&job_id)
        .and_then(|j| j.attempts.last_mut())
        .and_then(|a| a.ending.as_mut())
    else {
        return;
    };
    if ending.unreleased.remove(node) {
        free_node(state, job_id, node);
    }
    finish_if_released(state, job_id);
}

fn free_node(state: &mut ClusterState, job_id: JobId, node_name: &str) {
    let Some(node) = state.nodes.get_mut(node_name) else {
        return;
    };
    node.allocations.remove(&job_id);
    for gpu in &mut node.gpus {
        if gpu.allocated_to.is_some_and(|(job, _)| job == job_id) {
            gpu.allocated_to = None;
        }
    }
}

fn finish_if_released(state: &mut ClusterState, job_id: JobId) {
    let max_requeue = state.config.max_requeue;
    let Some(job) = state.jobs.get(&job_id) else {
        return;
    };
    let Some(ending) = job.attempts.last().and_then(|a| a.ending.as_ref()) else {
        return;
    };
    if !ending.unreleased.is_empty() {
        return;
    }
    let requeue = wants_requeue(state, job_id, &ending.cause);
    let Some(job) = state.jobs.get_mut(&job_id) else {
        return;
    };
    let Some(attempt) = job.attempts.last_mut() else {
        return;
    };
    let Some(ending) = attempt.ending.take() else {
        return;
    };
    let final_state = match (&ending.cause, requeue) {
        (_, true) => JobState::Requeued,
        (EndCause::Exited(status), false) if status.is_success() => JobState::Completed,
        (EndCause::Exited(_), false) => JobState::Failed,
        (EndCause::Cancelled { .. }, false) => JobState::Cancelled,
        (EndCause::TimeLimit, false) => JobState::Timeout,
        (EndCause::NodeFailure { .. } | EndCause::GpuFailure { .. }, false) => JobState::NodeFail,
        (EndCause::Preempted { .. }, false) => JobState::Preempted,
        (EndCause::RequeueRequested { .. }, false) => JobState::Requeued,
        (EndCause::ApplicationXid { .. }, false) => JobState::Failed,
    };
    attempt.end = Some(AttemptEnd {
        at: ending.at,
        state: final_state,
        cause: ending.cause,
    });
    state.active.remove(&job_id);
    if final_state == JobState::Requeued {
        job.requeue_count = job.requeue_count.saturating_add(1);
        job.eligible_since = ending.at;
        if job.requeue_count > max_requeue {
            job.state = JobState::RequeueHold;
            job.reason = PendingReason::JobHoldMaxRequeue;
        } else {
            job.state = JobState::Pending;
            job.reason = PendingReason::None;
        }
        state.queued.insert(job_id);
    } else {
        job.state = final_state;
        job.reason = PendingReason::None;
        job.ended_at = Some(ending.at);
        let (user, account) = (job.spec.user.clone(), job.account.clone());
        state.unfinished_index.remove(&user, &account);
    }
}

/// Whether an attempt ending for `cause` sends the job back to the queue.
fn wants_requeue(state: &ClusterState, job_id: JobId, cause: &EndCause) -> bool {
    let Some(job) = state.jobs.get(&job_id) else {
        return false;
    };
    match cause {
        EndCause::RequeueRequested { .. } => true,
        EndCause::NodeFailure { .. }
        | EndCause::GpuFailure { .. }
        | EndCause::ApplicationXid { .. } => job.spec.requeue,
        EndCause::Preempted { .. } => {
            job.spec.requeue && preemption::mode_of(state, job) == PreemptMode::Requeue
        }
        EndCause::Exited(_) | EndCause::Cancelled { .. } | EndCause::TimeLimit => false,
    }
}

/// Ends a job that never ran (cancelled while pending).
pub(super) fn end_queued(
    state: &mut ClusterState,
    job_id: JobId,
    final_state: JobState,
    at: Timestamp,
) {
    let Some(job) = state.jobs.get_mut(&job_id) else {
        return;
    };
    job.state = final_state;
    job.reason = PendingReason::None;
    job.hold = None;
    job.ended_at = Some(at);
    let (user, account) = (job.spec.user.clone(), job.account.clone());
    state.queued.remove(&job_id);
    state.unfinished_index.remove(&user, &account);
}
