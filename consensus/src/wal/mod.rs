//! The Raft log's entries on disk: an append-only write-ahead log of segment
//! files in `<data dir>/raft-log/`, each up to [`SEGMENT_BYTES`] and named after
//! its first entry (format in [`segment`]).
//!
//! Why not sled: sled keeps up to 16 values per tree page and clones and
//! rewrites a page on every insert into it, so each appended entry cost its
//! bytes many times over, plus a `sync_file_range` per flush; measured, an entry
//! of a few dozen submissions took 235 µs of CPU to make durable in sled and
//! 60 µs here. sled still holds the vote and the purge point; the snapshot is a
//! file of its own (`crate::snapshot_file`).
//!
//! Appends `pwrite` at the end of the newest segment; nothing is durable until
//! [`Wal::sync`] (run by the flusher thread, so concurrent appends share it)
//! has `fdatasync`ed every file written since the last one, and the directory
//! when a segment was created or removed. So that only the newest segment can
//! ever end in an interrupted write, a segment is synced before the next one is
//! created. The log is contiguous: appends must continue it; truncation removes
//! a suffix (later segments first, durably, then the cut; a crash halfway leaves
//! a shorter log, never a hole); purging drops a prefix and deletes the
//! segments wholly inside it. What opening repairs and refuses is in [`open`].
//! Every record carries the newest segment's durable mark at the time it was
//! written (how far the last completed sync reached), so that opening can
//! tell a group of unsynced writes the disk persisted out of order from
//! damage to what was acknowledged.
//! A sync that fails leaves the log refusing every further write: after a
//! failed `fdatasync` the kernel may have dropped the data and will not say so
//! twice.
//!
//! Recent entries are also kept in memory (bounded), so replication and apply,
//! which read what was just appended, do not touch the files; reads of older
//! ones `pread` outside the log's lock.

mod open;
pub mod segment;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::types::{Entry, LogId};

/// A segment is closed and a new one started once it reaches this size.
pub const SEGMENT_BYTES: u64 = 64 << 20;
/// Most recent entries kept in memory.
const CACHED_ENTRIES: usize = 1024;
/// Most bytes (as encoded) of recent entries kept in memory.
const CACHED_BYTES: usize = 64 << 20;
/// The directory, inside the replica's data directory.
pub const DIRECTORY: &str = "raft-log";

/// What went wrong with the log's files.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    /// A file operation failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// To which file.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The files do not hold a log this build can trust.
    #[error("the Raft log in {} is damaged: {reason}; restore this replica from another (remove its data directory and add it again as a new member)", dir.display())]
    Damaged {
        /// The log directory.
        dir: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// An operation would break the log's contiguity (a bug in the caller).
    #[error("{0}")]
    Order(String),
    /// An entry could not be encoded or decoded.
    #[error("entry {index}: {reason}")]
    Codec {
        /// The entry's index.
        index: u64,
        /// Why.
        reason: String,
    },
    /// An earlier sync failed: nothing more is written.
    #[error("the Raft log stopped after a failed sync ({0}); restart the replica")]
    Failed(String),
}

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> WalError + 'a {
    move |source| WalError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// One segment file.
struct Segment {
    file: Arc<File>,
    path: PathBuf,
    /// Bytes written (the next record goes here).
    len: u64,
    /// Its format: records are appended only to a segment of [`segment::VERSION`].
    version: u32,
    /// Bytes known durable: a completed sync reached them, and no truncation
    /// has changed them since.
    durable: u64,
    /// The lowest length a truncation cut this segment to since the sync in
    /// flight took its lengths: that sync makes no byte beyond it durable.
    cut_since_sync: Option<u64>,
}

/// Where an entry lies.
#[derive(Debug, Clone, Copy)]
struct Location {
    log_id: LogId,
    /// The segment, by its first index.
    segment: u64,
    offset: u64,
    len: u32,
}

/// Files written since the last sync.
#[derive(Default)]
struct Unsynced {
    files: Vec<(Arc<File>, PathBuf)>,
    directory: bool,
    /// Each segment's file and length when the sync took this set (the file,
    /// not the name: a segment removed and created again under the same name
    /// meanwhile was not synced).
    lengths: Vec<(u64, Arc<File>, u64)>,
}

