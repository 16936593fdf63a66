//! Why a command was refused. A refused command changes nothing.

use serde::{Deserialize, Serialize};

use crate::ids::{AttemptNumber, JobId};

/// A refused command. Each message says what was wrong and what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum Rejection {
    /// The actor may not do this.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// No such job.
    #[error("unknown job {0}; `corral queue` lists current jobs")]
    UnknownJob(JobId),
    /// No such node.
    #[error("unknown node '{0}'; `corral nodes` lists configured nodes")]
    UnknownNode(String),
    /// No such GPU on the node.
    #[error("node '{node}' has no GPU {gpu}")]
    UnknownGpu {
        /// The node.
        node: String,
        /// The index asked for.
        gpu: u32,
    },
    /// No such partition.
    #[error("unknown partition '{0}'; `corral nodes` lists the partitions")]
    UnknownPartition(String),
    /// No such account.
    #[error("unknown account '{0}'; ask an administrator which accounts you may charge")]
    UnknownAccount(String),
    /// No such user.
    #[error("unknown user '{0}'; an administrator must add the user to an account")]
    UnknownUser(String),
    /// No such QOS.
    #[error("unknown QOS '{0}'; ask an administrator which QOS exist")]
    UnknownQos(String),
    /// No such reservation.
    #[error("unknown reservation '{0}'; check the name with an administrator")]
    UnknownReservation(String),
    /// The job request cannot be satisfied or is malformed.
    #[error("job request refused: {0}")]
    InvalidRequest(String),
    /// The job is not in a state that allows this.
    #[error("job {job} is {state}: {action} needs {needed}")]
    WrongJobState {
        /// The job.
        job: JobId,
        /// Its state (Slurm name).
        state: String,
        /// What was asked.
        action: String,
        /// The states that allow it.
        needed: String,
    },
    /// A report or plan entry names an attempt that is not the job's live one.
    #[error("stale attempt {got} for job {job} (live attempt: {live:?}); the report is ignored")]
    StaleAttempt {
        /// The job.
        job: JobId,
        /// The attempt named.
        got: AttemptNumber,
        /// The live attempt, if any.
        live: Option<AttemptNumber>,
    },
    /// A report comes from a node that is not part of the attempt.
    #[error("node '{node}' is not part of job {job} attempt {attempt}")]
    NotInAllocation {
        /// The job.
        job: JobId,
        /// The attempt.
        attempt: AttemptNumber,
        /// The node.
        node: String,
    },
    /// A bound of the cluster configuration would be exceeded.
    #[error("limit reached: {0}")]
    LimitReached(String),
    /// The configuration change is inconsistent with the current state.
    #[error("configuration refused: {0}")]
    InvalidConfig(String),
}
