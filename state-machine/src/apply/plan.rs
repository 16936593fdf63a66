//! `ApplyPlan`, the plan applier: each allocation and preemption is re-checked
//! against the current state and accepted or rejected on its own (optimistic
//! concurrency, as Nomad's plan applier). Entries apply in order, so a later entry
//! sees what earlier ones took.

use std::collections::BTreeSet;

use super::lifecycle::{begin_ending, start_attempt};
use crate::command::{Outcome, PlanOutcome, PlannedAllocation, PlannedPreemption};
use crate::ids::JobId;
use crate::job::{EndCause, Job, JobState, NodeAllocation, PendingReason, PreemptNotice};
use crate::node::Node;
use crate::partition::PreemptMode;
use crate::preemption;
use crate::state::ClusterState;
use crate::time::Timestamp;

pub(super) fn apply_plan(
    state: &mut ClusterState,
    allocations: Vec<PlannedAllocation>,
    preemptions: Vec<PlannedPreemption>,
    reasons: Vec<(JobId, PendingReason)>,
    now: Timestamp,
) -> Result<Outcome, crate::rejection::Rejection> {
    let mut outcome = PlanOutcome::default();
    for preemption in preemptions {
        let job = preemption.job;
        match check_preemption(state, &preemption, now) {
            Ok(()) => {
                begin_preemption(state, preemption, now);
                outcome.preempting.push(job);
            }
            Err(why) => outcome.rejected.push((job, why)),
        }
    }
    for planned in allocations {
        let job = planned.job;
        match check_allocation(state, &planned, now) {
            Ok(()) => {
                start_attempt(state, planned, now);
                outcome.started.push(job);
            }
            Err(why) => outcome.rejected.push((job, why)),
        }
    }
    for (id, reason) in reasons {
        if let Some(job) = state.jobs.get_mut(&id)
            && job.state == JobState::Pending
            && job.hold.is_none()
            && reason.is_set_by_scheduler()
        {
            // A job whose dependency just cleared becomes eligible now: its age
            // and its --switches wait count from here.
            if job.reason.waits_on_dependency() && !reason.waits_on_dependency() {
                job.eligible_since = job.eligible_since.max(now);
            }
            job.reason = reason;
        }
    }
    Ok(Outcome::Plan(outcome))
}

fn check_preemption(
    state: &ClusterState,
    planned: &PlannedPreemption,
    now: Timestamp,
) -> Result<(), String> {
    let victim = state.jobs.get(&planned.job).ok_or("job does not exist")?;
    if victim.state != JobState::Running {
        return Err(format!("job is {}, not RUNNING", victim.state.slurm_name()));
    }
    let attempt = victim.live_attempt().ok_or("job has no live attempt")?;
    if attempt.number != planned.attempt {
        return Err(format!(
            "attempt {} is stale; live attempt is {}",
            planned.attempt, attempt.number
        ));
    }
    if attempt.preemption.is_some() {
        return Err("job is already being preempted".into());
    }
    if planned.for_job == planned.job {
        return Err("a job cannot preempt itself".into());
    }
    let preemptor = state.jobs.get(&planned.for_job).ok_or_else(|| {
        format!(
            "job {} it would make room for does not exist",
            planned.for_job
        )
    })?;
    if preemptor.state != JobState::Pending || preemptor.hold.is_some() {
        return Err(format!(
            "job {} it would make room for is not an unheld PENDING job",
            planned.for_job
        ));
    }
    if preemption::mode_of(state, victim) == PreemptMode::Off {
        return Err("the job's partition and QOS do not allow preemption".into());
    }
    if preemption::exempt_until(state, victim).is_some_and(|t| now < t) {
        return Err(format!(
            "the attempt started less than {} s ago (preempt_exempt_seconds)",
            state.config.preempt_exempt_seconds
        ));
    }
    if !preemption::outranks(state, preemptor, victim) {
        return Err(format!(
            "job {} neither has a higher partition tier nor a QOS that preempts job {}'s",
            preemptor.id, victim.id
        ));
    }
    Ok(())
}

fn begin_preemption(state: &mut ClusterState, planned: PlannedPreemption, now: Timestamp) {
    let deadline = now.plus_secs(planned.grace_seconds);
    if let Some(attempt) = state
        .jobs
        .get_mut(&planned.job)
        .and_then(|j| j.attempts.last_mut())
    {
        attempt.preemption = Some(PreemptNotice {
            signal: planned.signal,
            deadline,
            for_job: planned.for_job,
        });
    }
    if planned.grace_seconds == 0 {
        let cause = EndCause::Preempted {
            for_job: planned.for_job,
        };
        begin_ending(state, planned.job, cause, &[], now);
    }
}

