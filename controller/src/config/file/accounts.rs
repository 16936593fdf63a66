//! Accounts, users and QOS as written in `corral.toml` (`[[accounts]]`,
//! `[[users]]`, `[[qos]]`), as Slurm's `sacctmgr` would create them.

use serde::{Deserialize, Serialize};

use super::partitions::PreemptModeName;

/// An account in the fair-share tree (`[[accounts]]`). The account `root` always
/// exists; list it only to change its shares, description or default QOS.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountSection {
    /// Its name, given with `--account`.
    pub name: String,
    /// Its parent; default `root`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Shares relative to its siblings (Fairshare=); default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shares: Option<u32>,
    /// QOS of its jobs that name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_qos: Option<String>,
    /// Free text shown by `corral acct`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// A user and the accounts they may charge (`[[users]]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserSection {
    /// The login name.
    pub name: String,
    /// Accounts the user may charge; at least one.
    pub accounts: Vec<String>,
    /// Charged when a job names no account; default the first of `accounts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_account: Option<String>,
    /// `user` (default), `operator` or `admin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<RoleName>,
}

/// A privilege level as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoleName {
    /// Submits and acts on its own jobs.
    User,
    /// Also acts on anyone's jobs and drains nodes.
    Operator,
    /// Also changes configuration.
    Admin,
}

/// A quality of service (`[[qos]]`), as `sacctmgr add qos`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QosSection {
    /// Its name, given with `--qos`.
    pub name: String,
    /// Priority factor input (Priority=); default 0.
    #[serde(default)]
    pub priority: u32,
    /// QOS whose jobs this one may preempt (Preempt=).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preempts: Vec<String>,
    /// Overrides the partition's preemption mode for victims in this QOS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempt_mode: Option<PreemptModeName>,
    /// Most GPUs all running jobs of one account may hold (GrpTRES=gres/gpu=N).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grp_gpus_per_account: Option<u32>,
    /// Most GPU-minutes one account may have used, decayed (GrpTRESMins=gres/gpu=N).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grp_gpu_minutes_per_account: Option<u64>,
    /// Longest time limit a job may have (MaxWall), a Slurm time spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wall: Option<String>,
    /// Most GPUs one user's running jobs may hold (MaxTRESPerUser=gres/gpu=N).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_gpus_per_user: Option<u32>,
    /// Most running jobs per user (MaxJobsPerUser).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_jobs_per_user: Option<u32>,
}
