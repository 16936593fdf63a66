//! Node and GPU state: registration (with reconciliation of lost attempts), an
//! attempt an agent lost, down, drain and resume, and GPU faults.

use std::collections::BTreeSet;

use super::lifecycle::{begin_ending, release_node};
use super::reports::live_attempt_on;
use super::{MAX_TEXT_BYTES, check_text, job_of, require_operator};
use crate::command::Outcome;
use crate::ids::{Actor, AttemptNumber, JobId};
use crate::job::{EndCause, JobState};
use crate::node::{Availability, GpuHealth, Node, Registration, StateReason};
use crate::rejection::Rejection;
use crate::state::ClusterState;
use crate::time::Timestamp;

/// What an agent found on its node.
pub(super) struct ReportedHardware {
    pub cpus: u32,
    pub memory_mb: u64,
    pub gpus: Vec<(u32, String)>,
}

fn node_of<'s>(state: &'s ClusterState, name: &str) -> Result<&'s Node, Rejection> {
    state
        .nodes
        .get(name)
        .ok_or_else(|| Rejection::UnknownNode(name.to_string()))
}

fn automatic(reason: String, since: Timestamp) -> StateReason {
    StateReason {
        reason,
        since,
        by: "corral".into(),
    }
}

/// Differences between what the agent found and what is configured, if any.
fn hardware_mismatch(node: &Node, found: &ReportedHardware) -> Option<String> {
    let mut problems = Vec::new();
    if found.cpus < node.cpus {
        problems.push(format!(
            "{} CPUs found, {} configured",
            found.cpus, node.cpus
        ));
    }
    if found.memory_mb < node.memory_mb {
        problems.push(format!(
            "{} MiB found, {} configured",
            found.memory_mb, node.memory_mb
        ));
    }
    for gpu in &node.gpus {
        match found.gpus.iter().find(|(index, _)| *index == gpu.index) {
            None => problems.push(format!("GPU {} missing", gpu.index)),
            // Type names compare without regard to case, as Slurm compares
            // gres.conf's with slurm.conf's (`A100` configured, `a100` found).
            Some((_, kind)) if !kind.eq_ignore_ascii_case(&gpu.gpu_type) => problems.push(format!(
                "GPU {} is a {kind}, configured as {}",
                gpu.index, gpu.gpu_type
            )),
            Some(_) => {}
        }
    }
    (!problems.is_empty()).then(|| {
        format!(
            "registered hardware differs from configuration: {}",
            problems.join("; ")
        )
    })
}

pub(super) fn register(
    state: &mut ClusterState,
    name: &str,
    hardware: ReportedHardware,
    running: &[(JobId, AttemptNumber)],
    registration: Registration,
) -> Result<Outcome, Rejection> {
    let now = registration.at;
    let node = node_of(state, name)?;
    check_text("agent version", &registration.agent_version, MAX_TEXT_BYTES)?;
    check_text("boot id", &registration.boot_id, MAX_TEXT_BYTES)?;
    if let Some(address) = &registration.step_address {
        check_text("step address", address, MAX_TEXT_BYTES)?;
    }
    let mismatch = hardware_mismatch(node, &hardware);
    let running: BTreeSet<(JobId, AttemptNumber)> = running.iter().copied().collect();
    // Attempts placed here that the agent does not run. A COMPLETING one is done
    // here whether or not it ever started. A RUNNING one that started here lost its
    // processes; one that never started is still to be launched (the leader
    // launches by reconciling state after registration), so it is kept.
    let lost: Vec<(JobId, JobState)> = node
        .allocations
        .iter()
        .filter(|(job, usage)| !running.contains(&(**job, usage.attempt)))
        .filter_map(|(job, _)| state.jobs.get(job))
        .filter(|job| {
            job.state == JobState::Completing
                || job
                    .live_attempt()
                    .is_some_and(|a| a.started_on.contains(name))
        })
        .map(|job| (job.id, job.state))
        .collect();
    if let Some(node) = state.nodes.get_mut(name) {
        if !node.is_up() {
            node.availability = Availability::Up { since: now };
        }
        node.registration = Some(registration);
        if let Some(reason) = mismatch
            && node.drain.is_none()
        {
            node.drain = Some(automatic(reason, now));
        }
    }
    let mut changed = Vec::new();
    for (job, job_state) in lost {
        end_on_node_loss(
            state,
            job,
            job_state,
            name,
            "the agent no longer runs the job's processes",
            now,
        );
        changed.push(job);
    }
    Ok(Outcome::Jobs(changed))
}

/// A node lost an attempt's processes: a running job fails over (its other ranks
/// are killed and it is requeued if allowed); an ending job counts the node released.
fn end_on_node_loss(
    state: &mut ClusterState,
    job: JobId,
    job_state: JobState,
    node: &str,
    reason: &str,
    now: Timestamp,
) {
    match job_state {
        JobState::Running => {
            let cause = EndCause::NodeFailure {
                node: node.to_string(),
                reason: reason.to_string(),
            };
            begin_ending(state, job, cause, &[node], now);
        }
        JobState::Completing => {
            blame_node_loss(state, job, node, reason);
            release_node(state, job, node);
        }
        _ => {}
    }
}

/// An attempt whose batch script failed while `node` of its allocation had
/// not yet confirmed its processes gone, and `node` is now lost: the failure
/// is the node's (a step's task there vanished, and `srun` and the script
/// failed with it), not the job's. The attempt ends as a node failure, so the
/// job is requeued from its checkpoint where it may be, as Slurm ends such a
/// job NODE_FAIL. A script that succeeded keeps its success.
fn blame_node_loss(state: &mut ClusterState, job: JobId, node: &str, reason: &str) {
    let Some(ending) = state
        .jobs
        .get_mut(&job)
        .and_then(|j| j.attempts.last_mut())
        .and_then(|a| a.ending.as_mut())
    else {
        return;
    };
    let failed_exit = matches!(&ending.cause, EndCause::Exited(status) if !status.is_success());
    if failed_exit && ending.unreleased.contains(node) {
        ending.cause = EndCause::NodeFailure {
            node: node.to_string(),
            reason: reason.to_string(),
        };
    }
}

