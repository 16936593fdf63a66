//! Identifiers shared across the domain.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A job id, assigned by the state machine in submission order starting at 1.
/// Each task of a job array has its own id; the array's id is its first task's.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct JobId(pub u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The number of one run of a job: 1 for the first, incremented on each requeue.
/// Every command and report about a run carries it, so stale ones are rejected.
pub type AttemptNumber = u32;

/// Who asks for a change: the authenticated user name and role, as established by
/// the controller from the client's certificate.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Actor {
    /// The user name.
    pub user: String,
    /// What the user may do.
    pub role: Role,
}

impl Actor {
    /// True when the actor may act on jobs of other users.
    pub fn is_operator(&self) -> bool {
        self.role >= Role::Operator
    }

    /// True when the actor may change configuration.
    pub fn is_admin(&self) -> bool {
        self.role >= Role::Admin
    }
}

/// Privilege levels, as Slurm's AdminLevel: each includes the ones before it.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum Role {
    /// May submit jobs and act on its own.
    #[default]
    User,
    /// May also cancel, hold and requeue anyone's jobs and drain nodes.
    Operator,
    /// May also change configuration, accounts, QOS and reservations.
    Admin,
}
