//! Partitions: named sets of nodes with time limits, a priority tier, account
//! restrictions and a preemption mode.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::slurm::duration::TimeLimit;

/// What happens to a job preempted out of this partition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PreemptMode {
    /// Jobs here are never preempted.
    #[default]
    Off,
    /// The victim is signalled, given its grace period, killed and requeued.
    Requeue,
    /// The victim is signalled, given its grace period, and cancelled.
    Cancel,
}

/// A partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    /// Name, e.g. `gpu`.
    pub name: String,
    /// The nodes as the administrator wrote them (a hostlist expression).
    pub hostlist: String,
    /// The nodes, expanded.
    pub nodes: BTreeSet<String>,
    /// The longest time limit a job here may have.
    pub max_time: TimeLimit,
    /// The limit given to jobs that ask for none; `max_time` when unset.
    pub default_time: Option<TimeLimit>,
    /// Jobs in higher tiers are considered first and may preempt lower tiers.
    pub priority_tier: u32,
    /// Accounts allowed to submit here; `None` allows all.
    pub allowed_accounts: Option<BTreeSet<String>>,
    /// What happens to jobs preempted out of this partition.
    pub preempt_mode: PreemptMode,
    /// Jobs that name no partition go to the default one.
    pub is_default: bool,
    /// When false, jobs may be submitted but none start (Slurm's `State=DOWN`).
    pub up: bool,
}

impl Partition {
    /// The time limit for a job that asked for `requested`.
    pub fn effective_time_limit(&self, requested: Option<TimeLimit>) -> TimeLimit {
        requested.or(self.default_time).unwrap_or(self.max_time)
    }

    /// True when `account` may submit here.
    pub fn allows_account(&self, account: &str) -> bool {
        self.allowed_accounts
            .as_ref()
            .is_none_or(|allowed| allowed.contains(account))
    }
}