/// An agent lost attempt `attempt` of job `id` on `node` (see
/// `Command::AttemptLost`): its processes there are gone.
pub(super) fn attempt_lost(
    state: &mut ClusterState,
    id: JobId,
    attempt: AttemptNumber,
    node: &str,
    reason: &str,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    check_text("reason", reason, MAX_TEXT_BYTES)?;
    let job = job_of(state, id)?;
    live_attempt_on(job, attempt, node)?;
    let job_state = job.state;
    end_on_node_loss(state, id, job_state, node, reason, now);
    Ok(Outcome::Jobs(vec![id]))
}

pub(super) fn node_down(
    state: &mut ClusterState,
    name: &str,
    reason: String,
    by: &Actor,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    require_operator(by, "declaring a node down")?;
    check_text("reason", &reason, MAX_TEXT_BYTES)?;
    let node = node_of(state, name)?;
    let affected: Vec<(JobId, JobState)> = node
        .allocations
        .keys()
        .filter_map(|job| state.jobs.get(job))
        .map(|job| (job.id, job.state))
        .collect();
    if let Some(node) = state.nodes.get_mut(name) {
        node.availability = Availability::Down(StateReason {
            reason: reason.clone(),
            since: now,
            by: by.user.clone(),
        });
    }
    let mut changed = Vec::new();
    for (job, job_state) in affected {
        end_on_node_loss(state, job, job_state, name, &reason, now);
        changed.push(job);
    }
    Ok(Outcome::Jobs(changed))
}

pub(super) fn drain_node(
    state: &mut ClusterState,
    name: &str,
    reason: String,
    by: &Actor,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    require_operator(by, "draining a node")?;
    check_text("reason", &reason, MAX_TEXT_BYTES)?;
    node_of(state, name)?;
    if reason.trim().is_empty() {
        return Err(Rejection::InvalidRequest("a drain needs a reason".into()));
    }
    if let Some(node) = state.nodes.get_mut(name) {
        node.drain = Some(StateReason {
            reason,
            since: now,
            by: by.user.clone(),
        });
    }
    Ok(Outcome::Done)
}

pub(super) fn resume_node(
    state: &mut ClusterState,
    name: &str,
    by: &Actor,
) -> Result<Outcome, Rejection> {
    require_operator(by, "resuming a node")?;
    node_of(state, name)?;
    if let Some(node) = state.nodes.get_mut(name) {
        node.drain = None;
    }
    Ok(Outcome::Done)
}

fn check_gpu(state: &ClusterState, name: &str, gpu: u32) -> Result<(), Rejection> {
    let node = node_of(state, name)?;
    if node.gpus.get(gpu as usize).is_none() {
        return Err(Rejection::UnknownGpu {
            node: name.to_string(),
            gpu,
        });
    }
    Ok(())
}

pub(super) fn gpu_failed(
    state: &mut ClusterState,
    name: &str,
    gpu: u32,
    xid: Option<u32>,
    reason: String,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    check_gpu(state, name, gpu)?;
    check_text("reason", &reason, MAX_TEXT_BYTES)?;
    let mut holder = None;
    if let Some(slot) = state
        .nodes
        .get_mut(name)
        .and_then(|n| n.gpus.get_mut(gpu as usize))
    {
        let label = match xid {
            Some(x) => format!("XID {x}: {reason}"),
            None => reason.clone(),
        };
        slot.health = GpuHealth::Unhealthy {
            xid,
            reason,
            since: now,
        };
        slot.drain = Some(automatic(label, now));
        holder = slot.allocated_to;
    }
    let running_holder = holder.filter(|(job, attempt)| {
        state.jobs.get(job).is_some_and(|j| {
            j.state == JobState::Running && j.live_attempt().is_some_and(|a| a.number == *attempt)
        })
    });
    match running_holder {
        Some((job, _)) => {
            let cause = EndCause::GpuFailure {
                node: name.to_string(),
                gpu,
                xid,
            };
            begin_ending(state, job, cause, &[], now);
            Ok(Outcome::Jobs(vec![job]))
        }
        None => Ok(Outcome::Done),
    }
}

pub(super) fn drain_gpu(
    state: &mut ClusterState,
    name: &str,
    gpu: u32,
    reason: String,
    by: &Actor,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    require_operator(by, "draining a GPU")?;
    check_text("reason", &reason, MAX_TEXT_BYTES)?;
    check_gpu(state, name, gpu)?;
    if let Some(slot) = state
        .nodes
        .get_mut(name)
        .and_then(|n| n.gpus.get_mut(gpu as usize))
    {
        slot.drain = Some(StateReason {
            reason,
            since: now,
            by: by.user.clone(),
        });
    }
    Ok(Outcome::Done)
}

pub(super) fn resume_gpu(
    state: &mut ClusterState,
    name: &str,
    gpu: u32,
    by: &Actor,
) -> Result<Outcome, Rejection> {
    require_operator(by, "resuming a GPU")?;
    check_gpu(state, name, gpu)?;
    if let Some(slot) = state
        .nodes
        .get_mut(name)
        .and_then(|n| n.gpus.get_mut(gpu as usize))
    {
        slot.drain = None;
        slot.health = GpuHealth::Healthy;
    }
    Ok(Outcome::Done)
}
