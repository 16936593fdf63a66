//! `apply`: validate a command against the state, then change it. Every handler
//! checks everything before its first mutation, so a refused command changes
//! nothing; the clock advances only when a command is accepted.

mod admin;
mod job_control;
mod lifecycle;
mod nodes;
mod plan;
mod reports;
mod steps;
mod submit;
mod submit_limits;
mod tick;
mod update;

use crate::command::{Command, Outcome};
use crate::ids::{Actor, JobId};
use crate::job::Job;
use crate::node::Registration;
use crate::rejection::Rejection;
use crate::state::ClusterState;
use crate::time::Timestamp;

pub(crate) fn apply(state: &mut ClusterState, command: Command) -> Result<Outcome, Rejection> {
    let stamped = command.time();
    if let Some(at) = stamped.filter(|at| *at > Timestamp::LATEST_ACCEPTED) {
        return Err(Rejection::InvalidRequest(format!(
            "command time {} ms is after the year 2500; check the leader's clock",
            at.as_ms()
        )));
    }
    let now = stamped.map_or(state.clock, |at| at.max(state.clock));
    let outcome = dispatch(state, command, now)?;
    state.clock = now;
    Ok(outcome)
}

fn dispatch(
    state: &mut ClusterState,
    command: Command,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    use Command::*;
    match command {
        Submit {
            spec,
            batch,
            by,
            key,
            ..
        } => submit::submit(state, spec, batch, &by, key, now),
        SubmitFormat1 {
            spec,
            batch,
            by,
            key,
            ..
        } => submit::submit(state, (*spec).into(), batch, &by, key, now),
        SubmitFormat2 {
            spec,
            batch,
            by,
            key,
            ..
        } => submit::submit(state, (*spec).into(), batch, &by, key, now),
        StepStarted {
            job,
            attempt,
            node,
            step,
            name,
            nodes,
            ntasks,
            cpus,
            ..
        } => steps::step_started(
            state,
            (job, attempt, &node),
            steps::StartedStep {
                step,
                name,
                nodes,
                ntasks,
                cpus,
            },
            now,
        ),
        StepEnded {
            job,
            attempt,
            node,
            step,
            status,
            ..
        } => steps::step_ended(state, (job, attempt, &node), step, status, now),
        // Its check is the replica's (it stops on a newer format); here it
        // changes nothing.
        StoredFormat { .. } => Ok(Outcome::Done),
        Cancel { target, by, .. } => job_control::cancel(state, &target, &by, now),
        Hold { job, by } => job_control::hold(state, job, &by),
        Release { job, by, .. } => job_control::release(state, job, &by, now),
        Requeue { job, by, .. } => job_control::requeue(state, job, &by, now),
        UpdateJob {
            job, update, by, ..
        } => update::update_job(state, job, update, &by),
        UpdateJobFormat2 {
            job, update, by, ..
        } => update::update_job(state, job, update.into(), &by),
        ApplyPlan {
            allocations,
            preemptions,
            reasons,
            ..
        } => plan::apply_plan(state, allocations, preemptions, reasons, now),
        Tick { .. } => tick::tick(state, now),
        AttemptStarted {
            job, attempt, node, ..
        } => reports::attempt_started(state, job, attempt, &node),
        BatchExited {
            job,
            attempt,
            node,
            status,
            ..
        } => reports::batch_exited(state, job, attempt, &node, status, now),
        NodeReleased {
            job, attempt, node, ..
        } => reports::node_released(state, job, attempt, &node, now),
        ReportCheckpoint {
            job,
            attempt,
            node,
            step,
            path,
            ..
        } => reports::checkpoint(state, job, attempt, &node, step, path, now),
        RegisterNode {
            node,
            cpus,
            memory_mb,
            gpus,
            running,
            agent_version,
            boot_id,
            step_address,
            ..
        } => {
            let hardware = nodes::ReportedHardware {
                cpus,
                memory_mb,
                gpus,
            };
            let registration = Registration {
                at: now,
                agent_version,
                boot_id,
                step_address,
            };
            nodes::register(state, &node, hardware, &running, registration)
        }
        NodeDown {
            node, reason, by, ..
        } => nodes::node_down(state, &node, reason, &by, now),
        DrainNode {
            node, reason, by, ..
        } => nodes::drain_node(state, &node, reason, &by, now),
        ResumeNode { node, by } => nodes::resume_node(state, &node, &by),
        GpuFailed {
            node,
            gpu,
            xid,
            reason,
            ..
        } => nodes::gpu_failed(state, &node, gpu, xid, reason, now),
        DrainGpu {
            node,
            gpu,
            reason,
            by,
            ..
        } => nodes::drain_gpu(state, &node, gpu, reason, &by, now),
        ResumeGpu { node, gpu, by } => nodes::resume_gpu(state, &node, gpu, &by),
        SetConfig { config, by } => admin::set_config(state, config, &by),
        SetLiveness { liveness, by, .. } => admin::set_liveness(state, liveness, &by, now),
        DefineNodes { nodes, by, .. } => admin::define_nodes(state, nodes, &by, now),
        RemoveNode { node, by } => admin::remove_node(state, &node, &by),
        SetPartition { partition, by } => admin::set_partition(state, partition, &by),
        RemovePartition { name, by } => admin::remove_partition(state, &name, &by),
        SetAccount { account, by } => admin::set_account(state, account, &by),
        SetAccountFormat2 { account, by } => admin::set_account(state, account.into(), &by),
        RemoveAccount { name, by } => admin::remove_account(state, &name, &by),
        SetUser { user, by } => admin::set_user(state, user, &by),
        SetUserFormat2 { user, by } => admin::set_user(state, user.into(), &by),
        RemoveUser { name, by } => admin::remove_user(state, &name, &by),
        SetQos { qos, by } => admin::set_qos(state, qos, &by),
        RemoveQos { name, by } => admin::remove_qos(state, &name, &by),
        SetTopology { topology, by } => admin::set_topology(state, topology, &by),
        SetReservation { reservation, by } => admin::set_reservation(state, reservation, &by),
        DeleteReservation { name, by } => admin::delete_reservation(state, &name, &by),
        ApplicationXid {
            job,
            attempt,
            node,
            gpu,
            xid,
            ..
        } => reports::application_xid(state, job, attempt, &node, gpu, xid, now),
        AttemptLost {
            job,
            attempt,
            node,
            reason,
            ..
        } => nodes::attempt_lost(state, job, attempt, &node, &reason, now),
    }
}