impl Unsynced {
    fn file(&mut self, segment: &Segment) {
        if !self
            .files
            .iter()
            .any(|(f, _)| Arc::ptr_eq(f, &segment.file))
        {
            self.files
                .push((Arc::clone(&segment.file), segment.path.clone()));
        }
    }
}

struct Inner {
    segments: BTreeMap<u64, Segment>,
    /// Every entry held, in order (entries at or below the purge point are not).
    entries: VecDeque<Location>,
    /// The most recent entries, the last of `entries`.
    cache: VecDeque<(Entry, usize)>,
    cache_bytes: usize,
    /// The index the next append must have, once known.
    next_index: Option<u64>,
    unsynced: Unsynced,
    /// Why a sync failed, once one has.
    failed: Option<String>,
    /// Tests: the next sync fails as a failed `fdatasync` would.
    #[cfg(test)]
    fail_next_sync: bool,
}

/// The log's entries on disk. Shared by the log store's clones and the flusher.
pub struct Wal {
    dir: PathBuf,
    directory: File,
    /// The size at which a segment is closed ([`SEGMENT_BYTES`]; smaller in tests).
    segment_bytes: u64,
    inner: Mutex<Inner>,
}

impl Inner {
    /// Drops the entries through `index` and forgets the segments that hold
    /// nothing else; returns their files, for the caller to delete.
    fn drop_through(&mut self, index: u64) -> Vec<PathBuf> {
        while self
            .entries
            .front()
            .is_some_and(|l| l.log_id.index <= index)
        {
            self.entries.pop_front();
        }
        while self
            .cache
            .front()
            .is_some_and(|(e, _)| e.log_id.index <= index)
        {
            if let Some((_, bytes)) = self.cache.pop_front() {
                self.cache_bytes -= bytes;
            }
        }
        // A segment holds entries up to the next one's first index; the newest
        // stays, since appends continue it.
        let firsts: Vec<u64> = self.segments.keys().copied().collect();
        let mut dropped = Vec::new();
        for pair in firsts.windows(2) {
            if pair[1] <= index + 1
                && let Some(segment) = self.segments.remove(&pair[0])
            {
                dropped.push(segment.path);
            }
        }
        self.next_index = Some(self.next_index.map_or(index + 1, |n| n.max(index + 1)));
        dropped
    }

    fn clear_cache(&mut self) {
        self.cache.clear();
        self.cache_bytes = 0;
    }

    fn push_cached(&mut self, entry: Entry, bytes: usize) {
        self.cache_bytes += bytes;
        self.cache.push_back((entry, bytes));
        while self.cache.len() > CACHED_ENTRIES || self.cache_bytes > CACHED_BYTES {
            match self.cache.pop_front() {
                Some((_, bytes)) => self.cache_bytes -= bytes,
                None => break,
            }
        }
    }
}

