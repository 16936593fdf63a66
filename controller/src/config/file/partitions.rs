//! Partitions as written in `corral.toml` (`[[partitions]]`).

use serde::{Deserialize, Serialize};

/// A partition, as Slurm's `PartitionName=` lines.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionSection {
    /// Its name, given with `--partition`.
    pub name: String,
    /// Its nodes, as a hostlist; each must be defined under `[[nodes]]`.
    pub nodes: String,
    /// Longest time limit a job here may have (MaxTime); default `UNLIMITED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_time: Option<String>,
    /// Limit of jobs that ask for none (DefaultTime); default `max_time`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_time: Option<String>,
    /// Higher tiers are scheduled first and may preempt lower ones (PriorityTier);
    /// default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_tier: Option<u32>,
    /// Jobs that name no partition come here (Default=YES). When no partition
    /// says so, the first one listed is the default.
    #[serde(default, skip_serializing_if = "is_false")]
    pub default: bool,
    /// Accounts allowed to submit here (AllowAccounts); default all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_accounts: Option<Vec<String>>,
    /// What happens to jobs preempted out of this partition; default `off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempt_mode: Option<PreemptModeName>,
    /// `up`, or `down` to accept jobs but start none; default `up`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<PartitionStateName>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A preemption mode as written: `off`, `requeue` or `cancel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PreemptModeName {
    /// Never preempted.
    Off,
    /// Signalled, given its grace, killed and requeued.
    Requeue,
    /// Signalled, given its grace, and cancelled.
    Cancel,
}

/// A partition state as written: `up` or `down`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PartitionStateName {
    /// Jobs start.
    Up,
    /// Jobs are accepted but none start.
    Down,
}
