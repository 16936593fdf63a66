//! Job calls: cancel, hold/release/requeue, get, list, explain, and checkpoint
//! reports. Reads come from this replica's applied state; changes go through the
//! leader.

use corral_proto::api::{
    CancelJobsReply, CancelJobsRequest, ControlJobReply, ControlJobRequest, ExplainJobReply,
    GetJobReply, GetJobRequest, JobControl, ListJobsReply, ListJobsRequest,
    ReportCheckpointRequest, UpdateJobRequest,
};
use corral_proto::records;
use corral_scheduler::priority::PriorityContext;
use corral_state::ClusterState;
use corral_state::command::{Command, Outcome};
use corral_state::ids::JobId;
use corral_state::job::{Job, JobState};
use corral_state::slurm::update_fields::parse_update_fields;
use tonic::Status;

use super::caller::Caller;
use super::{ApiContext, job_target, status};
use crate::clock;

/// Every job state, for filters.
const STATES: [JobState; 11] = [
    JobState::Pending,
    JobState::Running,
    JobState::Completing,
    JobState::Completed,
    JobState::Failed,
    JobState::Cancelled,
    JobState::Timeout,
    JobState::NodeFail,
    JobState::Preempted,
    JobState::Requeued,
    JobState::RequeueHold,
];

/// `CancelJobs`: each target separately, so one bad id does not stop the others
/// (as scancel does).
pub async fn cancel(
    ctx: &ApiContext,
    caller: &Caller,
    request: CancelJobsRequest,
) -> Result<CancelJobsReply, Status> {
    let actor = caller.actor()?;
    if !request.signal.is_empty() {
        // An older client asking for a signal: never take it for a cancel.
        return Err(Status::invalid_argument(
            "CancelJobs does not send signals (SignalJobs does); nothing was cancelled. \
             Use a corral CLI that signals with `corral cancel --signal SIG JOB`",
        ));
    }
    let (targets, mut errors) = job_target::parse_all(&request.jobs, &request.user);
    if targets.is_empty() && errors.is_empty() {
        return Err(Status::invalid_argument(
            "name the jobs to cancel (ids, 123_4 for an array task) or a user with -u",
        ));
    }
    let now = clock::now();
    let commands: Vec<Command> = targets
        .iter()
        .map(|(_, target)| Command::Cancel {
            target: target.clone(),
            by: actor.clone(),
            at: now,
        })
        .collect();
    let results = if commands.is_empty() {
        Vec::new()
    } else {
        ctx.propose(commands).await?
    };
    let mut affected = Vec::new();
    for ((text, _), result) in targets.iter().zip(results) {
        match result {
            Ok(Outcome::Jobs(ids)) => affected.extend(ids.iter().map(|id| id.0)),
            Ok(_) => {}
            Err(rejection) => errors.push(format!("{text}: {rejection}")),
        }
    }
    if !affected.is_empty() {
        ctx.wake_scheduler.notify_one();
    }
    Ok(CancelJobsReply { affected, errors })
}

/// `ControlJob`: hold, release or requeue.
pub async fn control(
    ctx: &ApiContext,
    caller: &Caller,
    request: ControlJobRequest,
) -> Result<ControlJobReply, Status> {
    let by = caller.actor()?;
    let job = JobId(request.job_id);
    let at = clock::now();
    let command = match JobControl::try_from(request.action) {
        Ok(JobControl::Hold) => Command::Hold { job, by },
        Ok(JobControl::Release) => Command::Release { job, by, at },
        Ok(JobControl::Requeue) => Command::Requeue { job, by, at },
        _ => {
            return Err(Status::invalid_argument(
                "unknown job action; use hold, release or requeue",
            ));
        }
    };
    let affected = match ctx.propose_one(command).await? {
        Outcome::Jobs(ids) => ids.iter().map(|id| id.0).collect(),
        _ => vec![job.0],
    };
    ctx.wake_scheduler.notify_one();
    Ok(ControlJobReply { affected })
}

