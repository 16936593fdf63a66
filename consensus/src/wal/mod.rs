//! The Raft log's entries on disk: an append-only write-ahead log of segment
//! files in `<data dir>/raft-log/`, each up to [`SEGMENT_BYTES`] and named after
//! its first entry (format in [`segment`]).
//!
//! Why not sled: sled keeps up to 16 values per tree page and clones and
//! rewrites a page on every insert into it, so each appended entry cost its
//! bytes many times over, plus a `sync_file_range` per flush; measured, an entry
//! of a few dozen submissions took 235 µs of CPU to make durable in sled and
//! 60 µs here. sled still holds the vote, the purge point and the snapshot.
//!
//! Appends `pwrite` at the end of the newest segment; nothing is durable until
//! [`Wal::sync`] (run by the flusher thread, so concurrent appends share it)
//! has `fdatasync`ed every file written since the last one, and the directory
//! when a segment was created or removed. The log is contiguous: appends must
//! continue it; truncation removes a suffix (later segments first, so a crash
//! halfway leaves a shorter log, never a hole); purging drops a prefix and
//! deletes the segments wholly inside it. On open every segment is read back:
//! a record cut short or damaged at the end of the newest segment (a write
//! the crash interrupted, never acknowledged) is cut off; damage anywhere else,
//! or a hole, refuses to open.
//!
//! Recent entries are also kept in memory (bounded), so replication and apply,
//! which read what was just appended, do not touch the files.

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
}

/// The log's entries on disk. Shared by the log store's clones and the flusher.
pub struct Wal {
    dir: PathBuf,
    directory: File,
    /// The size at which a segment is closed ([`SEGMENT_BYTES`]; smaller in tests).
    segment_bytes: u64,
    inner: Mutex<Inner>,
}

impl Wal {
    /// Opens the log in `<data_dir>/raft-log`, creating it when missing. Entries
    /// at or below `purged` are dropped (and segments wholly below it deleted);
    /// the rest must follow it without a hole.
    pub fn open(data_dir: &Path, purged: Option<u64>) -> Result<Self, WalError> {
        Self::open_with_segments_of(data_dir, purged, SEGMENT_BYTES)
    }

