//! Starting a new cluster from a backup (`corrald restore`): the empty
//! directory of each of the new cluster's replicas is given the backup's
//! state as its durable snapshot, at the backup's index, with the new
//! cluster's voters as its membership. Started, the replicas hold the same
//! state and the same membership and elect a leader among themselves; none
//! needs `corrald init` (which would be refused: the replica is no longer
//! new). Every replica is seeded alike, so any majority of them can lead.
//!
//! A directory that already holds anything is refused: restoring over a
//! replica would throw its log away.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use openraft::{CommittedLeaderId, Membership};

use crate::snapshot_file::{SnapshotDir, SnapshotFileError};
use crate::types::{LogId, ReplicaAddr, ReplicaId, StoredMembership};

/// Why a replica directory could not be seeded.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The directory holds a replica (or anything else) already.
    #[error(
        "{0} is not empty: a backup is restored only into the directory of a replica that never ran (move this one aside, or give another data_dir)"
    )]
    NotEmpty(PathBuf),
    /// The directory could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The new cluster names no voters.
    #[error("the configuration names no replicas to restore the cluster onto")]
    NoVoters,
    /// The snapshot could not be written.
    #[error(transparent)]
    Snapshot(#[from] SnapshotFileError),
}

/// The position every replica of the restored cluster starts at: the
/// backup's index (at least 1), in term 0, as if the lowest-numbered voter
/// had written it (openraft's own first membership entry is term 0 too).
fn position(voters: &BTreeMap<ReplicaId, ReplicaAddr>, index: u64) -> Option<LogId> {
    let first = *voters.keys().next()?;
    Some(LogId::new(CommittedLeaderId::new(0, first), index.max(1)))
}

/// Seeds the empty replica directory `data_dir` of a new cluster whose
/// voters are `voters` with `state_snapshot` (the state in
/// `corral_state::snapshot`'s encoding, checked by the caller), at `index`.
pub fn seed(
    data_dir: &Path,
    voters: &BTreeMap<ReplicaId, ReplicaAddr>,
    index: u64,
    state_snapshot: &[u8],
) -> Result<(), RestoreError> {
    match std::fs::read_dir(data_dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(RestoreError::NotEmpty(data_dir.to_path_buf()));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(RestoreError::Io {
                path: data_dir.to_path_buf(),
                source,
            });
        }
    }
    std::fs::create_dir_all(data_dir).map_err(|source| RestoreError::Io {
        path: data_dir.to_path_buf(),
        source,
    })?;
    let at = position(voters, index).ok_or(RestoreError::NoVoters)?;
    let ids: BTreeSet<ReplicaId> = voters.keys().copied().collect();
    let membership = StoredMembership::new(Some(at), Membership::new(vec![ids], voters.clone()));
    let meta = crate::state_machine::meta_at(Some(at), membership);
    let snapshots = SnapshotDir::open(data_dir)?;
    let partial = snapshots.write_partial(&meta, state_snapshot)?;
    snapshots.make_current(&partial)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voters() -> BTreeMap<ReplicaId, ReplicaAddr> {
        (1..=3)
            .map(|id| {
                (
                    id,
                    ReplicaAddr {
                        peer: format!("10.0.0.{id}:7000"),
                        api: format!("10.0.0.{id}:7100"),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn a_seeded_directory_holds_the_state_at_the_index_with_the_new_voters() {
        let dir = tempfile::tempdir().expect("dir");
        let data = dir.path().join("controller-2");
        let state = corral_state::snapshot::encode(&corral_state::ClusterState::default())
            .expect("encodes");
        seed(&data, &voters(), 812, &state).expect("seeded");
        let loaded = SnapshotDir::open(&data)
            .expect("opens")
            .load()
            .expect("reads")
            .expect("a snapshot");
        assert_eq!(loaded.state(), &state[..]);
        let at = loaded.meta.last_log_id.expect("a position");
        assert_eq!((at.leader_id.term, at.index), (0, 812));
        let members: Vec<ReplicaId> = loaded
            .meta
            .last_membership
            .membership()
            .voter_ids()
            .collect();
        assert_eq!(members, vec![1, 2, 3]);
    }

    #[test]
    fn a_directory_that_holds_anything_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("raft-log"), b"x").expect("write");
        let state = corral_state::snapshot::encode(&corral_state::ClusterState::default())
            .expect("encodes");
        let refused = seed(dir.path(), &voters(), 5, &state).unwrap_err();
        assert!(matches!(refused, RestoreError::NotEmpty(_)), "{refused}");
        assert!(
            seed(&dir.path().join("new"), &BTreeMap::new(), 5, &state).is_err(),
            "no voters"
        );
    }
}
