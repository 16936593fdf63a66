//! Whether a job's `--dependency` is satisfied, still waiting, or can never be
//! satisfied, from the states of the jobs it names.

use corral_state::job::{Job, JobState};
use corral_state::slurm::dependency::{DependencyCondition, DependencyKind};
use corral_state::{ClusterState, JobId, Timestamp};

/// The state of a dependency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DependencyStatus {
    /// The job may start.
    Satisfied,
    /// Not yet; it may be later.
    Waiting,
    /// It never can be (e.g. `afterok` on a job that failed).
    Never,
}

/// Evaluates the job's dependency at `now`. `singleton_busy` answers whether
/// another job of the same user and name is running or being started this pass.
pub fn status(
    state: &ClusterState,
    job: &Job,
    now: Timestamp,
    singleton_busy: bool,
) -> DependencyStatus {
    let Some(spec) = &job.spec.dependency else {
        return DependencyStatus::Satisfied;
    };
    if spec.singleton && singleton_busy {
        return DependencyStatus::Waiting;
    }
    if spec.conditions.is_empty() {
        return DependencyStatus::Satisfied;
    }
    let results = spec
        .conditions
        .iter()
        .map(|c| condition(state, job, c, now));
    if spec.any_of {
        let results: Vec<DependencyStatus> = results.collect();
        if results.contains(&DependencyStatus::Satisfied) {
            DependencyStatus::Satisfied
        } else if results.iter().all(|r| *r == DependencyStatus::Never) {
            DependencyStatus::Never
        } else {
            DependencyStatus::Waiting
        }
    } else {
        combine_all(results)
    }
}

/// All must hold: any Never is Never, any Waiting is Waiting.
fn combine_all(results: impl Iterator<Item = DependencyStatus>) -> DependencyStatus {
    let mut overall = DependencyStatus::Satisfied;
    for r in results {
        match r {
            DependencyStatus::Never => return DependencyStatus::Never,
            DependencyStatus::Waiting => overall = DependencyStatus::Waiting,
            DependencyStatus::Satisfied => {}
        }
    }
    overall
}

/// The jobs one condition names: a single job, one array task, or every task of
/// an array (for `aftercorr`, the task with the dependent's own index).
fn targets<'s>(state: &'s ClusterState, job: &Job, c: &DependencyCondition) -> Vec<&'s Job> {
    let Some(named) = state.job(JobId(c.job_id)) else {
        return Vec::new();
    };
    let is_array = named.array.is_some_and(|a| a.array_job_id == named.id);
    if !is_array {
        return vec![named];
    }
    let tasks = state
        .jobs()
        .range(named.id..)
        .map(|(_, j)| j)
        .take_while(|j| j.array.is_some_and(|a| a.array_job_id == named.id));
    match (c.kind, c.array_task, job.array) {
        (_, Some(task), _) => tasks
            .filter(|j| j.array.is_some_and(|a| a.task_id == task))
            .collect(),
        (DependencyKind::AfterCorr, None, Some(mine)) => tasks
            .filter(|j| j.array.is_some_and(|a| a.task_id == mine.task_id))
            .collect(),
        _ => tasks.collect(),
    }
}

fn condition(
    state: &ClusterState,
    job: &Job,
    c: &DependencyCondition,
    now: Timestamp,
) -> DependencyStatus {
    let targets = targets(state, job, c);
    if targets.is_empty() {
        // The named job is gone (or the array has no such task): nothing can
        // ever satisfy the condition.
        return DependencyStatus::Never;
    }
    combine_all(targets.into_iter().map(|t| one(t, c, now)))
}

fn one(target: &Job, c: &DependencyCondition, now: Timestamp) -> DependencyStatus {
    use DependencyStatus::*;
    let ended_ok = target.state == JobState::Completed;
    let terminal = target.state.is_terminal();
    match c.kind {
        DependencyKind::After => {
            let began = target
                .attempts
                .first()
                .map(|a| a.started_at)
                .or(target.ended_at);
            match began {
                Some(at) if at.plus_secs(u64::from(c.delay_minutes) * 60) <= now => Satisfied,
                _ => Waiting,
            }
        }
        DependencyKind::AfterAny => {
            if terminal {
                Satisfied
            } else {
                Waiting
            }
        }
        DependencyKind::AfterOk | DependencyKind::AfterCorr => match (terminal, ended_ok) {
            (true, true) => Satisfied,
            (true, false) => Never,
            _ => Waiting,
        },
        DependencyKind::AfterNotOk => match (terminal, ended_ok) {
            (true, false) => Satisfied,
            (true, true) => Never,
            _ => Waiting,
        },
    }
}
