//! The Raft log in sled: entries keyed by big-endian index in tree `log`, and the
//! vote, committed index and last purged id in tree `raft-meta`.
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

const VOTE: &[u8] = b"vote";
const COMMITTED: &[u8] = b"committed";
const LAST_PURGED: &[u8] = b"last-purged";

/// The sled-backed log. Cheap to clone; clones share the trees and the flusher.
#[derive(Clone)]
pub struct LogStore {
    log: sled::Tree,
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

fn key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

fn index_of(key: &[u8]) -> Result<u64, StorageError> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| {
        let e = std::io::Error::other(format!("log key of {} bytes, expected 8", key.len()));
        StorageError::from(StorageIOError::read_logs(&e))
    })?;
    Ok(u64::from_be_bytes(bytes))
}

fn defensive(message: String) -> StorageError {
    StorageIOError::write_logs(&std::io::Error::other(message)).into()
}

impl LogStore {
    /// Opens the log trees of `db`.
    pub fn open(db: &sled::Db, flusher: Arc<Flusher>) -> Result<Self, sled::Error> {
        Ok(LogStore {
            log: db.open_tree("log")?,
            meta: db.open_tree("raft-meta")?,
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
    fn last_log_id(&self) -> Result<Option<LogId>, StorageError> {
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
        match self.log.last() {
            Ok(Some((_, bytes))) => Ok(Some(decode::<Entry>(&bytes, ErrorSubject::Logs)?.log_id)),
            Ok(None) => Ok(None),
            Err(e) => Err(StorageIOError::read_logs(&e).into()),
        }
    }

    fn last_purged(&self) -> Result<Option<LogId>, StorageError> {
        self.read_meta(LAST_PURGED, ErrorSubject::Logs)
    }

    /// Checks the log on disk: every entry decodes, sits under its own index, and
    /// the indices run without a hole from the purge point to the last entry.
    /// Returns the first and last index held.
    pub fn verify(&self) -> Result<Option<(u64, u64)>, String> {
        let purged = self
            .last_purged()
            .map_err(|e| e.to_string())?
            .map(|id| id.index);
        let mut span: Option<(u64, u64)> = None;
        for item in self.log.iter() {
            let (k, bytes) = item.map_err(|e| format!("unreadable log entry: {e}"))?;
            let index = index_of(&k).map_err(|e| e.to_string())?;
            let entry: Entry =
                decode(&bytes, ErrorSubject::Logs).map_err(|e| format!("entry {index}: {e}"))?;
            if entry.log_id.index != index {
                return Err(format!(
                    "entry stored at {index} says it is {}",
                    entry.log_id.index
                ));
            }
            span = match span {
                None => {
                    if purged.is_some_and(|p| index > p + 1) {
                        return Err(format!(
                            "hole after the purge point {}: the log starts at {index}",
                            purged.unwrap_or(0)
                        ));
                    }
                    Some((index, index))
                }
                Some((first, last)) if index == last + 1 => Some((first, index)),
                Some((_, last)) => {
                    return Err(format!("hole in the log between {last} and {index}"));
                }
            };
        }
        Ok(span)
    }

    /// Number of entries held (for tests and metrics).
    pub fn len(&self) -> usize {
        self.log.len()
    }

    /// True when no entry is held.
    pub fn is_empty(&self) -> bool {
        self.log.is_empty()
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let start = match range.start_bound() {
            Bound::Included(i) => Bound::Included(key(*i)),
            Bound::Excluded(i) => Bound::Excluded(key(*i)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let end = match range.end_bound() {
            Bound::Included(i) => Bound::Included(key(*i)),
            Bound::Excluded(i) => Bound::Excluded(key(*i)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let mut entries = Vec::new();
        for item in self.log.range::<[u8; 8], _>((start, end)) {
            let (k, bytes) = item.map_err(|e| StorageIOError::read_logs(&e))?;
            let entry: Entry = decode(&bytes, ErrorSubject::Logs)?;
            let index = index_of(&k)?;
            if entry.log_id.index != index {
                return Err(defensive(format!(
                    "entry stored at {index} says it is {}",
                    entry.log_id.index
                )));
            }
            entries.push(entry);
        }
        Ok(entries)
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
        let last = self.last_log_id()?;
        // The log must stay contiguous: each entry continues it exactly. (An empty,
        // never-purged log starts wherever openraft says.)
        let mut expected = last.map(|id| id.index + 1);
        let mut batch = sled::Batch::default();
        for entry in entries {
            if let Some(next) = expected
                && entry.log_id.index != next
            {
                return Err(defensive(format!(
                    "append of index {} would leave a hole: the next index is {next}",
                    entry.log_id.index
                )));
            }
            expected = Some(entry.log_id.index + 1);
            batch.insert(
                &key(entry.log_id.index),
                encode(&entry, ErrorSubject::Logs)?,
            );
        }
        self.log
            .apply_batch(batch)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        self.flusher.after_flush(callback);
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut batch = sled::Batch::default();
        for item in self.log.range(key(log_id.index)..) {
            let (k, _) = item.map_err(|e| StorageIOError::write_logs(&e))?;
            batch.remove(k);
        }
        self.log
            .apply_batch(batch)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        self.flush().await
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
        // Record the purge point durably first: a crash between the two steps then
        // leaves extra entries (ignored), never a hole.
        self.write_meta(LAST_PURGED, &log_id, ErrorSubject::Logs)?;
        self.flush().await?;
        let mut batch = sled::Batch::default();
        for item in self.log.range(..=key(log_id.index)) {
            let (k, _) = item.map_err(|e| StorageIOError::write_logs(&e))?;
            batch.remove(k);
        }
        self.log
            .apply_batch(batch)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        Ok(())
    }
}
