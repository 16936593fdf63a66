//! `srun` steps as their coordinating agents report them: a record per step in
//! the job (sacct's `N.0` rows), started while its attempt runs, ended with
//! its worst task's status. Both reports are resent until committed, so a
//! repeated one changes nothing. A step is known by its attempt, the node that
//! coordinated it and the number that node gave it.

use super::job_of;
use super::reports::live_attempt_on;
use crate::command::Outcome;
use crate::ids::{AttemptNumber, JobId};
use crate::job::{ExitStatus, MAX_STEP_RECORDS, StepRecord};
use crate::rejection::Rejection;
use crate::slurm::hostlist;
use crate::state::ClusterState;
use crate::time::Timestamp;

/// What a `StepStarted` report says.
pub(super) struct StartedStep {
    pub step: u32,
    pub name: String,
    pub nodes: Vec<String>,
    pub ntasks: u32,
    pub cpus: u32,
}

pub(super) fn step_started(
    state: &mut ClusterState,
    (id, attempt, node): (JobId, AttemptNumber, &str),
    started: StartedStep,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    let job = job_of(state, id)?;
    let live = live_attempt_on(job, attempt, node)?;
    if let Some(outside) = started
        .nodes
        .iter()
        .find(|n| !live.allocation.iter().any(|a| &a.node == *n))
    {
        return Err(Rejection::NotInAllocation {
            job: id,
            attempt,
            node: outside.clone(),
        });
    }
    super::check_text("step name", &started.name, super::MAX_TEXT_BYTES)?;
    let known = job
        .steps
        .iter()
        .any(|s| s.attempt == attempt && s.node == node && s.step == started.step);
    let of_attempt = job.steps.iter().filter(|s| s.attempt == attempt).count();
    if known || of_attempt >= MAX_STEP_RECORDS {
        return Ok(Outcome::Done);
    }
    let names: Vec<&str> = started.nodes.iter().map(String::as_str).collect();
    let nodes = hostlist::compress(&names);
    let node_count = u32::try_from(started.nodes.len()).unwrap_or(u32::MAX);
    if let Some(job) = state.jobs.get_mut(&id) {
        job.steps.push(StepRecord {
            attempt,
            step: started.step,
            node: node.to_string(),
            name: started.name,
            nodes,
            node_count,
            ntasks: started.ntasks,
            cpus: started.cpus,
            started_at: now,
            ended_at: None,
            exit: None,
        });
    }
    Ok(Outcome::Done)
}

pub(super) fn step_ended(
    state: &mut ClusterState,
    (id, attempt, node): (JobId, AttemptNumber, &str),
    step: u32,
    status: ExitStatus,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    let job = job_of(state, id)?;
    let same = |s: &StepRecord| s.attempt == attempt && s.node == node && s.step == step;
    let open = job.steps.iter().any(|s| same(s) && s.ended_at.is_none());
    if !open {
        return Ok(Outcome::Done);
    }
    if let Some(record) = state
        .jobs
        .get_mut(&id)
        .and_then(|j| j.steps.iter_mut().find(|s| same(s)))
    {
        record.ended_at = Some(now);
        record.exit = Some(status);
    }
    Ok(Outcome::Done)
}