/// `UpdateJob`: `scontrol update JobId=N KEY=VALUE ...`.
pub async fn update(
    ctx: &ApiContext,
    caller: &Caller,
    request: UpdateJobRequest,
) -> Result<ControlJobReply, Status> {
    let by = caller.actor()?;
    let fields: Vec<(String, String)> = request
        .fields
        .into_iter()
        .map(|f| (f.key, f.value))
        .collect();
    let update = parse_update_fields(&fields, crate::clock::now())
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    let job = JobId(request.job_id);
    let command = Command::UpdateJob {
        job,
        update,
        by,
        at: clock::now(),
    };
    ctx.propose_one(command).await?;
    ctx.wake_scheduler.notify_one();
    Ok(ControlJobReply {
        affected: vec![job.0],
    })
}

/// `GetJob`: the record, and the script when the caller may see it.
/// Linearizable when asked (`consistent`): on the leader only.
pub async fn get(
    ctx: &ApiContext,
    caller: &Caller,
    request: GetJobRequest,
) -> Result<GetJobReply, Status> {
    let id = JobId(request.job_id);
    let read = |state: &corral_state::ClusterState| {
        let job = state
            .job(id)
            .ok_or_else(|| status::rejection(corral_state::Rejection::UnknownJob(id)))?;
        let script = if caller.may_act_for(&job.spec.user) {
            state
                .script_of(job)
                .map(|s| s.script.clone())
                .unwrap_or_default()
        } else {
            String::new()
        };
        Ok(GetJobReply {
            job_json: encode_job(job)?,
            script,
        })
    };
    read_state(ctx, request.consistent, read).await
}

/// Runs `read` on the state: linearizably when `consistent` (on the leader,
/// after a quorum confirmed it leads; a follower answers not-the-leader), else
/// on this replica's applied state.
async fn read_state<T>(
    ctx: &ApiContext,
    consistent: bool,
    read: impl FnOnce(&corral_state::ClusterState) -> Result<T, Status>,
) -> Result<T, Status> {
    if consistent {
        ctx.replica.read(read).await.map_err(status::read)?
    } else {
        ctx.replica.read_local(read).map_err(status::read)?
    }
}

/// `ListJobs`: unfinished jobs by default, every job with `all`.
/// Linearizable when asked (`consistent`): on the leader only.
pub async fn list(ctx: &ApiContext, request: ListJobsRequest) -> Result<ListJobsReply, Status> {
    let (paged, after, consistent) = (
        request.paged,
        JobId(request.after_job_id),
        request.consistent,
    );
    let filter = JobFilter::new(request)?;
    let read = |state: &corral_state::ClusterState| {
        let priorities = PriorityContext::new(state);
        let mut jobs = Vec::new();
        let mut priority = Vec::new();
        let mut bytes = 0;
        let mut last = None;
        let mut next_after_job_id = 0;
        let first = if paged { after } else { JobId(0) };
        for job in filter.matching_after(state, first) {
            if paged && bytes >= LIST_PAGE_BYTES {
                next_after_job_id = last.map_or(0, |id: JobId| id.0);
                break;
            }
            let json = encode_job(job)?;
            bytes += json.len();
            jobs.push(json);
            priority.push(priorities.priority(state, job, state.clock()));
            last = Some(job.id);
        }
        Ok(ListJobsReply {
            jobs_json: jobs,
            as_of_ms: state.clock().as_ms(),
            next_after_job_id,
            priorities: priority,
        })
    };
    read_state(ctx, consistent, read).await
}

/// How many bytes of job records a page of `ListJobs` holds at most (plus
/// the one record that crosses it): well under a client's 4 MiB message
/// limit (a job record is a few KiB).
pub const LIST_PAGE_BYTES: usize = 1 << 20;

/// `ExplainJob`: why it waits, in sentences. One at a time per user, off the
/// async workers (see [`super::planning_limits`]).
pub async fn explain(
    ctx: &ApiContext,
    user: &str,
    request: GetJobRequest,
) -> Result<ExplainJobReply, Status> {
    let id = JobId(request.job_id);
    let permit = ctx.planning.admit(user).await;
    let now = clock::now();
    let replica = std::sync::Arc::clone(&ctx.replica);
    let explanation = permit
        .plan_on_copy(replica, move |copy| {
            corral_scheduler::explain(&copy, id, now)
        })
        .await?
        .map_err(|_| status::rejection(corral_state::Rejection::UnknownJob(id)))?;
    Ok(ExplainJobReply {
        explanation: explanation.lines.join("\n"),
    })
}

