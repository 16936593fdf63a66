//! The openraft type configuration: what a log entry carries (a [`Proposal`]: one
//! or more corral commands), what applying it returns, and how replicas are
//! addressed.

use corral_state::{Command, Outcome, Rejection};
use serde::{Deserialize, Serialize};

/// A replica's id in the Raft group.
pub type ReplicaId = u64;

/// One log entry's payload: commands applied in order, atomically with respect to
/// other entries. The controller batches concurrent submissions into one entry;
/// each caller is answered only when that entry has committed.
///
/// The commands are kept encoded (each one's postcard encoding, back to back):
/// the leader's log, the AppendEntries to every follower and each follower's log
/// copy bytes, and every replica decodes a command once, when it applies it.
/// Decoding a submission builds dozens of strings and maps; copying it is a
/// `memcpy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// How many commands `encoded` holds.
    count: u32,
    /// The commands' encodings, concatenated.
    encoded: bytes::Bytes,
}

/// Why a proposal's bytes are not the commands they claim to be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposalError {
    /// A command did not decode.
    #[error("command {position} of {count} does not decode: {reason}")]
    Undecodable {
        /// Its position (from 0).
        position: u32,
        /// Commands the proposal claims.
        count: u32,
        /// postcard's explanation.
        reason: String,
    },
    /// Bytes were left after the last command.
    #[error("{0} bytes follow the last command")]
    Trailing(usize),
    /// A command did not encode.
    #[error("a command does not encode: {0}")]
    Unencodable(String),
    /// More commands than a proposal can count.
    #[error("more than {} commands in one proposal", u32::MAX)]
    TooMany,
}

impl Proposal {
    /// A proposal of `commands`, in order.
    pub fn new(commands: &[Command]) -> Result<Self, ProposalError> {
        let mut batch = EncodedCommands::default();
        for command in commands {
            batch.push(command)?;
        }
        Ok(batch.into_proposal())
    }

    /// How many commands it holds.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when it holds no command.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of the encoded commands.
    pub fn encoded_bytes(&self) -> usize {
        self.encoded.len()
    }

    /// Decodes the commands one by one, in order.
    pub fn commands(&self) -> impl Iterator<Item = Result<Command, ProposalError>> + '_ {
        let mut rest: &[u8] = &self.encoded;
        let count = self.count;
        let mut position = 0;
        std::iter::from_fn(move || {
            if position == count {
                return (!rest.is_empty()).then(|| {
                    let trailing = rest.len();
                    rest = &[];
                    Err(ProposalError::Trailing(trailing))
                });
            }
            match postcard::take_from_bytes::<Command>(rest) {
                Ok((command, remaining)) => {
                    rest = remaining;
                    position += 1;
                    Some(Ok(command))
                }
                Err(e) => {
                    let error = ProposalError::Undecodable {
                        position,
                        count,
                        reason: e.to_string(),
                    };
                    // Nothing after an undecodable command can be found.
                    (position, rest) = (count, &[]);
                    Some(Err(error))
                }
            }
        })
    }
}

/// Commands encoded back to back, gathered into a [`Proposal`].
#[derive(Debug, Default)]
pub struct EncodedCommands {
    count: u32,
    encoded: Vec<u8>,
}

impl EncodedCommands {
    /// Encodes `command` after those already held.
    pub fn push(&mut self, command: &Command) -> Result<(), ProposalError> {
        let count = self.count.checked_add(1).ok_or(ProposalError::TooMany)?;
        let written = self.encoded.len();
        if let Err(e) = postcard::to_io(command, &mut self.encoded) {
            self.encoded.truncate(written);
            return Err(ProposalError::Unencodable(e.to_string()));
        }
        self.count = count;
        Ok(())
    }

    /// Appends another batch's commands after these.
    pub fn extend(&mut self, other: &EncodedCommands) -> Result<(), ProposalError> {
        self.count = self
            .count
            .checked_add(other.count)
            .ok_or(ProposalError::TooMany)?;
        self.encoded.extend_from_slice(&other.encoded);
        Ok(())
    }

    /// Commands held.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when none is held.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded bytes held.
    pub fn bytes(&self) -> usize {
        self.encoded.len()
    }

    /// The proposal of these commands.
    pub fn into_proposal(self) -> Proposal {
        Proposal {
            count: self.count,
            encoded: self.encoded.into(),
        }
    }
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
        SnapshotData = crate::snapshot_data::SnapshotData,
);

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
