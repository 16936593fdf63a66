//! Disaster recovery (`corrald salvage`): when a majority of the
//! controllers is lost for good, no leader can ever be elected again, and
//! the cluster's state survives only in the directories of the replicas
//! left. This reads one such replica's directory (its process stopped) the
//! way the replica itself would start: its snapshot, then every entry of
//! its log after it, applied in order. Every entry, committed or not: an
//! entry this replica holds but never saw committed may have been
//! committed (and acknowledged) by the lost majority, and keeping it loses
//! nothing a client was told happened. What the lost replicas committed
//! after this one's last entry is gone; [`Salvaged`] says how much of what
//! it holds was never confirmed, so the operator is told.
//!
//! The result is a state in `corral_state::snapshot`'s encoding, for a
//! backup file a new cluster is restored from (see [`crate::restore`]).

use std::path::Path;

use openraft::RaftLogReader;
use openraft::storage::{RaftLogStorage, RaftStateMachine};

use crate::storage::Storage;
use crate::types::LogId;

/// What a replica's directory held.
#[derive(Debug, Clone)]
pub struct Salvaged {
    /// The state after every entry it holds, in `corral_state::snapshot`'s encoding.
    pub snapshot: Vec<u8>,
    /// The last entry applied (its log's last entry).
    pub last: Option<LogId>,
    /// The last commit it recorded (a record not synced at once: it may
    /// have known of later ones).
    pub committed: Option<LogId>,
    /// Where its snapshot was (entries up to it were not in its log).
    pub snapshot_at: Option<LogId>,
    /// The newest term it voted in (its last entry's term is in `last`).
    pub term: u64,
    /// Entries applied from its log after the snapshot.
    pub replayed: u64,
}

impl Salvaged {
    /// Entries it holds after its last recorded commit.
    pub fn unconfirmed(&self) -> u64 {
        let last = self.last.map_or(0, |l| l.index);
        let committed = self.committed.map_or(0, |c| c.index);
        last.saturating_sub(committed)
    }
}

/// Why a directory could not be salvaged.
#[derive(Debug, thiserror::Error)]
pub enum SalvageError {
    /// There is no replica in the directory.
    #[error(
        "{0} holds no replica (no Raft log, no snapshot): give the data_dir of a controller that ran"
    )]
    Empty(String),
    /// The storage could not be opened (a running replica holds it, say:
    /// the message asks whether another corrald uses it).
    #[error(transparent)]
    Open(#[from] crate::error::StartError),
    /// The log or the state machine failed.
    #[error("cannot read the replica's log: {0}")]
    Storage(String),
}

/// Reads the stopped replica in `data_dir` and applies its whole log.
pub async fn salvage(data_dir: &Path) -> Result<Salvaged, SalvageError> {
    // A replica's directory holds sled's database file (`db`): anything
    // else (a directory one level off, say) is not opened, which would
    // create a database in it.
    let database = data_dir.join("db");
    match std::fs::metadata(&database) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SalvageError::Empty(data_dir.display().to_string()));
        }
        Err(e) => {
            return Err(SalvageError::Storage(format!(
                "cannot read {}: {e}",
                database.display()
            )));
        }
    }
    let storage = Storage::open(data_dir)?;
    let failed =
        |e: openraft::StorageError<crate::types::ReplicaId>| SalvageError::Storage(e.to_string());
    let Storage {
        mut log, mut state, ..
    } = storage;
    let (snapshot_at, _) = state.applied_state().await.map_err(failed)?;
    let log_state = log.get_log_state().await.map_err(failed)?;
    let committed = log.read_committed().await.map_err(failed)?;
    let term = log
        .read_vote()
        .await
        .map_err(failed)?
        .map_or(0, |v| v.leader_id().term);
    if snapshot_at.is_none() && log_state.last_log_id.is_none() {
        return Err(SalvageError::Empty(data_dir.display().to_string()));
    }
    let mut replayed = 0;
    if let Some(last) = log_state.last_log_id
        && snapshot_at.is_none_or(|s| s.index < last.index)
    {
        let from = snapshot_at.map_or(0, |s| s.index + 1);
        let entries = log
            .try_get_log_entries(from..=last.index)
            .await
            .map_err(failed)?;
        replayed = entries.len() as u64;
        state.apply(entries).await.map_err(failed)?;
    }
    let (snapshot, last) = state.encode_applied().await.map_err(failed)?;
    Ok(Salvaged {
        snapshot,
        last,
        committed,
        snapshot_at,
        term,
        replayed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_directory_that_holds_no_replica_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("notes.txt"), b"not a replica").expect("write");
        let refused = salvage(dir.path()).await.unwrap_err();
        assert!(matches!(refused, SalvageError::Empty(_)), "{refused}");
        let entries: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(entries, vec![std::ffi::OsString::from("notes.txt")]);
    }
}
