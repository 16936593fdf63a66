//! What must hold after every command, checked from scratch. Tests run it after
//! each step of random command sequences; it is O(state), so production code calls
//! it only in debug tooling.

use std::collections::{BTreeMap, BTreeSet};

use crate::ids::{AttemptNumber, JobId};
use crate::job::{Job, JobState};
use crate::state::ClusterState;

/// Checks every invariant, returning the first violation found.
pub fn check(state: &ClusterState) -> Result<(), String> {
    check_indices(state)?;
    for job in state.jobs.values() {
        check_job(job)?;
    }
    check_gpu_ownership(state)?;
    check_node_usage(state)?;
    check_accounting(state)?;
    state.submit_keys.check(state.clock, state.next_job_id)?;
    if let Some(settings) = &state.liveness {
        settings
            .current
            .check()
            .map_err(|refusal| format!("liveness settings in force are invalid: {refusal}"))?;
    }
    Ok(())
}

/// Each job is in exactly one state, and the queue indices agree with it.
fn check_indices(state: &ClusterState) -> Result<(), String> {
    for (id, job) in &state.jobs {
        if *id != job.id {
            return Err(format!("job stored under {id} says it is {}", job.id));
        }
        if id.0 >= state.next_job_id {
            return Err(format!(
                "job {id} is not below next_job_id {}",
                state.next_job_id
            ));
        }
        let queued = matches!(job.state, JobState::Pending | JobState::RequeueHold);
        if queued != state.queued.contains(id) {
            return Err(format!(
                "job {id} is {} but queued-index membership is {}",
                job.state.slurm_name(),
                !queued
            ));
        }
        if job.state.holds_resources() != state.active.contains(id) {
            return Err(format!(
                "job {id} is {} but active-index membership disagrees",
                job.state.slurm_name()
            ));
        }
        if !state.scripts.contains_key(&job.script_id) {
            return Err(format!("job {id} has no stored script"));
        }
    }
    for id in state.queued.iter().chain(&state.active) {
        if !state.jobs.contains_key(id) {
            return Err(format!("index lists unknown job {id}"));
        }
    }
    if !state.queued.is_disjoint(&state.active) {
        return Err("a job is both queued and active".into());
    }
    if let Some(built) = state.unfinished_index.built() {
        let unfinished = state
            .queued
            .iter()
            .chain(&state.active)
            .filter_map(|id| state.jobs.get(id));
        if *built != crate::unfinished_index::recount(unfinished) {
            return Err("the unfinished-jobs index disagrees with a recount".into());
        }
    }
    Ok(())
}

/// Attempt numbering, liveness and gang wholeness for one job.
fn check_job(job: &Job) -> Result<(), String> {
    for attempt in &job.attempts {
        let steps = job
            .steps
            .iter()
            .filter(|s| s.attempt == attempt.number)
            .count();
        if steps > crate::job::MAX_STEP_RECORDS {
            return Err(format!(
                "job {} records {steps} steps of attempt {}",
                job.id, attempt.number
            ));
        }
    }
    if let Some(step) = job
        .steps
        .iter()
        .find(|s| !job.attempts.iter().any(|a| a.number == s.attempt))
    {
        return Err(format!(
            "job {} records step {} of attempt {}, which it never had",
            job.id, step.step, step.attempt
        ));
    }
    let id = job.id;
    for (i, attempt) in job.attempts.iter().enumerate() {
        if attempt.number != i as AttemptNumber + 1 {
            return Err(format!(
                "job {id}: attempt at position {i} is numbered {}",
                attempt.number
            ));
        }
        if attempt.is_live() && i + 1 != job.attempts.len() {
            return Err(format!(
                "job {id}: attempt {} is live but not the newest",
                attempt.number
            ));
        }
        if attempt.end.is_some() && attempt.ending.is_some() {
            return Err(format!(
                "job {id}: attempt {} both ended and ending",
                attempt.number
            ));
        }
    }
    let live = job.live_attempt();
    match job.state {
        JobState::Running => {
            let attempt = live.ok_or_else(|| format!("job {id} RUNNING without a live attempt"))?;
            if attempt.ending.is_some() {
                return Err(format!("job {id} RUNNING with an ending attempt"));
            }
            // Gangs are whole: every node of the job, every GPU it asked for.
            if attempt.allocation.len() != job.resources.nodes as usize {
                return Err(format!(
                    "job {id}: gang has {} of {} nodes",
                    attempt.allocation.len(),
                    job.resources.nodes
                ));
            }
            if let Some(part) = attempt
                .allocation
                .iter()
                .find(|p| !job.resources.gpu_count_fits(p.gpus.len()))
            {
                return Err(format!(
                    "job {id}: node {} has {} of {} GPUs",
                    part.node,
                    part.gpus.len(),
                    job.resources.gpus_per_node
                ));
            }
        }
        JobState::Completing => {
            let attempt =
                live.ok_or_else(|| format!("job {id} COMPLETING without a live attempt"))?;
            let ending = attempt
                .ending
                .as_ref()
                .ok_or_else(|| format!("job {id} COMPLETING without an ending"))?;
            if ending.unreleased.is_empty() {
                return Err(format!("job {id} COMPLETING with every node released"));
            }
        }
        _ => {
            if live.is_some() {
                return Err(format!(
                    "job {id} is {} but has a live attempt",
                    job.state.slurm_name()
                ));
            }
        }
    }
    if job.state.is_terminal() != job.ended_at.is_some() {
        return Err(format!("job {id}: terminal state and end time disagree"));
    }
    if job.state == JobState::Requeued {
        return Err(format!(
            "job {id}: REQUEUED is only an attempt's final state"
        ));
    }
    Ok(())
}

