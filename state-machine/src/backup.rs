//! The backup file (`corral admin snapshot save FILE`): one consistent copy
//! of the cluster state, with what it is a copy of, checksummed as a whole.
//! A new cluster starts from it (`corrald restore`).
//!
//! Layout, version 1: magic `CORRALBK`, the version (u32), the metadata's
//! length (u32), the metadata (JSON, so an operator can read it with
//! `head -c`), the state in [`crate::snapshot`]'s encoding (which carries
//! its own format, length and SHA-256), then a SHA-256 of every byte before
//! it. Integers little-endian. Pure: bytes in, bytes out.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::snapshot::{self, SnapshotError};
use crate::state::ClusterState;

const MAGIC: &[u8; 8] = b"CORRALBK";
const VERSION: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 4;
const CHECKSUM_LEN: usize = 32;
/// Most bytes the metadata may take.
const MAX_META_BYTES: usize = 64 * 1024;

/// What a backup is a copy of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupMeta {
    /// The cluster's name (`SLURM_CLUSTER_NAME`).
    pub cluster_name: String,
    /// The Raft log index of the last entry the copied state had applied.
    pub index: u64,
    /// The leader's term when it was taken.
    pub term: u64,
    /// When it was taken, ms since the Unix epoch (the leader's clock).
    pub taken_at_ms: u64,
    /// The build (corral's version) of the leader that took it.
    pub build: String,
    /// The state's snapshot format ([`snapshot::FORMAT_VERSION`] of that build).
    pub format: u32,
}

/// Why a backup file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackupError {
    /// Not a corral backup.
    #[error(
        "not a corral backup (it does not begin with CORRALBK); give a file `corral admin snapshot save` wrote"
    )]
    BadMagic,
    /// Written by a newer corral.
    #[error(
        "backup file version {0} is newer than this build reads ({VERSION}); use a newer corral"
    )]
    UnsupportedVersion(u32),
    /// Cut short, or the checksum does not match.
    #[error(
        "the backup is damaged ({0}): it was truncated or altered after it was written; use another copy"
    )]
    Damaged(&'static str),
    /// The metadata does not parse.
    #[error("the backup's metadata does not parse: {0}")]
    Meta(String),
    /// The state inside does not decode.
    #[error("the backup's state cannot be read: {0}")]
    State(#[from] SnapshotError),
}

/// A backup file of `state_snapshot` (the state in [`snapshot`]'s encoding).
pub fn encode(meta: &BackupMeta, state_snapshot: &[u8]) -> Result<Vec<u8>, BackupError> {
    let meta_bytes = serde_json::to_vec(meta).map_err(|e| BackupError::Meta(e.to_string()))?;
    let meta_len = u32::try_from(meta_bytes.len())
        .ok()
        .filter(|n| (*n as usize) <= MAX_META_BYTES)
        .ok_or(BackupError::Meta("the metadata is too large".to_string()))?;
    let mut out = Vec::with_capacity(HEADER_LEN + meta_bytes.len() + state_snapshot.len() + 32);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&meta_len.to_le_bytes());
    out.extend_from_slice(&meta_bytes);
    out.extend_from_slice(state_snapshot);
    let checksum = Sha256::digest(&out);
    out.extend_from_slice(&checksum);
    Ok(out)
}

/// A backup file read back: its metadata and its state's snapshot bytes.
#[derive(Debug)]
pub struct Backup<'a> {
    /// What it is a copy of.
    pub meta: BackupMeta,
    /// The state, in [`snapshot`]'s encoding (checked by [`decode`]).
    pub state_snapshot: &'a [u8],
}

impl Backup<'_> {
    /// The state itself.
    pub fn state(&self) -> Result<ClusterState, BackupError> {
        Ok(snapshot::decode(self.state_snapshot)?)
    }
}

/// Reads a backup file, checking its checksum and its state's.
pub fn decode(bytes: &[u8]) -> Result<Backup<'_>, BackupError> {
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
        return Err(BackupError::BadMagic);
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().map_err(|_| BackupError::BadMagic)?);
    if version != VERSION {
        return Err(BackupError::UnsupportedVersion(version));
    }
    if bytes.len() < HEADER_LEN + CHECKSUM_LEN {
        return Err(BackupError::Damaged("shorter than its header"));
    }
    let (covered, checksum) = bytes.split_at(bytes.len() - CHECKSUM_LEN);
    if Sha256::digest(covered).as_slice() != checksum {
        return Err(BackupError::Damaged("checksum mismatch"));
    }
    let meta_len = u32::from_le_bytes(
        bytes[12..16]
            .try_into()
            .map_err(|_| BackupError::BadMagic)?,
    ) as usize;
    if meta_len > MAX_META_BYTES || HEADER_LEN + meta_len > covered.len() {
        return Err(BackupError::Damaged("the metadata runs past the end"));
    }
    let meta: BackupMeta = serde_json::from_slice(&covered[HEADER_LEN..HEADER_LEN + meta_len])
        .map_err(|e| BackupError::Meta(e.to_string()))?;
    let state_snapshot = &covered[HEADER_LEN + meta_len..];
    // Every check the state's own encoding makes, before anyone relies on it.
    snapshot::decode(state_snapshot)?;
    Ok(Backup {
        meta,
        state_snapshot,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit;

    fn meta() -> BackupMeta {
        BackupMeta {
            cluster_name: "corral".to_string(),
            index: 812,
            term: 4,
            taken_at_ms: 1_796_000_000_000,
            build: "0.1.0".to_string(),
            format: snapshot::FORMAT_VERSION,
        }
    }

    fn backup() -> (ClusterState, Vec<u8>) {
        let mut state = testkit::cluster(2, 8);
        testkit::submit(&mut state, testkit::spec("alice", 1, 2), testkit::at(1));
        let bytes = encode(&meta(), &snapshot::encode(&state).expect("encodes")).expect("encodes");
        (state, bytes)
    }

    #[test]
    fn a_backup_reads_back_as_the_state_and_what_it_is_a_copy_of() {
        let (state, bytes) = backup();
        let read = decode(&bytes).expect("reads");
        assert_eq!(read.meta, meta());
        assert_eq!(read.state().expect("decodes"), state);
    }

    #[test]
    fn any_byte_changed_or_cut_is_refused() {
        let (_, bytes) = backup();
        for at in [0, 9, 14, 20, bytes.len() / 2, bytes.len() - 1] {
            let mut altered = bytes.clone();
            altered[at] ^= 0x40;
            assert!(
                decode(&altered).is_err(),
                "a change at byte {at} went unseen"
            );
        }
        for len in [0, 10, HEADER_LEN + 3, bytes.len() - 1] {
            assert!(decode(&bytes[..len]).is_err(), "cut to {len} bytes");
        }
        assert_eq!(
            decode(b"CORRALSS whatever").unwrap_err(),
            BackupError::BadMagic
        );
    }
}
