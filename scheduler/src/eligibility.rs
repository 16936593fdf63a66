//! Whether a pending job may start at all this pass, apart from resources: holds,
//! partition state and limits, dependencies, array throttles, QOS group and
//! per-user limits, association limits, and its reservation. A refusal is the job's pending reason.

use std::collections::{BTreeMap, BTreeSet};

use corral_state::job::{Hold, Job, JobState, PendingReason};
use corral_state::{ClusterState, JobId, Timestamp};

use crate::association_limits::AssociationUsage;
use crate::dependency::{self, DependencyStatus};

/// What running (and already planned) jobs hold, for limits.
#[derive(Debug, Clone, Default)]
pub struct Usage<'s> {
    gpus_by_qos_account: BTreeMap<(&'s str, &'s str), u64>,
    gpus_by_qos_user: BTreeMap<(&'s str, &'s str), u64>,
    jobs_by_qos_user: BTreeMap<(&'s str, &'s str), u32>,
    tasks_by_array: BTreeMap<JobId, u32>,
    singletons: BTreeSet<(&'s str, &'s str)>,
    associations: AssociationUsage<'s>,
}

impl<'s> Usage<'s> {
    /// Counts every running or completing job.
    pub fn from_state(state: &'s ClusterState) -> Self {
        let mut usage = Usage {
            associations: AssociationUsage::new(state),
            ..Usage::default()
        };
        for job in state.active_jobs() {
            // What the live attempt holds (an exclusive job holds every GPU
            // of its nodes).
            let gpus = job
                .live_attempt()
                .map_or_else(|| job.resources.total_gpus(), |a| a.gpu_count());
            usage.add(state, job, gpus);
        }
        usage
    }

    /// Counts a job that runs or was just planned to start, holding `gpus`.
    pub fn add(&mut self, state: &'s ClusterState, job: &'s Job, gpus: u64) {
        self.associations.add(state, job, gpus);
        if let Some(qos) = job.qos.as_deref() {
            *self
                .gpus_by_qos_account
                .entry((qos, job.account.as_str()))
                .or_default() += gpus;
            *self
                .gpus_by_qos_user
                .entry((qos, job.spec.user.as_str()))
                .or_default() += gpus;
            *self
                .jobs_by_qos_user
                .entry((qos, job.spec.user.as_str()))
                .or_default() += 1;
        }
        if let Some(array) = job.array {
            *self.tasks_by_array.entry(array.array_job_id).or_default() += 1;
        }
        self.singletons
            .insert((job.spec.user.as_str(), job.spec.name.as_str()));
    }
}

/// `Ok` when nothing but resources stands between the job and a start.
pub fn check(
    state: &ClusterState,
    job: &Job,
    now: Timestamp,
    usage: &Usage<'_>,
) -> Result<(), PendingReason> {
    if job.state == JobState::RequeueHold {
        return Err(PendingReason::JobHoldMaxRequeue);
    }
    match job.hold {
        Some(_) if job.reason == PendingReason::ReservationDeleted => {
            return Err(PendingReason::ReservationDeleted);
        }
        Some(Hold::User) => return Err(PendingReason::JobHeldUser),
        Some(Hold::Admin) => return Err(PendingReason::JobHeldAdmin),
        None => {}
    }
    let partition = state
        .partitions()
        .get(&job.partition)
        .ok_or(PendingReason::PartitionDown)?;
    if !partition.up {
        return Err(PendingReason::PartitionDown);
    }
    if job.time_limit > partition.max_time {
        return Err(PendingReason::PartitionTimeLimit);
    }
    if job.spec.begin_time.is_some_and(|begin| begin > now) {
        return Err(PendingReason::BeginTime);
    }
    let singleton_busy = job.spec.dependency.as_ref().is_some_and(|d| d.singleton)
        && usage
            .singletons
            .contains(&(job.spec.user.as_str(), job.spec.name.as_str()));
    match dependency::status(state, job, now, singleton_busy) {
        DependencyStatus::Satisfied => {}
        DependencyStatus::Waiting => return Err(PendingReason::Dependency),
        DependencyStatus::Never => return Err(PendingReason::DependencyNeverSatisfied),
    }
    if let Some(array) = job.array {
        let throttle = job.spec.array.as_ref().and_then(|a| a.throttle);
        let running = usage
            .tasks_by_array
            .get(&array.array_job_id)
            .copied()
            .unwrap_or(0);
        if throttle.is_some_and(|limit| running >= limit) {
            return Err(PendingReason::JobArrayTaskLimit);
        }
    }
    check_limits(state, job, usage, job.resources.total_gpus())?;
    if let Some(name) = &job.spec.reservation {
        let admitted = state
            .reservations()
            .get(name)
            .is_some_and(|r| r.is_active(now) && r.admits(&job.spec.user, &job.account));
        if !admitted {
            return Err(PendingReason::Reservation);
        }
    }
    Ok(())
}

/// `Ok` when `job`, holding `gpus`, fits its QOS and association limits. The
/// pass checks an exclusive job again once placed: it holds every GPU of its
/// nodes, more than it asked for.
pub fn check_limits(
    state: &ClusterState,
    job: &Job,
    usage: &Usage<'_>,
    gpus: u64,
) -> Result<(), PendingReason> {
    check_qos(state, job, usage, gpus)?;
    usage.associations.check(state, job, gpus)
}

fn check_qos(
    state: &ClusterState,
    job: &Job,
    usage: &Usage<'_>,
    gpus: u64,
) -> Result<(), PendingReason> {
    let Some(qos) = job.qos.as_ref().and_then(|q| state.qos().get(q)) else {
        return Ok(());
    };
    let name = qos.name.as_str();
    let account_gpus = usage
        .gpus_by_qos_account
        .get(&(name, job.account.as_str()))
        .copied()
        .unwrap_or(0);
    if qos
        .grp_gpus_per_account
        .is_some_and(|limit| account_gpus + gpus > u64::from(limit))
    {
        return Err(PendingReason::QosGrpGpuLimit);
    }
    if let Some(limit) = qos.grp_gpu_minutes_per_account {
        let used_ms = state
            .accounting()
            .by_qos_account
            .get(&(name.to_string(), job.account.clone()))
            .map_or(0, |u| u.decayed_gpu_ms);
        if used_ms / 60_000 >= limit {
            return Err(PendingReason::QosGrpGpuRunMinutes);
        }
    }
    let user_gpus = usage
        .gpus_by_qos_user
        .get(&(name, job.spec.user.as_str()))
        .copied()
        .unwrap_or(0);
    if qos
        .max_gpus_per_user
        .is_some_and(|limit| user_gpus + gpus > u64::from(limit))
    {
        return Err(PendingReason::QosMaxGpuPerUser);
    }
    let user_jobs = usage
        .jobs_by_qos_user
        .get(&(name, job.spec.user.as_str()))
        .copied()
        .unwrap_or(0);
    if qos
        .max_jobs_per_user
        .is_some_and(|limit| user_jobs >= limit)
    {
        return Err(PendingReason::QosMaxJobsPerUser);
    }
    Ok(())
}