    /// [`Wal::open`] with segments closed at `segment_bytes`.
    pub(crate) fn open_with_segments_of(
        data_dir: &Path,
        purged: Option<u64>,
        segment_bytes: u64,
    ) -> Result<Self, WalError> {
        let dir = data_dir.join(DIRECTORY);
        std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
        let directory = File::open(&dir).map_err(io("open", &dir))?;
        let mut names: Vec<(u64, PathBuf)> = Vec::new();
        for item in std::fs::read_dir(&dir).map_err(io("list", &dir))? {
            let item = item.map_err(io("list", &dir))?;
            let name = item.file_name();
            match name.to_str().and_then(segment::first_index_of) {
                Some(first) => names.push((first, item.path())),
                None => tracing::warn!(
                    "ignoring {} in the Raft log directory: not a log segment",
                    item.path().display()
                ),
            }
        }
        names.sort();
        let damaged = |reason: String| WalError::Damaged {
            dir: dir.clone(),
            reason,
        };
        let mut segments = BTreeMap::new();
        let mut entries: VecDeque<Location> = VecDeque::new();
        let newest = names.last().map(|(first, _)| *first);
        for (first, path) in names {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(io("open", &path))?;
            let is_newest = Some(first) == newest;
            let length = file.metadata().map_err(io("read", &path))?.len();
            if is_newest && length < segment::HEADER_BYTES {
                // Created just before a crash: it never held an entry.
                tracing::warn!(
                    "removing {}: a log segment whose header was never completed",
                    path.display()
                );
                std::fs::remove_file(&path).map_err(io("remove", &path))?;
                directory
                    .sync_all()
                    .map_err(io("fsync the directory", &dir))?;
                continue;
            }
            let scan = segment::scan(&file, &path).map_err(|e| match e {
                segment::ScanError::Io(source) => WalError::Io {
                    action: "read",
                    path: path.clone(),
                    source,
                },
                segment::ScanError::Header(reason) => damaged(reason),
            })?;
            if let Some(damage) = &scan.damage {
                if !is_newest {
                    return Err(damaged(format!(
                        "{} is damaged at byte {} ({damage}) and is not the newest segment",
                        path.display(),
                        scan.end
                    )));
                }
                // The newest segment ends in a write the crash interrupted: it was
                // never synced, so never acknowledged.
                tracing::warn!(
                    "cutting {} bytes off the end of {}: {damage} (a write interrupted by a crash)",
                    length - scan.end,
                    path.display()
                );
                file.set_len(scan.end).map_err(io("truncate", &path))?;
                file.sync_all().map_err(io("sync", &path))?;
            }
            if let Some(record) = scan.records.first()
                && record.log_id.index != first
            {
                return Err(damaged(format!(
                    "{} is named after entry {first} but starts with entry {}",
                    path.display(),
                    record.log_id.index
                )));
            }
            entries.extend(scan.records.iter().map(|record| Location {
                log_id: record.log_id,
                segment: first,
                offset: record.offset,
                len: record.len,
            }));
            segments.insert(
                first,
                Segment {
                    file: Arc::new(file),
                    path,
                    len: scan.end,
                },
            );
        }
        let mut inner = Inner {
            segments,
            entries,
            cache: VecDeque::new(),
            cache_bytes: 0,
            next_index: None,
            unsynced: Unsynced::default(),
        };
        inner.next_index = inner.entries.back().map(|l| l.log_id.index + 1);
        if let Some(purged) = purged {
            drop_through(&mut inner, purged)?;
            if let Some(first) = inner.entries.front()
                && first.log_id.index != purged + 1
            {
                return Err(damaged(format!(
                    "the log was purged through entry {purged} but continues at entry {}",
                    first.log_id.index
                )));
            }
        }
        let wal = Wal {
            dir,
            directory,
            segment_bytes,
            inner: Mutex::new(inner),
        };
        wal.check_contiguous()?;
        Ok(wal)
    }

