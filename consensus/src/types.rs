//! The openraft type configuration: what a log entry carries (a [`Proposal`]: one
//! or more corral commands), what applying it returns, and how replicas are
//! addressed.

use std::io::Cursor;

use corral_state::{Command, Outcome, Rejection};
use serde::{Deserialize, Serialize};

/// A replica's id in the Raft group.
pub type ReplicaId = u64;

/// One log entry's payload: commands applied in order, atomically with respect to
/// other entries. The controller batches concurrent submissions into one entry;
/// each caller is answered only when that entry has committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// The commands, applied in order.
    pub commands: Vec<Command>,
}

/// What applying one entry returned: one result per command (empty for blank and
/// membership entries).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// One result per command of the proposal.
    pub results: Vec<Result<Outcome, Rejection>>,
}

/// How to reach a replica: its peer (Raft) address and its client API address,
/// so a follower can tell a client where the leader is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaAddr {
    /// `host:port` of the peer gRPC service.
    pub peer: String,
    /// `host:port` of the client API (empty until the controller has one).
    pub api: String,
}

openraft::declare_raft_types!(
    /// corral's Raft types.
    pub TypeConfig:
        D = Proposal,
        R = Applied,
        NodeId = ReplicaId,
        Node = ReplicaAddr,
);

/// Snapshot bytes in transit.
pub type SnapshotBytes = Cursor<Vec<u8>>;
/// A log entry.
pub type Entry = openraft::Entry<TypeConfig>;
/// A log id.
pub type LogId = openraft::LogId<ReplicaId>;
/// A vote.
pub type Vote = openraft::Vote<ReplicaId>;
/// Membership as stored.
pub type StoredMembership = openraft::StoredMembership<ReplicaId, ReplicaAddr>;
/// A storage error.
pub type StorageError = openraft::StorageError<ReplicaId>;
/// The Raft handle.
pub type Raft = openraft::Raft<TypeConfig>;
