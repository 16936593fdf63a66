//! `explain(job)`: why a job waits, in words — its pending reason, what blocks it,
//! which jobs are ahead of it, and its estimated start when backfill knows one.

use corral_state::job::{JobState, PendingReason};
use corral_state::slurm::duration::format_time_limit;
use corral_state::{ClusterState, JobId, Timestamp};

use crate::dependency::{self, DependencyStatus};
use crate::pass::{self, Verdict};
use crate::priority::PriorityContext;

/// At most this many jobs ahead are listed.
const MAX_AHEAD: usize = 20;

/// Why a job is where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// The job.
    pub job: JobId,
    /// Its state.
    pub state: JobState,
    /// Its pending reason as this pass sees it (`None` when not pending).
    pub reason: Option<PendingReason>,
    /// Its priority and rank in its partition's queue.
    pub priority: Option<i64>,
    /// Pending jobs of its partition considered before it, highest first (at most 20).
    pub ahead: Vec<JobId>,
    /// When backfill expects it to start, if it holds a reservation.
    pub estimated_start: Option<Timestamp>,
    /// Sentences for a person, most important first.
    pub lines: Vec<String>,
}

/// Why `explain` could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExplainError {
    /// No such job.
    #[error("unknown job {0}")]
    UnknownJob(JobId),
}

/// Explains `job` at `now` by running a pass and reading its verdict.
pub fn explain(
    state: &ClusterState,
    job_id: JobId,
    now: Timestamp,
) -> Result<Explanation, ExplainError> {
    let job = state.job(job_id).ok_or(ExplainError::UnknownJob(job_id))?;
    let mut explanation = Explanation {
        job: job_id,
        state: job.state,
        reason: None,
        priority: None,
        ahead: Vec::new(),
        estimated_start: None,
        lines: Vec::new(),
    };
    if !matches!(job.state, JobState::Pending | JobState::RequeueHold) {
        explanation.lines.push(format!(
            "job {job_id} is {}, not waiting",
            job.state.slurm_name()
        ));
        return Ok(explanation);
    }
    let priorities = PriorityContext::new(state);
    let order = pass::queue_order(state, now, &priorities);
    let position = order.iter().position(|(j, _)| j.id == job_id);
    explanation.priority = position.map(|p| order[p].1);
    explanation.ahead = order[..position.unwrap_or(0)]
        .iter()
        .filter(|(j, _)| j.partition == job.partition)
        .map(|(j, _)| j.id)
        .take(MAX_AHEAD)
        .collect();
    let (_, verdicts) = pass::run(state, now);
    let lines = &mut explanation.lines;
    match verdicts.get(&job_id) {
        Some(Verdict::Starts(nodes)) => lines.push(format!(
            "job {job_id} starts in this pass on {}",
            nodes.join(",")
        )),
        Some(Verdict::Ineligible(reason)) => {
            explanation.reason = Some(*reason);
            lines.push(describe(state, job_id, *reason, now));
        }
        Some(Verdict::Blocked {
            reason,
            reservation,
            preempting,
        }) => {
            explanation.reason = Some(*reason);
            lines.push(describe(state, job_id, *reason, now));
            if !preempting.is_empty() {
                let ids: Vec<String> = preempting.iter().map(ToString::to_string).collect();
                lines.push(format!(
                    "it preempts job(s) {} and starts when they have ended",
                    ids.join(", ")
                ));
            }
            if let Some(r) = reservation {
                explanation.estimated_start = Some(r.start);
                lines.push(format!(
                    "estimated start in {} s (at {} ms) on {}, when running jobs reach their time limits",
                    r.start.secs_since(now),
                    r.start.as_ms(),
                    r.nodes.join(",")
                ));
            } else if preempting.is_empty() {
                lines.push("no start time is known: it is not among the jobs holding a backfill reservation".into());
            }
        }
        None => lines.push("the pass did not consider it".into()),
    }
    if !explanation.ahead.is_empty() {
        lines.push(format!(
            "{} job(s) of partition {} are ahead of it",
            explanation.ahead.len(),
            job.partition
        ));
    }
    Ok(explanation)
}

/// One sentence for a pending reason.
fn describe(state: &ClusterState, job_id: JobId, reason: PendingReason, now: Timestamp) -> String {
    let Some(job) = state.job(job_id) else {
        return String::new();
    };
    let want = &job.resources;
    let shape = format!(
        "{} node(s) with {} {}GPU(s), {} CPU(s) and {} MiB each",
        want.nodes,
        want.gpus_per_node,
        want.gpu_type
            .as_deref()
            .map_or(String::new(), |t| format!("{t} ")),
        want.cpus_per_node,
        want.memory_per_node_mb
    );
    match reason {
        PendingReason::Resources => format!("waiting for resources: it needs {shape}"),
        PendingReason::Priority => format!("higher-priority jobs of partition {} wait for the resources it needs ({shape})", job.partition),
        PendingReason::Dependency | PendingReason::DependencyNeverSatisfied => {
            let status = dependency::status(state, job, now, false);
            let verdict = if status == DependencyStatus::Never { "can never be satisfied" } else { "is not yet satisfied" };
            format!("its dependency {verdict}; cancel it or fix the dependency if it never will be")
        }
        PendingReason::JobHeldUser => "held by its user; `corral release` lets it run".into(),
        PendingReason::JobHeldAdmin => "held by an operator; only an operator can release it".into(),
        PendingReason::JobHoldMaxRequeue => format!("requeued {} times, more than allowed; release it to try again", job.requeue_count),
        PendingReason::PartitionDown => format!("partition {} is down", job.partition),
        PendingReason::PartitionTimeLimit => format!(
            "its time limit {} exceeds partition {}'s maximum",
            format_time_limit(job.time_limit),
            job.partition
        ),
        PendingReason::QosGrpGpuLimit => "its account's GPU limit in its QOS is reached; it starts when the account's jobs finish".into(),
        PendingReason::QosGrpGpuRunMinutes => "its account has used its GPU-minutes in its QOS".into(),
        PendingReason::QosMaxGpuPerUser => "its user's GPU limit in its QOS is reached".into(),
        PendingReason::QosMaxJobsPerUser => "its user's running-job limit in its QOS is reached".into(),
        PendingReason::ReqNodeNotAvail => "a node it requires (--nodelist) is down, drained, busy or reserved".into(),
        PendingReason::Reservation => "its reservation is not active or does not admit it".into(),
        PendingReason::ReservationDeleted => "its reservation was deleted; release it to run outside a reservation, or cancel it".into(),
        PendingReason::AssocGrpJobsLimit => "its user's or account's running-job limit (GrpJobs) is reached".into(),
        PendingReason::AssocMaxJobsLimit => "its user's running-job limit in its account (MaxJobs) is reached".into(),
        PendingReason::AssocGrpGpuLimit => "its user's or account's GPU limit (GrpTRES=gres/gpu) is reached".into(),
        PendingReason::AssocMaxWallDurationPerJobLimit => "its time limit is longer than its user's or account's MaxWall; lower it with scontrol update TimeLimit=".into(),
        PendingReason::Topology => "waiting for a placement within its --switches limit".into(),
        PendingReason::JobArrayTaskLimit => "its array's task limit (%N) is reached".into(),
        PendingReason::BeginTime => "its begin time has not come".into(),
        PendingReason::None => "not yet considered by the scheduler".into(),
    }
}
