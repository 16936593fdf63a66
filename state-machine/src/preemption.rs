//! Preemption policy shared by the scheduler (which proposes preemptions) and the
//! plan applier (which re-checks them): who may preempt whom, in which mode, and
//! when an attempt is exempt.

use crate::job::Job;
use crate::partition::PreemptMode;
use crate::state::ClusterState;
use crate::time::Timestamp;

/// The preemption mode that applies to a job: its QOS's, else its partition's.
pub fn mode_of(state: &ClusterState, job: &Job) -> PreemptMode {
    let from_qos = job
        .qos
        .as_ref()
        .and_then(|q| state.qos.get(q))
        .and_then(|q| q.preempt_mode);
    let from_partition = state.partitions.get(&job.partition).map(|p| p.preempt_mode);
    from_qos.or(from_partition).unwrap_or_default()
}

/// True when `preemptor` may take resources from `victim`: a higher partition
/// priority tier, or a QOS that lists the victim's QOS as preemptable.
pub fn outranks(state: &ClusterState, preemptor: &Job, victim: &Job) -> bool {
    let tier = |job: &Job| {
        state
            .partitions
            .get(&job.partition)
            .map_or(0, |p| p.priority_tier)
    };
    let qos_preempts = preemptor
        .qos
        .as_ref()
        .and_then(|q| state.qos.get(q))
        .is_some_and(|q| victim.qos.as_ref().is_some_and(|v| q.preempts.contains(v)));
    tier(preemptor) > tier(victim) || qos_preempts
}

/// When the victim's live attempt stops being exempt (`preempt_exempt_seconds`
/// after it started), or `None` without a live attempt.
pub fn exempt_until(state: &ClusterState, victim: &Job) -> Option<Timestamp> {
    let attempt = victim.live_attempt()?;
    Some(
        attempt
            .started_at
            .plus_secs(state.config.preempt_exempt_seconds),
    )
}

/// True when `victim` can be preempted for `preemptor` at `now`: it runs, is not
/// already ending or being preempted, its mode allows it, `preemptor` outranks it,
/// and its attempt is past the exempt time.
pub fn may_preempt(state: &ClusterState, preemptor: &Job, victim: &Job, now: Timestamp) -> bool {
    let running = victim.state == crate::job::JobState::Running
        && victim
            .live_attempt()
            .is_some_and(|a| a.ending.is_none() && a.preemption.is_none());
    running
        && preemptor.id != victim.id
        && mode_of(state, victim) != PreemptMode::Off
        && outranks(state, preemptor, victim)
        && exempt_until(state, victim).is_some_and(|t| t <= now)
}