/// `ReportCheckpoint`: from the job's owner (inside the job), an operator, or the
/// agent of a node in the allocation (the state machine checks the node).
pub async fn checkpoint(
    ctx: &ApiContext,
    caller: &Caller,
    request: ReportCheckpointRequest,
) -> Result<(), Status> {
    let job = JobId(request.job_id);
    let owner = ctx
        .replica
        .read_local(|state| state.job(job).map(|j| j.spec.user.clone()))
        .map_err(status::read)?
        .ok_or_else(|| status::rejection(corral_state::Rejection::UnknownJob(job)))?;
    let is_agent_of_node =
        caller.identity.role == corral_pki::Role::Agent && caller.identity.name == request.node;
    if !is_agent_of_node && !caller.may_act_for(&owner) {
        return Err(Status::permission_denied(format!(
            "job {job} belongs to '{owner}'; '{}' may not report its checkpoints",
            caller.identity.name
        )));
    }
    ctx.propose_one(Command::ReportCheckpoint {
        job,
        attempt: request.attempt,
        node: request.node,
        step: request.step,
        path: request.path,
        at: clock::now(),
    })
    .await?;
    Ok(())
}

/// Encodes a job record.
pub fn encode_job(job: &Job) -> Result<String, Status> {
    records::encode("job", job).map_err(|e| Status::internal(e.to_string()))
}

/// The filters of a job listing, checked up front.
pub struct JobFilter {
    request: ListJobsRequest,
    states: Vec<JobState>,
}

impl JobFilter {
    /// Checks the state names.
    pub fn new(request: ListJobsRequest) -> Result<Self, Status> {
        let mut states = Vec::new();
        for name in &request.states {
            let found = STATES.iter().find(|s| {
                s.slurm_name().eq_ignore_ascii_case(name)
                    || s.slurm_code().eq_ignore_ascii_case(name)
            });
            match found {
                Some(state) => states.push(*state),
                None => {
                    return Err(Status::invalid_argument(format!(
                        "unknown job state '{name}'; use one of {}",
                        STATES
                            .iter()
                            .map(|s| s.slurm_name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
            }
        }
        Ok(JobFilter { request, states })
    }

    /// True when `job` passes every filter.
    pub fn accepts(&self, job: &Job) -> bool {
        let r = &self.request;
        (r.users.is_empty() || r.users.contains(&job.spec.user))
            && (r.partitions.is_empty() || r.partitions.contains(&job.partition))
            && (r.accounts.is_empty() || r.accounts.contains(&job.account))
            && (self.states.is_empty() || self.states.contains(&job.state))
            && (r.job_ids.is_empty()
                || r.job_ids.contains(&job.id.0)
                || job
                    .array
                    .is_some_and(|a| r.job_ids.contains(&a.array_job_id.0)))
    }

    /// The matching jobs of `state`, by id: unfinished ones unless `all` or
    /// explicit ids or states were asked for.
    pub fn matching<'s>(
        &'s self,
        state: &'s ClusterState,
    ) -> Box<dyn Iterator<Item = &'s Job> + 's> {
        self.matching_after(state, JobId(0))
    }

    /// As [`JobFilter::matching`], only jobs with ids above `after` (a page's
    /// start), reached through the indexes without visiting those before it.
    pub fn matching_after<'s>(
        &'s self,
        state: &'s ClusterState,
        after: JobId,
    ) -> Box<dyn Iterator<Item = &'s Job> + 's> {
        let r = &self.request;
        if r.all || !r.job_ids.is_empty() || !self.states.is_empty() {
            let range = (std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded);
            Box::new(
                state
                    .jobs()
                    .range(range)
                    .map(|(_, job)| job)
                    .filter(|job| self.accepts(job)),
            )
        } else {
            Box::new(
                state
                    .unfinished_jobs_after(after)
                    .filter(|job| self.accepts(job)),
            )
        }
    }
}
