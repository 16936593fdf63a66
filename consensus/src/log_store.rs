//! openraft's log storage: the entries in the write-ahead log ([`Wal`]), and
//! the vote, committed index and last purged id in sled tree `raft-meta`.
//!
//! Appends write the entries, then hand openraft's callback to the [`Flusher`],
//! which fires it after the fsync that makes them durable. The log stays
//! contiguous: an append must continue the log exactly, and truncate and purge
//! remove whole suffixes and prefixes. The purge point is made durable before
//! entries are removed, so a crash never leaves a hole at the start.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader, StorageIOError};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::flusher::Flusher;
use crate::types::{Entry, LogId, StorageError, TypeConfig, Vote};
use crate::wal::{Wal, WalError};

const VOTE: &[u8] = b"vote";
const COMMITTED: &[u8] = b"committed";
const LAST_PURGED: &[u8] = b"last-purged";

/// The sled-backed log. Cheap to clone; clones share the trees and the flusher.
#[derive(Clone)]
pub struct LogStore {
    wal: Arc<Wal>,
    meta: sled::Tree,
    flusher: Arc<Flusher>,
    /// The log index the durable snapshot covers; purges wait for it.
    durable_snapshot: Option<watch::Receiver<Option<u64>>>,
}

/// How long a purge waits for the snapshot that covers it to become durable.
const PURGE_WAITS_FOR_SNAPSHOT: std::time::Duration = std::time::Duration::from_secs(600);

fn encode<T: Serialize>(value: &T, subject: ErrorSubject<u64>) -> Result<Vec<u8>, StorageError> {
    postcard::to_stdvec(value)
        .map_err(|e| StorageIOError::new(subject, ErrorVerb::Write, &e).into())
}

fn decode<T: DeserializeOwned>(
    bytes: &[u8],
    subject: ErrorSubject<u64>,
) -> Result<T, StorageError> {
    postcard::from_bytes(bytes)
        .map_err(|e| StorageIOError::new(subject, ErrorVerb::Read, &e).into())
}

fn wal_error(error: WalError) -> StorageError {
    StorageIOError::write_logs(&error).into()
}

fn defensive(message: String) -> StorageError {
    StorageIOError::write_logs(&std::io::Error::other(message)).into()
}

/// The purge point recorded in `db` (the write-ahead log opens from it).
pub fn last_purged(db: &sled::Db) -> Result<Option<LogId>, StorageError> {
    let meta = db
        .open_tree(META_TREE)
        .map_err(|e| StorageIOError::read_logs(&e))?;
    purge_point(&meta)
}

fn purge_point(meta: &sled::Tree) -> Result<Option<LogId>, StorageError> {
    match meta.get(LAST_PURGED) {
        Ok(Some(bytes)) => decode(&bytes, ErrorSubject::Logs).map(Some),
        Ok(None) => Ok(None),
        Err(e) => Err(StorageIOError::read_logs(&e).into()),
    }
}

/// The sled tree of the vote, committed index and purge point.
const META_TREE: &str = "raft-meta";

impl LogStore {
    /// The log of `db`'s metadata and `wal`'s entries.
    pub fn open(db: &sled::Db, wal: Arc<Wal>, flusher: Arc<Flusher>) -> Result<Self, sled::Error> {
        Ok(LogStore {
            wal,
            meta: db.open_tree(META_TREE)?,
            flusher,
            durable_snapshot: None,
        })
    }

    /// Purges wait until the snapshot covering them is durable (openraft may
    /// purge while a received snapshot is still being saved; a crash in between
    /// would otherwise leave a hole between the snapshot and the log).
    pub fn purging_after(mut self, durable_snapshot: watch::Receiver<Option<u64>>) -> Self {
        self.durable_snapshot = Some(durable_snapshot);
        self
    }

    /// The end of the log: the last entry, or the purge point if that is later
    /// (entries left behind by a crash in the middle of a purge).
    /// The last entry's id (the purge point when the log is empty).
    pub fn last_log_id(&self) -> Result<Option<LogId>, StorageError> {
        Ok(self.last_entry_id()?.max(self.last_purged()?))
    }

    fn read_meta<T: DeserializeOwned>(
        &self,
        name: &[u8],
        subject: ErrorSubject<u64>,
    ) -> Result<Option<T>, StorageError> {
        match self.meta.get(name) {
            Ok(Some(bytes)) => decode(&bytes, subject).map(Some),
            Ok(None) => Ok(None),
            Err(e) => Err(StorageIOError::new(subject, ErrorVerb::Read, &e).into()),
        }
    }

