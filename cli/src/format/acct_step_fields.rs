//! sacct's values for a job step's row (`N.0`, `N.1`, ...): an `srun` step of
//! the job's newest attempt as its coordinating agent reported it. Fields
//! about the job as a whole (partition, user, limits, requests) are blank on a
//! step's row, as in sacct.

use corral_state::job::{Attempt, Job, JobState, StepRecord};
use corral_state::slurm::hostlist;

use super::acct_fields::{AcctContext, AcctField as F, tres};
use super::datetime::format_timestamp;
use super::elapsed::sacct_time;
use super::job_fields::{exit_code_text, job_id_text};

/// The step's state: from its worst task's status once it ended; while it has
/// no end, RUNNING as long as its attempt runs, else CANCELLED (it ended with
/// its attempt).
pub fn step_state(attempt: &Attempt, step: &StepRecord) -> JobState {
    match &step.exit {
        Some(exit) if exit.signal.is_some() => JobState::Cancelled,
        Some(exit) if exit.code == 0 => JobState::Completed,
        Some(_) => JobState::Failed,
        None if attempt.end.is_none() => JobState::Running,
        None => JobState::Cancelled,
    }
}

/// Seconds the step ran: until its end, its attempt's end, or `now`.
fn elapsed_secs(attempt: &Attempt, step: &StepRecord, ctx: &AcctContext) -> u64 {
    let until = step
        .ended_at
        .or_else(|| attempt.end.as_ref().map(|end| end.at))
        .unwrap_or(ctx.now);
    until.secs_since(step.started_at)
}

/// The value of `field` on the row of `step`; `None` where sacct leaves the
/// cell blank.
pub fn step_value(
    field: F,
    (job, attempt, step): (&Job, &Attempt, &StepRecord),
    ctx: &AcctContext,
) -> Option<String> {
    let names = hostlist::expand(&step.nodes).unwrap_or_default();
    let on_step = |node: &&corral_state::job::NodeAllocation| names.contains(&node.node);
    let gpus: u64 = attempt
        .allocation
        .iter()
        .filter(on_step)
        .map(|n| n.gpus.len() as u64)
        .sum();
    let memory: u64 = attempt
        .allocation
        .iter()
        .filter(on_step)
        .map(|n| n.memory_mb)
        .sum();
    let elapsed = elapsed_secs(attempt, step, ctx);
    let cpus = u64::from(step.cpus);
    Some(match field {
        F::Account => job.account.clone(),
        F::AllocCpus | F::NCpus => cpus.to_string(),
        F::AllocGpus => gpus.to_string(),
        F::AllocGres => match gpus {
            0 => return None,
            n => format!("gpu:{n}"),
        },
        F::AllocNodes | F::NNodes => step.node_count.to_string(),
        F::AllocTres => tres(cpus, memory, u64::from(step.node_count), gpus),
        F::CpuTime => sacct_time(elapsed * cpus),
        F::CpuTimeRaw => (elapsed * cpus).to_string(),
        F::Elapsed => sacct_time(elapsed),
        F::ElapsedRaw => elapsed.to_string(),
        F::End => step
            .ended_at
            .map_or_else(|| "Unknown".into(), format_timestamp),
        F::ExitCode => exit_code_text(step.exit.as_ref()),
        F::JobId => format!("{}.{}", job_id_text(job), step.step),
        F::JobIdRaw => format!("{}.{}", job.id, step.step),
        F::JobName => step.name.clone(),
        F::NodeList => step.nodes.clone(),
        F::NTasks => step.ntasks.to_string(),
        F::Start => format_timestamp(step.started_at),
        F::State => step_state(attempt, step).slurm_name().to_string(),
        F::Submit => format_timestamp(job.submitted_at),
        F::Comment
        | F::Constraints
        | F::DerivedExitCode
        | F::Eligible
        | F::FailedNode
        | F::Gid
        | F::Group
        | F::Partition
        | F::Priority
        | F::Qos
        | F::Reason
        | F::ReqCpus
        | F::ReqGres
        | F::ReqMem
        | F::ReqNodes
        | F::ReqTres
        | F::Reservation
        | F::Restarts
        | F::Timelimit
        | F::TimelimitRaw
        | F::Uid
        | F::User
        | F::WorkDir => return None,
    })
}
