//! Opening the log: every segment is read back, what a crash may legitimately
//! leave behind is repaired, and anything else is refused.
//!
//! What a crash can leave, given how the log writes (see [`super`]): a newest
//! segment whose header never reached the disk; a newest segment whose last
//! unsynced writes reached the disk in part and in any order (a torn record,
//! possibly with intact records of the same unsynced group after it, whose
//! durable marks show that none of it was ever synced, so never acknowledged:
//! the segment is cut at the torn record); segments at or below the purge point
//! that were not deleted yet; a newest segment holding nothing under a name
//! that no longer fits (it is removed). Damage that a later record's durable
//! mark says had been synced, damage in an older segment, an entry whose term
//! is lower than the one before it, a hole, or a gap after the purge point is
//! corruption: the log refuses to open rather than forget entries it
//! acknowledged.
//!
//! One case cannot be told apart: damage inside the last group written, when
//! that group was synced and nothing was written after. It is taken for a
//! torn write, as damage to a last record always was.

use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::segment::{self, ScanError};
use super::{DIRECTORY, Inner, Location, Segment, Unsynced, Wal, WalError, io};

impl Wal {
    /// Opens the log in `<data_dir>/raft-log`, creating it when missing. Entries
    /// at or below `purged` are dropped (and segments wholly below it deleted);
    /// the rest must follow it without a hole.
    pub fn open(data_dir: &Path, purged: Option<u64>) -> Result<Self, WalError> {
        Self::open_with_segments_of(data_dir, purged, super::SEGMENT_BYTES)
    }