impl Wal {
    fn lock(&self) -> Result<MutexGuard<'_, Inner>, WalError> {
        self.inner
            .lock()
            .map_err(|_| WalError::Order("the log's lock was poisoned by an earlier panic".into()))
    }

    /// The lock, unless a sync has failed.
    fn lock_healthy(&self) -> Result<MutexGuard<'_, Inner>, WalError> {
        let inner = self.lock()?;
        match &inner.failed {
            Some(why) => Err(WalError::Failed(why.clone())),
            None => Ok(inner),
        }
    }

    /// The first and last entry held.
    pub fn span(&self) -> Result<Option<(LogId, LogId)>, WalError> {
        let inner = self.lock()?;
        Ok(inner
            .entries
            .front()
            .zip(inner.entries.back())
            .map(|(first, last)| (first.log_id, last.log_id)))
    }

    /// Entries held.
    pub fn len(&self) -> Result<usize, WalError> {
        Ok(self.lock()?.entries.len())
    }

    /// True when no entry is held.
    pub fn is_empty(&self) -> Result<bool, WalError> {
        Ok(self.len()? == 0)
    }

    /// Bytes the segments take.
    pub fn disk_bytes(&self) -> u64 {
        self.lock()
            .map(|inner| inner.segments.values().map(|s| s.len).sum())
            .unwrap_or(0)
    }

    /// Writes `entries` after the last one (not yet durable: see [`Wal::sync`]).
    /// The first must have the next index, when the log knows it.
    pub fn append(&self, entries: impl IntoIterator<Item = Entry>) -> Result<(), WalError> {
        let mut inner = self.lock_healthy()?;
        let result = self.append_locked(&mut inner, entries);
        if result.is_err() {
            // Part may have been written: reads go to the files, which the
            // positions recorded so far describe.
            inner.clear_cache();
        }
        result
    }

    fn append_locked(
        &self,
        inner: &mut Inner,
        entries: impl IntoIterator<Item = Entry>,
    ) -> Result<(), WalError> {
        let mut pending = Pending::default();
        for entry in entries {
            let index = entry.log_id.index;
            let last = pending
                .locations
                .last()
                .or(inner.entries.back())
                .map(|l| l.log_id.index);
            let expected = last.map(|l| l + 1).or(inner.next_index);
            if let Some(next) = expected
                && index != next
            {
                return Err(WalError::Order(format!(
                    "append of entry {index} would leave a hole: the next index is {next}"
                )));
            }
            let previous = pending
                .locations
                .last()
                .or(inner.entries.back())
                .map(|l| l.log_id.leader_id);
            if let Some(previous) = previous
                && entry.log_id.leader_id < previous
            {
                return Err(WalError::Order(format!(
                    "entry {index} of term {} would follow an entry of term {}: terms never go back",
                    entry.log_id.leader_id, previous
                )));
            }
            let payload = postcard::to_stdvec(&entry).map_err(|e| WalError::Codec {
                index,
                reason: e.to_string(),
            })?;
            if !self.newest_takes(inner, &pending, index, last) {
                self.write_pending(inner, &mut pending)?;
                self.start_segment(inner, index)?;
            }
            let (first, len, durable) = inner
                .segments
                .last_key_value()
                .map(|(first, s)| (*first, s.len, s.durable))
                .ok_or_else(|| WalError::Order("no segment to append to".into()))?;
            let offset = len + pending.bytes.len() as u64;
            let before = pending.bytes.len();
            segment::encode_record(&payload, durable, &mut pending.bytes);
            let record = (pending.bytes.len() - before) as u32;
            pending.locations.push(Location {
                log_id: entry.log_id,
                segment: first,
                offset,
                len: record,
            });
            pending.entries.push((entry, record as usize));
        }
        self.write_pending(inner, &mut pending)
    }

    /// Whether entry `index` goes into the newest segment: it continues that
    /// segment's records (`last` is the log's last index) and the segment is
    /// not full, or the segment is empty and named after `index`.
    fn newest_takes(
        &self,
        inner: &Inner,
        pending: &Pending,
        index: u64,
        last: Option<u64>,
    ) -> bool {
        let Some((first, newest)) = inner.segments.last_key_value() else {
            return false;
        };
        if newest.version != segment::VERSION {
            // An older format's segment is closed: new records go in a new one.
            return false;
        }
        let written = newest.len + pending.bytes.len() as u64;
        if written == segment::HEADER_BYTES {
            return *first == index;
        }
        let holds_the_last = inner.entries.back().is_some_and(|l| l.segment == *first)
            || !pending.locations.is_empty();
        holds_the_last && last.is_some_and(|l| l + 1 == index) && written <= self.segment_bytes
    }

    /// Writes the records gathered for the newest segment and records where
    /// their entries are.
    fn write_pending(&self, inner: &mut Inner, pending: &mut Pending) -> Result<(), WalError> {
        if pending.bytes.is_empty() {
            return Ok(());
        }
        let segment = inner
            .segments
            .values_mut()
            .next_back()
            .ok_or_else(|| WalError::Order("no segment to append to".into()))?;
        segment
            .file
            .write_all_at(&pending.bytes, segment.len)
            .map_err(io("write", &segment.path))?;
        segment.len += pending.bytes.len() as u64;
        inner.unsynced.file(segment);
        for location in pending.locations.drain(..) {
            inner.next_index = Some(location.log_id.index + 1);
            inner.entries.push_back(location);
        }
        for (entry, bytes) in pending.entries.drain(..) {
            inner.push_cached(entry, bytes);
        }
        pending.bytes.clear();
        Ok(())
    }

    /// Starts the segment for entry `first`. The segment before it is synced
    /// first, so that a crash can interrupt writes only in the newest segment;
    /// an empty newest segment under another name (made for entries that never
    /// came) is removed.
    fn start_segment(&self, inner: &mut Inner, first: u64) -> Result<(), WalError> {
        let empty = inner
            .segments
            .last_key_value()
            .filter(|(_, s)| s.len == segment::HEADER_BYTES)
            .map(|(first, _)| *first);
        if let Some(empty) = empty
            && let Some(segment) = inner.segments.remove(&empty)
        {
            std::fs::remove_file(&segment.path).map_err(io("remove", &segment.path))?;
            inner.unsynced.directory = true;
        } else if let Some(previous) = inner.segments.values().next_back() {
            previous
                .file
                .sync_data()
                .map_err(io("fdatasync", &previous.path))?;
        }
        let path = self.dir.join(segment::file_name(first));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io("create", &path))?;
        file.write_all_at(&segment::header(), 0)
            .map_err(io("write", &path))?;
        let segment = Segment {
            file: Arc::new(file),
            path,
            len: segment::HEADER_BYTES,
            version: segment::VERSION,
            durable: 0,
            cut_since_sync: None,
        };
        inner.unsynced.file(&segment);
        inner.unsynced.directory = true;
        inner.segments.insert(first, segment);
        Ok(())
    }

    /// Tests: makes the next sync fail as a failed `fdatasync` would (the
    /// data written since the last sync may or may not be on the disk).
    #[cfg(test)]
    pub(crate) fn fail_next_sync(&self) {
        if let Ok(mut inner) = self.lock() {
            inner.fail_next_sync = true;
        }
    }

    /// Makes everything written so far durable. Called by the flusher thread.
    pub fn sync(&self) -> Result<(), WalError> {
        let unsynced = {
            let mut inner = self.lock_healthy()?;
            let mut unsynced = std::mem::take(&mut inner.unsynced);
            for (first, segment) in &mut inner.segments {
                segment.cut_since_sync = None;
                unsynced
                    .lengths
                    .push((*first, Arc::clone(&segment.file), segment.len));
            }
            unsynced
        };
        #[cfg(test)]
        if std::mem::take(&mut self.lock()?.fail_next_sync) {
            let injected = std::io::Error::other("injected: the disk reported an I/O error");
            let error = io("fdatasync", &self.dir)(injected);
            self.lock()?.failed = Some(error.to_string());
            return Err(error);
        }
        let result = unsynced
            .files
            .iter()
            .try_for_each(|(file, path)| file.sync_data().map_err(io("fdatasync", path)))
            .and_then(|()| {
                if unsynced.directory {
                    self.directory
                        .sync_all()
                        .map_err(io("fsync the directory", &self.dir))
                } else {
                    Ok(())
                }
            });
        let mut inner = self.lock()?;
        match &result {
            Err(e) => inner.failed = Some(e.to_string()),
            Ok(()) => {
                for (first, file, length) in unsynced.lengths {
                    if let Some(segment) = inner
                        .segments
                        .get_mut(&first)
                        .filter(|segment| Arc::ptr_eq(&segment.file, &file))
                    {
                        let reached = length.min(segment.cut_since_sync.unwrap_or(u64::MAX));
                        segment.durable = segment.durable.max(reached);
                    }
                }
            }
        }
        result
    }

    /// Removes the entries from `index` on (not yet durable: see [`Wal::sync`]).
    pub fn truncate(&self, index: u64) -> Result<(), WalError> {
        let mut inner = self.lock_healthy()?;
        let Some(position) = inner.entries.iter().position(|l| l.log_id.index >= index) else {
            return Ok(());
        };
        let cut = inner.entries[position];
        // Later segments first, durably: a crash before the cut then leaves a
        // shorter log, never a hole.
        let later: Vec<u64> = inner
            .segments
            .range(cut.segment + 1..)
            .map(|(first, _)| *first)
            .rev()
            .collect();
        if !later.is_empty() {
            for first in later {
                if let Some(segment) = inner.segments.remove(&first) {
                    std::fs::remove_file(&segment.path).map_err(io("remove", &segment.path))?;
                }
            }
            self.directory
                .sync_all()
                .map_err(io("fsync the directory", &self.dir))?;
        }
        let Inner {
            segments, unsynced, ..
        } = &mut *inner;
        if let Some(segment) = segments.get_mut(&cut.segment) {
            segment
                .file
                .set_len(cut.offset)
                .map_err(io("truncate", &segment.path))?;
            segment.len = cut.offset;
            segment.durable = segment.durable.min(cut.offset);
            segment.cut_since_sync = Some(
                segment
                    .cut_since_sync
                    .map_or(cut.offset, |c| c.min(cut.offset)),
            );
            unsynced.file(segment);
        }
        inner.entries.truncate(position);
        while inner
            .cache
            .back()
            .is_some_and(|(e, _)| e.log_id.index >= index)
        {
            if let Some((_, bytes)) = inner.cache.pop_back() {
                inner.cache_bytes -= bytes;
            }
        }
        inner.next_index = Some(index);
        Ok(())
    }

    /// Forgets the entries up to `index` (inclusive) and returns the paths of
    /// the segments that held nothing else, for the caller to delete once the
    /// purge point is durable (deleting a large file can take milliseconds, so
    /// not under the lock). Until they are deleted a reopen finds them, and
    /// skips them if the purge point recorded covers them.
    pub fn forget_through(&self, index: u64) -> Result<Vec<PathBuf>, WalError> {
        Ok(self.lock_healthy()?.drop_through(index))
    }

    /// The entries with indices in `[start, end)` that the log holds, in order.
    pub fn read(&self, start: u64, end: u64) -> Result<Vec<Entry>, WalError> {
        let (runs, cached) = {
            let inner = self.lock()?;
            let Some(first) = inner.entries.front().map(|l| l.log_id.index) else {
                return Ok(Vec::new());
            };
            let from = start.max(first);
            let to = end.min(first + inner.entries.len() as u64);
            if from >= to {
                return Ok(Vec::new());
            }
            let cached_from = inner
                .cache
                .front()
                .map_or(u64::MAX, |(e, _)| e.log_id.index);
            // From the files up to the cache, then from the cache.
            let mut runs: Vec<Run> = Vec::new();
            for location in inner
                .entries
                .range((from - first) as usize..(to.min(cached_from).max(from) - first) as usize)
            {
                match runs.last_mut() {
                    Some(run) if run.locations[0].segment == location.segment => {
                        run.locations.push(*location);
                    }
                    _ => {
                        let segment = inner.segments.get(&location.segment).ok_or_else(|| {
                            WalError::Order(format!(
                                "entry {} has no segment",
                                location.log_id.index
                            ))
                        })?;
                        runs.push(Run {
                            file: Arc::clone(&segment.file),
                            path: segment.path.clone(),
                            version: segment.version,
                            locations: vec![*location],
                        });
                    }
                }
            }
            let cached: Vec<Entry> = inner
                .cache
                .iter()
                .map(|(entry, _)| entry)
                .filter(|e| e.log_id.index >= from && e.log_id.index < to)
                .cloned()
                .collect();
            (runs, cached)
        };
        let mut entries = Vec::new();
        for run in &runs {
            self.read_run(run, &mut entries)?;
        }
        entries.extend(cached);
        Ok(entries)
    }

    /// Reads consecutive records of one segment with one `pread`.
    fn read_run(&self, run: &Run, out: &mut Vec<Entry>) -> Result<(), WalError> {
        let (Some(first), Some(last)) = (run.locations.first(), run.locations.last()) else {
            return Ok(());
        };
        let start = first.offset;
        let end = last.offset + u64::from(last.len);
        let mut bytes = vec![0u8; (end - start) as usize];
        run.file
            .read_exact_at(&mut bytes, start)
            .map_err(io("read", &run.path))?;
        for location in &run.locations {
            let at = (location.offset - start) as usize;
            let damaged = |reason: String| WalError::Damaged {
                dir: self.dir.clone(),
                reason: format!(
                    "entry {} in {}: {reason}",
                    location.log_id.index,
                    run.path.display()
                ),
            };
            let record = segment::decode_record(&bytes[at..], run.version)
                .map_err(|e| damaged(e.to_string()))?;
            let entry: Entry =
                postcard::from_bytes(record.payload).map_err(|e| damaged(e.to_string()))?;
            if entry.log_id != location.log_id {
                return Err(damaged(format!("it holds entry {}", entry.log_id.index)));
            }
            out.push(entry);
        }
        Ok(())
    }
}

/// Records gathered for one write.
#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    locations: Vec<Location>,
    entries: Vec<(Entry, usize)>,
}

/// Consecutive entries of one segment, read with one `pread`.
struct Run {
    file: Arc<File>,
    path: PathBuf,
    version: u32,
    locations: Vec<Location>,
}
