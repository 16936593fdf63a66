//! The versioned snapshot encoding: a magic tag, a format version, the body length,
//! the postcard-encoded state and a SHA-256 of the body. Decoding checks all of
//! them, so a truncated or corrupted snapshot is refused, never half-loaded.
//!
//! Format 2 added fields to jobs' requests, and format 3 more. Format 4 (this
//! build) changed no shape, only rules: a batch script that ends while its
//! preemption notice runs ends the attempt as preempted, not as its own exit;
//! and a script that failed while a node of its allocation had not confirmed
//! its processes gone ends as that node's failure once the node is lost.
//! The number is what the leader's [`crate::command::Command::StoredFormat`]
//! entry names, so that a format-3 replica stops there instead of applying
//! those entries by the old rule; a format-3 snapshot is read as it is. A
//! format-1 snapshot is read through the frozen shapes of [`crate::format_v1`],
//! a format-2 one through those of [`crate::format_v2`]. Format 5 added the
//! nodes' liveness settings to the state (`Command::SetLiveness`); formats 3
//! and 4 are read through [`crate::format_v4`].

use sha2::{Digest, Sha256};

use crate::format_v1::ClusterStateV1;
use crate::format_v2::ClusterStateV2;
use crate::format_v4::ClusterStateV4;
use crate::state::ClusterState;

/// First bytes of every snapshot.
pub const MAGIC: &[u8; 8] = b"CORRALSS";
/// The format this build writes. Formats 1 to 4 are read and migrated
/// (format 3 has format 4's shapes).
pub const FORMAT_VERSION: u32 = 5;
const HEADER_LEN: usize = 8 + 4 + 8;
const CHECKSUM_LEN: usize = 32;

/// Why a snapshot could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// Not a corral snapshot.
    #[error("not a corral snapshot (bad magic); was the file written by another program?")]
    BadMagic,
    /// Written by a newer corral.
    #[error(
        "snapshot format {found} is newer than this build understands ({FORMAT_VERSION}); upgrade corral"
    )]
    UnsupportedVersion {
        /// The version found.
        found: u32,
    },
    /// Shorter or longer than its header says.
    #[error(
        "snapshot is truncated or has trailing bytes: header says {expected} body bytes, found {found}"
    )]
    BadLength {
        /// Body bytes the header promises.
        expected: u64,
        /// Bytes present.
        found: u64,
    },
    /// Checksum mismatch.
    #[error(
        "snapshot checksum mismatch: the data is corrupted; install a snapshot from another replica"
    )]
    BadChecksum,
    /// The body does not decode.
    #[error("snapshot body does not decode: {0}")]
    Decode(String),
    /// The state could not be encoded.
    #[error("state does not encode: {0}")]
    Encode(String),
}

/// Encodes `state` as a snapshot.
pub fn encode(state: &ClusterState) -> Result<Vec<u8>, SnapshotError> {
    encode_unsealed(state).map(Unsealed::seal)
}

/// A snapshot whose body is encoded but not yet checksummed. Encoding needs the
/// state, so whoever changes the state waits for it; sealing does not.
#[derive(Debug)]
pub struct Unsealed(Vec<u8>);

impl Unsealed {
    /// Adds the body's length and checksum: the snapshot [`encode`] returns.
    pub fn seal(self) -> Vec<u8> {
        let mut out = self.0;
        let body_len = (out.len() - HEADER_LEN) as u64;
        out[12..HEADER_LEN].copy_from_slice(&body_len.to_le_bytes());
        let checksum = Sha256::digest(&out[HEADER_LEN..]);
        out.extend_from_slice(&checksum);
        out
    }
}

/// The first half of [`encode`]: the header and the body, unchecked.
pub fn encode_unsealed(state: &ClusterState) -> Result<Unsealed, SnapshotError> {
    // The body is encoded in place after the header (a large state's body is
    // hundreds of MB: copying it once more costs as much as encoding it).
    let mut out = Vec::with_capacity(HEADER_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    postcard::to_extend(state, out)
        .map(Unsealed)
        .map_err(|e| SnapshotError::Encode(e.to_string()))
}

/// Decodes a snapshot written by [`encode`].
pub fn decode(bytes: &[u8]) -> Result<ClusterState, SnapshotError> {
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
        return Err(SnapshotError::BadMagic);
    }
    let version = u32::from_le_bytes(
        bytes[8..12]
            .try_into()
            .map_err(|_| SnapshotError::BadMagic)?,
    );
    if version > FORMAT_VERSION || version == 0 {
        return Err(SnapshotError::UnsupportedVersion { found: version });
    }
    let expected = u64::from_le_bytes(
        bytes[12..20]
            .try_into()
            .map_err(|_| SnapshotError::BadMagic)?,
    );
    let rest = &bytes[HEADER_LEN..];
    let found = rest.len().saturating_sub(CHECKSUM_LEN) as u64;
    if rest.len() < CHECKSUM_LEN || found != expected {
        return Err(SnapshotError::BadLength { expected, found });
    }
    let (body, checksum) = rest.split_at(rest.len() - CHECKSUM_LEN);
    if Sha256::digest(body).as_slice() != checksum {
        return Err(SnapshotError::BadChecksum);
    }
    let undecodable = |e: postcard::Error| SnapshotError::Decode(e.to_string());
    if version == 1 {
        return postcard::from_bytes::<ClusterStateV1>(body)
            .map(ClusterState::from)
            .map_err(undecodable);
    }
    if version == 2 {
        return postcard::from_bytes::<ClusterStateV2>(body)
            .map(ClusterState::from)
            .map_err(undecodable);
    }
    if version <= 4 {
        // Formats 3 and 4 share their shapes.
        return postcard::from_bytes::<ClusterStateV4>(body)
            .map(ClusterState::from)
            .map_err(undecodable);
    }
    postcard::from_bytes(body).map_err(undecodable)
}