    fn write_meta<T: Serialize>(
        &self,
        name: &[u8],
        value: &T,
        subject: ErrorSubject<u64>,
    ) -> Result<(), StorageError> {
        let bytes = encode(value, subject.clone())?;
        self.meta
            .insert(name, bytes)
            .map_err(|e| StorageIOError::new(subject, ErrorVerb::Write, &e))?;
        Ok(())
    }

    async fn flush(&self) -> Result<(), StorageError> {
        self.flusher
            .flush()
            .await
            .map_err(|e| defensive(format!("fsync failed: {e}")))
    }

    fn last_entry_id(&self) -> Result<Option<LogId>, StorageError> {
        Ok(self.wal.span().map_err(wal_error)?.map(|(_, last)| last))
    }

    fn last_purged(&self) -> Result<Option<LogId>, StorageError> {
        purge_point(&self.meta)
    }

    /// Checks the log: every entry reads back and decodes under its own index,
    /// and the indices run without a hole from the purge point to the last
    /// entry. Returns the first and last index held.
    pub fn verify(&self) -> Result<Option<(u64, u64)>, String> {
        let purged = self
            .last_purged()
            .map_err(|e| e.to_string())?
            .map(|id| id.index);
        let Some((first, last)) = self.wal.span().map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        if purged.is_some_and(|p| first.index != p + 1) {
            return Err(format!(
                "hole after the purge point {}: the log starts at {}",
                purged.unwrap_or(0),
                first.index
            ));
        }
        let entries = self
            .wal
            .read(first.index, last.index + 1)
            .map_err(|e| format!("unreadable log entry: {e}"))?;
        for (expected, entry) in (first.index..).zip(&entries) {
            if entry.log_id.index != expected {
                return Err(format!(
                    "hole in the log: entry {} where {expected} belongs",
                    entry.log_id.index
                ));
            }
        }
        if entries.len() as u64 != last.index - first.index + 1 {
            return Err(format!(
                "{} entries read back from {} to {}",
                entries.len(),
                first.index,
                last.index
            ));
        }
        Ok(Some((first.index, last.index)))
    }

    /// Number of entries held (for tests and metrics).
    pub fn len(&self) -> usize {
        self.wal.len().unwrap_or(0)
    }

    /// True when no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let start = match range.start_bound() {
            Bound::Included(i) => *i,
            Bound::Excluded(i) => i.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(i) => i.saturating_add(1),
            Bound::Excluded(i) => *i,
            Bound::Unbounded => u64::MAX,
        };
        self.wal
            .read(start, end)
            .map_err(|e| StorageIOError::read_logs(&e).into())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged_log_id = self.last_purged()?;
        let last_log_id = self.last_log_id()?;
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        self.write_meta(VOTE, vote, ErrorSubject::Vote)?;
        self.flush().await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        self.read_meta(VOTE, ErrorSubject::Vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        // Need not be durable: after a crash openraft recovers the committed index
        // from the leader; a persisted one only saves replay after a restart.
        self.write_meta(COMMITTED, &committed, ErrorSubject::Store)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self
            .read_meta::<Option<LogId>>(COMMITTED, ErrorSubject::Store)?
            .flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        self.wal.append(entries).map_err(wal_error)?;
        self.flusher.after_log_sync(callback);
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.wal.truncate(log_id.index).map_err(wal_error)?;
        self.flusher
            .sync_log()
            .await
            .map_err(|e| defensive(format!("fsync failed: {e}")))
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        if let Some(durable) = self.durable_snapshot.as_mut() {
            let covered = durable.wait_for(|index| index.is_some_and(|i| i >= log_id.index));
            match tokio::time::timeout(PURGE_WAITS_FOR_SNAPSHOT, covered).await {
                Ok(Ok(_)) => {}
                _ => {
                    return Err(defensive(format!(
                        "purge to {} before a durable snapshot covers it",
                        log_id.index
                    )));
                }
            }
        }
        // The purge point is recorded, the entries forgotten, and their segment
        // files deleted only once the purge point is durable: a crash before
        // then leaves extra entries (ignored), never a hole. Neither the sync
        // nor the deletions are waited for here: openraft's core waits for
        // purges, and a slow disk would hold up its heartbeats.
        //
        // Except a purge to or past the last entry (a snapshot installed ahead
        // of the log): the entries appended next start after a gap that only
        // the purge point explains, so it must be durable before they are.
        let past_the_end = self
            .last_entry_id()?
            .is_none_or(|last| last.index <= log_id.index);
        self.write_meta(LAST_PURGED, &log_id, ErrorSubject::Logs)?;
        let unneeded = self.wal.forget_through(log_id.index).map_err(wal_error)?;
        if past_the_end {
            self.flush().await?;
        }
        self.flusher.remove_after_database_sync(unneeded);
        Ok(())
    }
}