fn check_allocation(
    state: &ClusterState,
    planned: &PlannedAllocation,
    now: Timestamp,
) -> Result<(), String> {
    let job = state.jobs.get(&planned.job).ok_or("job does not exist")?;
    if job.state != JobState::Pending || job.hold.is_some() {
        return Err(format!(
            "job is {}, not an unheld PENDING job",
            job.state.slurm_name()
        ));
    }
    if planned.attempt != job.next_attempt_number() {
        return Err(format!(
            "attempt {} is stale; the next attempt is {}",
            planned.attempt,
            job.next_attempt_number()
        ));
    }
    let partition = state
        .partitions
        .get(&job.partition)
        .ok_or("partition no longer exists")?;
    if !partition.up {
        return Err(format!("partition '{}' is down", partition.name));
    }
    if planned.nodes.len() != job.resources.nodes as usize {
        return Err(format!(
            "gang has {} nodes; the job needs exactly {}",
            planned.nodes.len(),
            job.resources.nodes
        ));
    }
    let distinct: BTreeSet<&str> = planned.nodes.iter().map(|n| n.node.as_str()).collect();
    if distinct.len() != planned.nodes.len() {
        return Err("a node appears twice in the gang".into());
    }
    if let Some(missing) = job
        .resources
        .required_nodes
        .iter()
        .find(|n| !distinct.contains(n.as_str()))
    {
        return Err(format!("required node '{missing}' is not in the gang"));
    }
    for part in &planned.nodes {
        if !partition.nodes.contains(&part.node) {
            return Err(format!(
                "node '{}' is not in partition '{}'",
                part.node, partition.name
            ));
        }
        let node = state
            .nodes
            .get(&part.node)
            .ok_or_else(|| format!("node '{}' does not exist", part.node))?;
        check_reservations(state, job, &part.node, now)?;
        check_node_fit(job, node, part)?;
    }
    Ok(())
}

fn check_reservations(
    state: &ClusterState,
    job: &Job,
    node: &str,
    now: Timestamp,
) -> Result<(), String> {
    if let Some(name) = &job.spec.reservation {
        let reservation = state
            .reservations
            .get(name)
            .ok_or_else(|| format!("reservation '{name}' no longer exists"))?;
        if !reservation.is_active(now) {
            return Err(format!("reservation '{name}' is not active"));
        }
        if !reservation.admits(&job.spec.user, &job.account) {
            return Err(format!(
                "reservation '{name}' no longer admits the job's user or account"
            ));
        }
        if !reservation.nodes.contains(node) {
            return Err(format!("node '{node}' is not in reservation '{name}'"));
        }
        return Ok(());
    }
    match state
        .reservations
        .values()
        .find(|r| r.is_active(now) && r.nodes.contains(node))
    {
        Some(r) => Err(format!(
            "node '{node}' is in active reservation '{}'",
            r.name
        )),
        None => Ok(()),
    }
}

fn check_node_fit(job: &Job, node: &Node, part: &NodeAllocation) -> Result<(), String> {
    let name = &node.name;
    let wanted = &job.resources;
    if !node.accepts_work() {
        return Err(format!("node '{name}' is down or drained"));
    }
    if wanted.excluded_nodes.contains(name) {
        return Err(format!("node '{name}' is excluded by the job"));
    }
    if let Some(feature) = wanted.features.iter().find(|f| !node.features.contains(*f)) {
        return Err(format!("node '{name}' lacks feature '{feature}'"));
    }
    if node.is_held_exclusively() || (wanted.exclusive && !node.allocations.is_empty()) {
        return Err(format!(
            "node '{name}' is not free for an exclusive allocation"
        ));
    }
    if !wanted.gpu_count_fits(part.gpus.len()) {
        return Err(format!(
            "{} GPUs planned on '{name}'; the job needs {} per node",
            part.gpus.len(),
            wanted.gpus_per_node
        ));
    }
    let distinct: BTreeSet<u32> = part.gpus.iter().copied().collect();
    if distinct.len() != part.gpus.len() {
        return Err(format!("a GPU of '{name}' appears twice"));
    }
    for index in &part.gpus {
        let gpu = node
            .gpus
            .get(*index as usize)
            .ok_or_else(|| format!("node '{name}' has no GPU {index}"))?;
        if !gpu.is_free_and_usable() {
            return Err(format!(
                "GPU {index} of '{name}' is in use, drained or unhealthy"
            ));
        }
        if !wanted.exclusive && wanted.gpu_type.as_ref().is_some_and(|t| &gpu.gpu_type != t) {
            return Err(format!(
                "GPU {index} of '{name}' is a {}, not the type the job needs",
                gpu.gpu_type
            ));
        }
    }
    if let Some(wanted_type) = &wanted.gpu_type {
        let of_type = part
            .gpus
            .iter()
            .filter(|&&i| {
                node.gpus
                    .get(i as usize)
                    .is_some_and(|g| &g.gpu_type == wanted_type)
            })
            .count();
        if of_type < wanted.gpus_per_node as usize {
            return Err(format!(
                "{of_type} {wanted_type} GPUs planned on '{name}'; the job needs {} per node",
                wanted.gpus_per_node
            ));
        }
    }
    if part.cpus < wanted.cpus_per_node || part.cpus > node.free_cpus() {
        return Err(format!(
            "{} CPUs planned on '{name}' ({} free); the job needs {}",
            part.cpus,
            node.free_cpus(),
            wanted.cpus_per_node
        ));
    }
    let memory_needed = if wanted.whole_node_memory {
        node.memory_mb
    } else {
        wanted.memory_per_node_mb
    };
    if part.memory_mb < memory_needed || part.memory_mb > node.free_memory_mb() {
        return Err(format!(
            "{} MiB planned on '{name}' ({} free); the job needs {memory_needed}",
            part.memory_mb,
            node.free_memory_mb()
        ));
    }
    Ok(())
}