    /// [`Wal::open`] with segments closed at `segment_bytes`.
    pub(crate) fn open_with_segments_of(
        data_dir: &Path,
        purged: Option<u64>,
        segment_bytes: u64,
    ) -> Result<Self, WalError> {
        let dir = crate::durable_dir::create(data_dir, DIRECTORY)
            .map_err(|(path, e)| io("create", &path)(e))?;
        let directory = File::open(&dir).map_err(io("open", &dir))?;
        let damaged = |reason: String| WalError::Damaged {
            dir: dir.clone(),
            reason,
        };
        let mut names = segment_files(&dir)?;
        remove_purged(&mut names, purged, &directory, &dir)?;
        let newest = names.last().map(|(first, _)| *first);
        let mut segments = BTreeMap::new();
        let mut entries: VecDeque<Location> = VecDeque::new();
        for (first, path) in names {
            let is_newest = Some(first) == newest;
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(io("open", &path))?;
            if is_newest && header_never_written(&file, &path)? {
                tracing::warn!(
                    "removing {}: a log segment whose header never reached the disk",
                    path.display()
                );
                remove(&path, &directory, &dir)?;
                continue;
            }
            let scan = segment::scan(&file, &path).map_err(|e| match e {
                ScanError::Io(source) => WalError::Io {
                    action: "read",
                    path: path.clone(),
                    source,
                },
                ScanError::Header(reason) => damaged(reason),
            })?;
            if let Some(damage) = &scan.damage {
                if !is_newest || !damage.torn_write {
                    return Err(damaged(format!(
                        "{} is damaged at byte {} ({}){}",
                        path.display(),
                        scan.end,
                        damage.reason,
                        if !is_newest {
                            ", and it is not the newest segment"
                        } else if damage.records_follow > 0 {
                            ", and intact records written after it had been synced follow"
                        } else {
                            ""
                        }
                    )));
                }
                tracing::warn!(
                    "cutting {} bytes off the end of {}: {}, with {} intact records of the same \
                     unsynced writes after it (writes a crash interrupted)",
                    scan.file_len - scan.end,
                    path.display(),
                    damage.reason,
                    damage.records_follow
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
            if is_newest {
                // What was read back may still sit in the page cache only (a
                // process crash, not a power cut): records written from now on
                // may then say it is durable.
                file.sync_data().map_err(io("sync", &path))?;
            }
            segments.insert(
                first,
                Segment {
                    file: Arc::new(file),
                    path,
                    len: scan.end,
                    version: scan.version,
                    durable: scan.end,
                    cut_since_sync: None,
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
            failed: None,
            #[cfg(test)]
            fail_next_sync: false,
        };
        inner.next_index = inner.entries.back().map(|l| l.log_id.index + 1);
        if let Some(purged) = purged {
            for path in inner.drop_through(purged) {
                remove(&path, &directory, &dir)?;
            }
            if let Some(first) = inner.entries.front()
                && first.log_id.index != purged + 1
            {
                return Err(damaged(format!(
                    "the log was purged through entry {purged} but continues at entry {}",
                    first.log_id.index
                )));
            }
        }
        if let Some(hole) = first_hole(&inner.entries) {
            return Err(damaged(hole));
        }
        if let Some(regress) = first_term_regression(&inner.entries) {
            return Err(damaged(regress));
        }
        // A newest segment that holds nothing and is not where the log goes on
        // (it was created for entries that never reached the disk).
        let stale_empty = inner.segments.last_key_value().and_then(|(first, s)| {
            (s.len == segment::HEADER_BYTES && inner.next_index.is_some_and(|n| n != *first))
                .then_some(*first)
        });
        if let Some(first) = stale_empty
            && let Some(segment) = inner.segments.remove(&first)
        {
            tracing::warn!(
                "removing {}: an empty log segment where the log does not continue",
                segment.path.display()
            );
            remove(&segment.path, &directory, &dir)?;
        }
        Ok(Wal {
            dir,
            directory,
            segment_bytes,
            inner: Mutex::new(inner),
        })
    }
}

/// The segment files in `dir`, in log order.
fn segment_files(dir: &Path) -> Result<Vec<(u64, PathBuf)>, WalError> {
    let mut names = Vec::new();
    for item in std::fs::read_dir(dir).map_err(io("list", dir))? {
        let item = item.map_err(io("list", dir))?;
        match item.file_name().to_str().and_then(segment::first_index_of) {
            Some(first) => names.push((first, item.path())),
            None => tracing::warn!(
                "ignoring {} in the Raft log directory: not a log segment",
                item.path().display()
            ),
        }
    }
    names.sort();
    Ok(names)
}

/// Deletes the segments wholly at or below the purge point (the next one starts
/// at most one past it) without reading them: a crash after the purge point
/// was recorded may have left them.
fn remove_purged(
    names: &mut Vec<(u64, PathBuf)>,
    purged: Option<u64>,
    directory: &File,
    dir: &Path,
) -> Result<(), WalError> {
    let Some(purged) = purged else {
        return Ok(());
    };
    let mut kept = Vec::with_capacity(names.len());
    let mut segments = std::mem::take(names).into_iter().peekable();
    while let Some((first, path)) = segments.next() {
        match segments.peek() {
            Some((next, _)) if *next <= purged + 1 => remove(&path, directory, dir)?,
            _ => kept.push((first, path)),
        }
    }
    *names = kept;
    Ok(())
}

/// True for a newest segment whose header never fully reached the disk: too
/// short for one, or not a valid one with no intact record after it. (Its
/// first sync would have made the header durable with the records; a bad
/// header before intact records is damage, and the scan says which.)
fn header_never_written(file: &File, path: &Path) -> Result<bool, WalError> {
    let length = file.metadata().map_err(io("read", path))?.len();
    if length < segment::HEADER_BYTES {
        return Ok(true);
    }
    let mut bytes = vec![0u8; length as usize];
    file.read_exact_at(&mut bytes, 0)
        .map_err(io("read", path))?;
    if segment::check_header(&bytes, path).is_ok() {
        return Ok(false);
    }
    let after_header = &bytes[segment::HEADER_BYTES as usize - 1..];
    let records_after = [segment::VERSION_WITHOUT_MARKS, segment::VERSION]
        .into_iter()
        .any(|version| !segment::entry_records_within(after_header, version, None).is_empty());
    Ok(!records_after)
}

/// Removes a file of the log durably.
fn remove(path: &Path, directory: &File, dir: &Path) -> Result<(), WalError> {
    std::fs::remove_file(path).map_err(io("remove", path))?;
    directory.sync_all().map_err(io("fsync the directory", dir))
}

/// Describes the first entry whose term is lower than the one before it, if
/// any: a leader never appends below its own term, and a truncation removes
/// the suffix it replaces.
fn first_term_regression(entries: &VecDeque<Location>) -> Option<String> {
    entries
        .iter()
        .zip(entries.iter().skip(1))
        .find(|(a, b)| b.log_id.leader_id < a.log_id.leader_id)
        .map(|(a, b)| {
            format!(
                "entry {} has term {} after entry {} of term {}",
                b.log_id.index, b.log_id.leader_id, a.log_id.index, a.log_id.leader_id
            )
        })
}

/// Describes the first index missing between two held entries, if any.
fn first_hole(entries: &VecDeque<Location>) -> Option<String> {
    entries
        .iter()
        .zip(entries.iter().skip(1))
        .find(|(a, b)| b.log_id.index != a.log_id.index + 1)
        .map(|(a, b)| format!("entry {} follows entry {}", b.log_id.index, a.log_id.index))
}