/// The nodes where each live attempt still holds resources.
fn held_nodes(job: &Job) -> Vec<(&str, &[u32])> {
    let Some(attempt) = job.live_attempt() else {
        return Vec::new();
    };
    attempt
        .allocation
        .iter()
        .filter(|part| {
            attempt
                .ending
                .as_ref()
                .is_none_or(|e| e.unreleased.contains(&part.node))
        })
        .map(|part| (part.node.as_str(), part.gpus.as_slice()))
        .collect()
}

/// No GPU is in two live allocations, and the per-GPU owner matches the attempts.
fn check_gpu_ownership(state: &ClusterState) -> Result<(), String> {
    let mut expected: BTreeMap<(&str, u32), (JobId, AttemptNumber)> = BTreeMap::new();
    for job in state.jobs.values() {
        let Some(attempt) = job.live_attempt() else {
            continue;
        };
        for (node, gpus) in held_nodes(job) {
            for gpu in gpus {
                if let Some(other) = expected.insert((node, *gpu), (job.id, attempt.number)) {
                    return Err(format!(
                        "GPU {node}:{gpu} is held by job {} and job {}",
                        other.0, job.id
                    ));
                }
            }
        }
    }
    for node in state.nodes.values() {
        for gpu in &node.gpus {
            let want = expected.remove(&(node.name.as_str(), gpu.index));
            if gpu.allocated_to != want {
                return Err(format!(
                    "GPU {}:{} owner is {:?}, attempts say {want:?}",
                    node.name, gpu.index, gpu.allocated_to
                ));
            }
        }
    }
    if let Some(((node, gpu), _)) = expected.into_iter().next() {
        return Err(format!(
            "an attempt holds GPU {node}:{gpu}, which does not exist"
        ));
    }
    Ok(())
}

/// Node allocation tables match the live attempts and never exceed the hardware.
fn check_node_usage(state: &ClusterState) -> Result<(), String> {
    let mut expected: BTreeMap<&str, BTreeSet<JobId>> = BTreeMap::new();
    for job in state.jobs.values() {
        for (node, _) in held_nodes(job) {
            expected.entry(node).or_default().insert(job.id);
        }
    }
    for node in state.nodes.values() {
        let listed: BTreeSet<JobId> = node.allocations.keys().copied().collect();
        let want = expected.remove(node.name.as_str()).unwrap_or_default();
        if listed != want {
            return Err(format!(
                "node {} lists jobs {listed:?}, attempts say {want:?}",
                node.name
            ));
        }
        let cpus: u64 = node.allocations.values().map(|u| u64::from(u.cpus)).sum();
        let memory: u64 = node.allocations.values().map(|u| u.memory_mb).sum();
        if cpus > u64::from(node.cpus) || memory > node.memory_mb {
            return Err(format!(
                "node {} is over-committed: {cpus} CPUs, {memory} MiB",
                node.name
            ));
        }
        if node.allocations.len() > 1 && node.is_held_exclusively() {
            return Err(format!(
                "node {} is shared although held exclusively",
                node.name
            ));
        }
    }
    if let Some((node, _)) = expected.into_iter().next() {
        return Err(format!("an attempt holds resources on unknown node {node}"));
    }
    Ok(())
}

/// Usage equals the sum over attempts of runtime x GPUs; decayed usage never
/// exceeds raw usage.
fn check_accounting(state: &ClusterState) -> Result<(), String> {
    let mut by_user: BTreeMap<&str, u128> = BTreeMap::new();
    let mut by_account: BTreeMap<&str, u128> = BTreeMap::new();
    for job in state.jobs.values() {
        for attempt in &job.attempts {
            let runtime_ms = u128::from(attempt.charged_until.ms_since(attempt.started_at));
            let expected = u128::from(attempt.gpu_count()) * runtime_ms;
            if u128::from(attempt.gpu_ms) != expected {
                return Err(format!(
                    "job {} attempt {}: charged {} GPU-ms, runtime x GPUs is {expected}",
                    job.id, attempt.number, attempt.gpu_ms
                ));
            }
            if let Some(stop) = attempt
                .end
                .as_ref()
                .map(|e| e.at)
                .or(attempt.ending.as_ref().map(|e| e.at))
                && attempt.charged_until > stop
            {
                return Err(format!(
                    "job {} attempt {} charged past its end",
                    job.id, attempt.number
                ));
            }
            *by_user.entry(&job.spec.user).or_default() += u128::from(attempt.gpu_ms);
            *by_account.entry(&job.account).or_default() += u128::from(attempt.gpu_ms);
        }
    }
    let tables = [
        ("user", &state.accounting.by_user, &by_user),
        ("account", &state.accounting.by_account, &by_account),
    ];
    for (kind, recorded, expected) in tables {
        for (name, usage) in recorded {
            let want = expected.get(name.as_str()).copied().unwrap_or(0);
            if u128::from(usage.gpu_ms) != want {
                return Err(format!(
                    "{kind} {name}: usage {} GPU-ms, attempts sum to {want}",
                    usage.gpu_ms
                ));
            }
            if usage.decayed_gpu_ms > usage.gpu_ms {
                return Err(format!("{kind} {name}: decayed usage exceeds raw usage"));
            }
        }
        for (name, want) in expected {
            if *want > 0 && !recorded.contains_key(*name) {
                return Err(format!(
                    "{kind} {name}: attempts charged {want} GPU-ms but no usage recorded"
                ));
            }
        }
    }
    Ok(())
}