/// The job, or `UnknownJob`.
fn job_of(state: &ClusterState, id: JobId) -> Result<&Job, Rejection> {
    state.jobs.get(&id).ok_or(Rejection::UnknownJob(id))
}

/// Longest path accepted in a command (Linux PATH_MAX).
pub(crate) const MAX_PATH_BYTES: usize = 4096;
/// Longest free-text reason or label accepted in a command.
pub(crate) const MAX_TEXT_BYTES: usize = 1024;

/// Refuses text longer than `max` bytes; agents and clients must not be able to
/// grow the replicated state without bound.
fn check_text(what: &str, text: &str, max: usize) -> Result<(), Rejection> {
    if text.len() > max {
        return Err(Rejection::LimitReached(format!(
            "{what} is {} bytes; at most {max} are accepted",
            text.len()
        )));
    }
    Ok(())
}

fn require_admin(by: &Actor, action: &str) -> Result<(), Rejection> {
    if by.is_admin() {
        Ok(())
    } else {
        Err(Rejection::PermissionDenied(format!(
            "{action} needs the admin role; user '{}' does not have it",
            by.user
        )))
    }
}

fn require_operator(by: &Actor, action: &str) -> Result<(), Rejection> {
    if by.is_operator() {
        Ok(())
    } else {
        Err(Rejection::PermissionDenied(format!(
            "{action} needs the operator role; user '{}' does not have it",
            by.user
        )))
    }
}

fn require_owner_or_operator(job: &Job, by: &Actor, action: &str) -> Result<(), Rejection> {
    if job.spec.user == by.user || by.is_operator() {
        Ok(())
    } else {
        Err(Rejection::PermissionDenied(format!(
            "user '{}' may not {action} job {} of user '{}'; only its owner or an operator may",
            by.user, job.id, job.spec.user
        )))
    }
}
