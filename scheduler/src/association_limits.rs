//! Slurm's association limits on running jobs: `GrpJobs`, `MaxJobs`,
//! `GrpTRES=gres/gpu=N` and `MaxWall`, set with sacctmgr on users and
//! accounts. An association is a user in an account: the user's limits hold
//! for the user's jobs in that account, and where the user sets none, the
//! nearest account's `MaxJobs`/`MaxWall` above it do (Slurm's inheritance). An
//! account's `Grp*` limits hold for the jobs of the account and every account
//! under it together. (`GrpSubmitJobs` and `MaxSubmitJobs` are checked at
//! submission, by the state machine.)

use std::collections::BTreeMap;

use corral_state::ClusterState;
use corral_state::account::AssociationLimits;
use corral_state::job::{Job, PendingReason};
use corral_state::slurm::duration::TimeLimit;

/// Running jobs and the GPUs they hold.
#[derive(Debug, Clone, Copy, Default)]
struct Held {
    jobs: u32,
    gpus: u64,
}

/// What running (and already planned) jobs hold, per association and per
/// account subtree.
#[derive(Debug, Clone, Default)]
pub struct AssociationUsage<'s> {
    /// Some user or account has a limit; without one nothing is counted or
    /// checked (a pass pays nothing for limits no one set).
    any_limit: bool,
    by_user_account: BTreeMap<(&'s str, &'s str), Held>,
    by_account_subtree: BTreeMap<&'s str, Held>,
}

impl<'s> AssociationUsage<'s> {
    /// Empty usage for `state`'s users and accounts.
    pub fn new(state: &ClusterState) -> Self {
        AssociationUsage {
            any_limit: state.users().values().any(|u| !u.limits.is_empty())
                || state.accounts().values().any(|a| !a.limits.is_empty()),
            ..AssociationUsage::default()
        }
    }

    /// Counts a job that runs or was just planned to start, holding `gpus`.
    pub fn add(&mut self, state: &'s ClusterState, job: &'s Job, gpus: u64) {
        if !self.any_limit {
            return;
        }
        let held = self
            .by_user_account
            .entry((job.spec.user.as_str(), job.account.as_str()))
            .or_default();
        held.jobs += 1;
        held.gpus += gpus;
        for account in state.account_lineage(job.account.as_str()) {
            let held = self.by_account_subtree.entry(account).or_default();
            held.jobs += 1;
            held.gpus += gpus;
        }
    }

    /// `Ok` when `job` (asking for `gpus`) fits its associations' limits.
    pub fn check(&self, state: &ClusterState, job: &Job, gpus: u64) -> Result<(), PendingReason> {
        if !self.any_limit {
            return Ok(());
        }
        let user_limits = state.users().get(&job.spec.user).map(|u| &u.limits);
        let inherited = |pick: fn(&AssociationLimits) -> Option<u64>| {
            state.inherited_limit(&job.spec.user, &job.account, pick)
        };
        if let Some(max_wall) = inherited(|l| l.max_wall_seconds) {
            let within = matches!(job.time_limit, TimeLimit::Seconds(s) if s <= max_wall);
            if !within {
                return Err(PendingReason::AssocMaxWallDurationPerJobLimit);
            }
        }
        let own = self
            .by_user_account
            .get(&(job.spec.user.as_str(), job.account.as_str()))
            .copied()
            .unwrap_or_default();
        if inherited(|l| l.max_jobs.map(u64::from)).is_some_and(|max| u64::from(own.jobs) >= max) {
            return Err(PendingReason::AssocMaxJobsLimit);
        }
        if let Some(limits) = user_limits {
            if limits.grp_jobs.is_some_and(|max| own.jobs >= max) {
                return Err(PendingReason::AssocGrpJobsLimit);
            }
            if limits
                .grp_gpus
                .is_some_and(|max| own.gpus + gpus > u64::from(max))
            {
                return Err(PendingReason::AssocGrpGpuLimit);
            }
        }
        for name in state.account_lineage(&job.account) {
            let Some(account) = state.accounts().get(name) else {
                continue;
            };
            let held = self
                .by_account_subtree
                .get(name)
                .copied()
                .unwrap_or_default();
            if account.limits.grp_jobs.is_some_and(|max| held.jobs >= max) {
                return Err(PendingReason::AssocGrpJobsLimit);
            }
            if account
                .limits
                .grp_gpus
                .is_some_and(|max| held.gpus + gpus > u64::from(max))
            {
                return Err(PendingReason::AssocGrpGpuLimit);
            }
        }
        Ok(())
    }
}