    fn lock(&self) -> Result<MutexGuard<'_, Inner>, WalError> {
        self.inner
            .lock()
            .map_err(|_| WalError::Order("the log's lock was poisoned by an earlier panic".into()))
    }

    fn check_contiguous(&self) -> Result<(), WalError> {
        let inner = self.lock()?;
        let mut previous: Option<u64> = None;
        for location in &inner.entries {
            if let Some(p) = previous
                && location.log_id.index != p + 1
            {
                return Err(WalError::Damaged {
                    dir: self.dir.clone(),
                    reason: format!("entry {} follows entry {p}", location.log_id.index),
                });
            }
            previous = Some(location.log_id.index);
        }
        Ok(())
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
        let mut inner = self.lock()?;
        let mut pending: Vec<u8> = Vec::new();
        let mut pending_locations: Vec<Location> = Vec::new();
        let mut pending_entries: Vec<(Entry, usize)> = Vec::new();
        for entry in entries {
            let index = entry.log_id.index;
            let expected = pending_locations
                .last()
                .map(|l| l.log_id.index + 1)
                .or(inner.next_index);
            if let Some(next) = expected
                && index != next
            {
                return Err(WalError::Order(format!(
                    "append of entry {index} would leave a hole: the next index is {next}"
                )));
            }
            let payload = postcard::to_stdvec(&entry).map_err(|e| WalError::Codec {
                index,
                reason: e.to_string(),
            })?;
            // A new segment when the newest is full, or when this entry does not
            // continue it (the log was purged past its end).
            let continues_newest = inner.segments.last_key_value().is_some_and(|(_, s)| {
                s.len + pending.len() as u64 <= self.segment_bytes
                    && pending_locations
                        .last()
                        .map(|l| l.log_id.index)
                        .or(inner.entries.back().map(|l| l.log_id.index))
                        .is_some_and(|last| last + 1 == index)
            });
            let empty_newest = inner.segments.last_key_value().is_some_and(|(first, s)| {
                *first == index && s.len == segment::HEADER_BYTES && pending.is_empty()
            });
            if !continues_newest && !empty_newest {
                self.write_pending(&mut inner, &mut pending, &mut pending_locations)?;
                self.start_segment(&mut inner, index)?;
            }
            let segment = inner
                .segments
                .last_key_value()
                .map(|(first, s)| (*first, s.len))
                .ok_or_else(|| WalError::Order("no segment to append to".into()))?;
            let offset = segment.1 + pending.len() as u64;
            let before = pending.len();
            segment::encode_record(&payload, &mut pending);
            let len = (pending.len() - before) as u32;
            pending_locations.push(Location {
                log_id: entry.log_id,
                segment: segment.0,
                offset,
                len,
            });
            pending_entries.push((entry, len as usize));
        }
        self.write_pending(&mut inner, &mut pending, &mut pending_locations)?;
        for (entry, bytes) in pending_entries {
            inner.cache_bytes += bytes;
            inner.cache.push_back((entry, bytes));
        }
        while inner.cache.len() > CACHED_ENTRIES || inner.cache_bytes > CACHED_BYTES {
            match inner.cache.pop_front() {
                Some((_, bytes)) => inner.cache_bytes -= bytes,
                None => break,
            }
        }
        Ok(())
    }

    /// Writes the records gathered for the newest segment and records where
    /// their entries are.
    fn write_pending(
        &self,
        inner: &mut Inner,
        pending: &mut Vec<u8>,
        locations: &mut Vec<Location>,
    ) -> Result<(), WalError> {
        if pending.is_empty() {
            return Ok(());
        }
        let Inner {
            segments,
            entries,
            next_index,
            unsynced,
            ..
        } = inner;
        let segment = segments
            .values_mut()
            .next_back()
            .ok_or_else(|| WalError::Order("no segment to append to".into()))?;
        segment
            .file
            .write_all_at(pending, segment.len)
            .map_err(io("write", &segment.path))?;
        segment.len += pending.len() as u64;
        unsynced.file(segment);
        for location in locations.drain(..) {
            *next_index = Some(location.log_id.index + 1);
            entries.push_back(location);
        }
        pending.clear();
        Ok(())
    }

    fn start_segment(&self, inner: &mut Inner, first: u64) -> Result<(), WalError> {
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
        };
        inner.unsynced.file(&segment);
        inner.unsynced.directory = true;
        inner.segments.insert(first, segment);
        Ok(())
    }

    /// Makes everything written so far durable. Called by the flusher thread.
    pub fn sync(&self) -> Result<(), WalError> {
        let unsynced = std::mem::take(&mut self.lock()?.unsynced);
        for (file, path) in &unsynced.files {
            file.sync_data().map_err(io("fdatasync", path))?;
        }
        if unsynced.directory {
            self.directory
                .sync_all()
                .map_err(io("fsync the directory", &self.dir))?;
        }
        Ok(())
    }

    /// Removes the entries from `index` on (not yet durable: see [`Wal::sync`]).
    pub fn truncate(&self, index: u64) -> Result<(), WalError> {
        let mut inner = self.lock()?;
        let Some(position) = inner.entries.iter().position(|l| l.log_id.index >= index) else {
            return Ok(());
        };
        let cut = inner.entries[position];
        // Later segments first: a crash between steps leaves a shorter log.
        let later: Vec<u64> = inner
            .segments
            .range(cut.segment + 1..)
            .map(|(first, _)| *first)
            .rev()
            .collect();
        for first in later {
            if let Some(segment) = inner.segments.remove(&first) {
                std::fs::remove_file(&segment.path).map_err(io("remove", &segment.path))?;
                inner.unsynced.directory = true;
            }
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

    /// Drops the entries through `index` and deletes the segments that hold
    /// nothing else. The caller has made the purge point durable first.
    pub fn purge(&self, index: u64) -> Result<(), WalError> {
        drop_through(&mut *self.lock()?, index)
    }

    /// The entries with indices in `[start, end)` that the log holds, in order.
    pub fn read(&self, start: u64, end: u64) -> Result<Vec<Entry>, WalError> {
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
        let mut entries = Vec::with_capacity((to - from) as usize);
        // From the files up to the cache, then from the cache.
        let mut index = from;
        let from_files = to.min(cached_from);
        while index < from_files {
            let start = (index - first) as usize;
            let segment = inner.entries[start].segment;
            let run: Vec<Location> = inner
                .entries
                .range(start..(from_files - first) as usize)
                .take_while(|l| l.segment == segment)
                .copied()
                .collect();
            self.read_run(&inner, &run, &mut entries)?;
            index += run.len() as u64;
        }
        let skip = index.saturating_sub(cached_from) as usize;
        for (entry, _) in inner.cache.iter().skip(skip) {
            if entry.log_id.index >= to {
                break;
            }
            entries.push(entry.clone());
        }
        Ok(entries)
    }

    /// Reads consecutive records of one segment with one `pread`.
    fn read_run(
        &self,
        inner: &Inner,
        locations: &[Location],
        out: &mut Vec<Entry>,
    ) -> Result<(), WalError> {
        let (Some(first), Some(last)) = (locations.first(), locations.last()) else {
            return Ok(());
        };
        let segment = inner.segments.get(&first.segment).ok_or_else(|| {
            WalError::Order(format!("entry {} has no segment", first.log_id.index))
        })?;
        let start = first.offset;
        let end = last.offset + u64::from(last.len);
        let mut bytes = vec![0u8; (end - start) as usize];
        segment
            .file
            .read_exact_at(&mut bytes, start)
            .map_err(io("read", &segment.path))?;
        for location in locations {
            let at = (location.offset - start) as usize;
            let damaged = |reason: String| WalError::Damaged {
                dir: self.dir.clone(),
                reason: format!(
                    "entry {} in {}: {reason}",
                    location.log_id.index,
                    segment.path.display()
                ),
            };
            let (payload, _) =
                segment::decode_record(&bytes[at..]).map_err(|e| damaged(e.to_string()))?;
            let entry: Entry = postcard::from_bytes(payload).map_err(|e| damaged(e.to_string()))?;
            if entry.log_id != location.log_id {
                return Err(damaged(format!("it holds entry {}", entry.log_id.index)));
            }
            out.push(entry);
        }
        Ok(())
    }
}

/// Drops the entries through `index` and deletes the segments that hold
/// nothing else.
fn drop_through(inner: &mut Inner, index: u64) -> Result<(), WalError> {
    while inner
        .entries
        .front()
        .is_some_and(|l| l.log_id.index <= index)
    {
        inner.entries.pop_front();
    }
    while inner
        .cache
        .front()
        .is_some_and(|(e, _)| e.log_id.index <= index)
    {
        if let Some((_, bytes)) = inner.cache.pop_front() {
            inner.cache_bytes -= bytes;
        }
    }
    // A segment holds entries up to the next one's first index; the newest
    // stays, since appends continue it.
    let firsts: Vec<u64> = inner.segments.keys().copied().collect();
    for pair in firsts.windows(2) {
        let (first, next) = (pair[0], pair[1]);
        if next <= index + 1
            && let Some(segment) = inner.segments.remove(&first)
        {
            std::fs::remove_file(&segment.path).map_err(io("remove", &segment.path))?;
        }
    }
    inner.next_index = Some(inner.next_index.map_or(index + 1, |n| n.max(index + 1)));
    Ok(())
}
