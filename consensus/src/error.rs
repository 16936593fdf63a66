//! What can go wrong when proposing, reading or changing membership.

use serde::{Deserialize, Serialize};

use crate::types::{ReplicaAddr, ReplicaId};

/// A proposal that was not committed (or whose fate is unknown).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ProposeError {
    /// This replica is not the leader; send the proposal to the one named, or
    /// retry shortly when no leader is known (an election is running).
    #[error("not the leader; the leader is {}", leader.as_ref().map_or("unknown (election in progress): retry shortly".to_string(), |(id, addr)| format!("replica {id} at {}", addr.peer)))]
    NotLeader {
        /// The leader, when known.
        leader: Option<(ReplicaId, ReplicaAddr)>,
    },
    /// No answer in time: the proposal may or may not have committed. Check the
    /// state before retrying anything that is not idempotent.
    #[error("no answer within {0} ms: the proposal may or may not have been committed")]
    Timeout(u64),
    /// The replica stopped or its storage failed before the proposal was taken:
    /// nothing was proposed, so trying again (elsewhere) is safe.
    #[error("replica unavailable: {0}")]
    Unavailable(String),
    /// The proposal was handed on (to Raft, or forwarded to the leader) and its
    /// answer was lost: it may or may not have committed. Check the state before
    /// retrying anything that is not idempotent.
    #[error("the answer was lost ({0}): the proposal may or may not have been committed")]
    Lost(String),
    /// The commands of one proposal share one log entry; this one is too big to
    /// replicate within a heartbeat. Propose fewer commands at a time.
    #[error(
        "the proposal takes {bytes} bytes; one proposal may take at most {max}: propose fewer commands at a time"
    )]
    TooLarge {
        /// Its encoded size.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// A command could not be encoded for the log (a bug, not an operating
    /// error): nothing was proposed, and proposing it again fails the same way.
    #[error("the commands cannot be encoded for the log: {0}")]
    Unencodable(String),
}

/// A linearizable read that could not be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// Only the leader serves linearizable reads.
    #[error("not the leader; the leader is {leader:?}")]
    NotLeader {
        /// The leader, when known.
        leader: Option<(ReplicaId, ReplicaAddr)>,
    },
    /// The replica stopped or its storage failed.
    #[error("replica unavailable: {0}")]
    Unavailable(String),
}

/// What to do about a database that would not open.
fn storage_hint(error: &sled::Error) -> &'static str {
    match error {
        sled::Error::Unsupported(_) => {
            "it was written by an incompatible build of corral: start the build that wrote \
             it, and do not delete it (it holds this replica's vote and log)"
        }
        _ => "is another corrald using it?",
    }
}

/// A replica that could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The data directory's database could not be opened.
    #[error("cannot open the replica database in {path}: {source}; {}", storage_hint(.source))]
    Storage {
        /// The directory.
        path: String,
        /// Why.
        source: sled::Error,
    },
    /// The Raft log's files could not be opened or read back.
    #[error("cannot open the Raft log in {path}: {reason}")]
    Log {
        /// The data directory.
        path: String,
        /// Why.
        reason: String,
    },
    /// Raft refused the configuration or failed to start.
    #[error("raft did not start: {0}")]
    Raft(String),
    /// The peer address could not be bound or TLS is unusable.
    #[error("peer service: {0}")]
    Peer(String),
}

/// A membership change that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MembershipError {
    /// Only the leader changes membership.
    #[error("not the leader; the leader is {leader:?}")]
    NotLeader {
        /// The leader, when known.
        leader: Option<(ReplicaId, ReplicaAddr)>,
    },
    /// The previous change is not committed yet (the leader commits it
    /// within a heartbeat or two unless it lost its quorum): try again.
    #[error("the previous membership change is not committed yet: {0}")]
    InProgress(String),
    /// Raft refused the change (e.g. a voter that is not yet a learner).
    #[error("membership change refused: {0}")]
    Refused(String),
}
