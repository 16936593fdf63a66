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
}
