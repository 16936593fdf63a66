//! The account tree with fair-share shares, and users with their accounts and role.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::ids::Role;

/// The name of the account at the top of the tree; it always exists.
pub const ROOT_ACCOUNT: &str = "root";

/// An account in the fair-share tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    /// Name, e.g. `nlp`.
    pub name: String,
    /// The parent account; `None` only for the root.
    pub parent: Option<String>,
    /// Shares relative to its siblings (Slurm's `Fairshare=`).
    pub shares: u32,
    /// QOS given to jobs of this account that name none.
    pub default_qos: Option<String>,
    /// Free text, shown by `corral acct`.
    pub description: String,
    /// Limits on the account's jobs (`sacctmgr modify account ... set
    /// GrpTRES=gres/gpu=16`); came with stored format 3.
    #[serde(default)]
    pub limits: AssociationLimits,
}

/// A user and the accounts they may charge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// The login name.
    pub name: String,
    /// The account charged when a job names none; one of `accounts`.
    pub default_account: String,
    /// Accounts the user may charge.
    pub accounts: BTreeSet<String>,
    /// Privilege level.
    pub role: Role,
    /// Limits on the user's jobs in each account (`sacctmgr modify user ...
    /// set MaxJobs=4`); came with stored format 3.
    #[serde(default)]
    pub limits: AssociationLimits,
}

/// Slurm's association limits, each `None` when unset. On an account the
/// `grp_*` limits hold for the jobs of the account and every account under it
/// together; its `max_*` limits are the defaults of its users' associations
/// (a user's own setting wins, then the nearest account's). On a user they
/// hold for the user's jobs in each account the user charges (an association
/// is a user in an account).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssociationLimits {
    /// `GrpJobs`: running jobs.
    pub grp_jobs: Option<u32>,
    /// `GrpSubmitJobs`: pending and running jobs; more are refused at submission.
    pub grp_submit_jobs: Option<u32>,
    /// `GrpTRES=gres/gpu=N`: GPUs held by running jobs.
    pub grp_gpus: Option<u32>,
    /// `MaxJobs`: running jobs of one user in the account.
    pub max_jobs: Option<u32>,
    /// `MaxSubmitJobs`: pending and running jobs of one user in the account.
    pub max_submit_jobs: Option<u32>,
    /// `MaxWall`: the longest time limit a job may have, seconds.
    pub max_wall_seconds: Option<u64>,
}

impl AssociationLimits {
    /// True when no limit is set.
    pub fn is_empty(&self) -> bool {
        *self == AssociationLimits::default()
    }
}
