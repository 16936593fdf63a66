//! The write-ahead log against a model: appends, truncations, purges and
//! reopenings in any order keep exactly the entries a `BTreeMap` would, and a
//! crash's torn tail or damage elsewhere is handled as documented.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;

use corral_state::{Actor, Command, Role};
use openraft::{CommittedLeaderId, EntryPayload};
use proptest::prelude::*;

use super::*;
use crate::types::Proposal;

/// Small segments, so a few entries span several.
const SMALL_SEGMENTS: u64 = 4096;

fn entry(term: u64, index: u64, bytes: usize) -> Entry {
    let command = Command::SetUser {
        user: corral_state::account::User {
            name: "u".repeat(bytes.max(1)),
            default_account: "root".into(),
            accounts: Default::default(),
            role: Role::User,
            limits: Default::default(),
        },
        by: Actor {
            user: "root".into(),
            role: Role::Admin,
        },
    };
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
        payload: EntryPayload::Normal(Proposal::new(&[command]).expect("encodes")),
    }
}

fn open(dir: &Path, purged: Option<u64>) -> Wal {
    Wal::open_with_segments_of(dir, purged, SMALL_SEGMENTS).expect("the log opens")
}

/// A whole purge, as the log store and the flusher do it between them: forget
/// the entries through `index`, then delete the segments that held only them.
fn purge(wal: &Wal, index: u64) {
    for path in wal.forget_through(index).expect("purge") {
        std::fs::remove_file(&path).expect("delete a purged segment");
    }
}

/// A log in `dir` holding entries `indices` of `bytes` each, synced and closed.
fn written(dir: &Path, indices: std::ops::RangeInclusive<u64>, bytes: usize) {
    let wal = open(dir, None);
    wal.append(indices.map(|i| entry(1, i, bytes)))
        .expect("append");
    wal.sync().expect("sync");
}

/// The path of the first or last segment file in `dir`.
fn segment_path(dir: &Path, newest: bool) -> PathBuf {
    let mut names = segments(dir);
    let name = if newest {
        names.pop()
    } else {
        names.into_iter().next()
    };
    dir.join(DIRECTORY).join(name.expect("a segment"))
}

fn indices(wal: &Wal) -> Vec<u64> {
    wal.read(0, u64::MAX)
        .expect("readable")
        .iter()
        .map(|e| e.log_id.index)
        .collect()
}

fn segments(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join(DIRECTORY))
        .expect("log directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn entries_read_back_from_memory_and_from_disk_after_reopening() {
    let dir = tempfile::tempdir().expect("tempdir");
    let written: Vec<Entry> = (1..=40).map(|i| entry(1, i, 300)).collect();
    {
        let wal = open(dir.path(), None);
        wal.append(written.clone()).expect("append");
        wal.sync().expect("sync");
        assert_eq!(wal.read(1, 41).expect("read"), written);
        assert_eq!(wal.read(10, 12).expect("read"), written[9..11].to_vec());
        assert!(segments(dir.path()).len() > 2, "{:?}", segments(dir.path()));
    }
    let wal = open(dir.path(), None);
    assert_eq!(wal.read(1, 41).expect("read"), written);
    assert_eq!(wal.read(0, 5).expect("read"), written[..4].to_vec());
    assert_eq!(wal.read(41, 50).expect("read"), Vec::new());
    let (first, last) = wal.span().expect("span").expect("entries");
    assert_eq!((first.index, last.index), (1, 40));
    // Appends continue after a reopening.
    wal.append([entry(2, 41, 10)]).expect("append");
    assert_eq!(indices(&wal).last(), Some(&41));
}

#[test]
fn an_append_that_would_leave_a_hole_or_go_back_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = open(dir.path(), None);
    wal.append((5..=7).map(|i| entry(1, i, 10)))
        .expect("a first append starts anywhere");
    for wrong in [9, 7, 3] {
        let error = wal.append([entry(1, wrong, 10)]).expect_err("refused");
        assert!(error.to_string().contains("hole"), "{error}");
    }
    assert_eq!(indices(&wal), vec![5, 6, 7]);
}

#[test]
fn truncation_removes_the_suffix_across_segments_and_survives_reopening() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let wal = open(dir.path(), None);
        wal.append((1..=40).map(|i| entry(1, i, 300)))
            .expect("append");
        let before = segments(dir.path()).len();
        wal.truncate(12).expect("truncate");
        wal.sync().expect("sync");
        assert_eq!(indices(&wal), (1..=11).collect::<Vec<_>>());
        assert!(segments(dir.path()).len() < before);
        // A new leader's entries replace the old ones.
        wal.append((12..=15).map(|i| entry(2, i, 300)))
            .expect("append");
    }
    let wal = open(dir.path(), None);
    let entries = wal.read(0, u64::MAX).expect("read");
    assert_eq!(entries.len(), 15);
    assert!(entries[11..].iter().all(|e| e.log_id.leader_id.term == 2));
}

#[test]
fn purging_drops_the_prefix_and_deletes_the_segments_inside_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let wal = open(dir.path(), None);
        wal.append((1..=40).map(|i| entry(1, i, 300)))
            .expect("append");
        let before = segments(dir.path()).len();
        purge(&wal, 30);
        assert_eq!(indices(&wal), (31..=40).collect::<Vec<_>>());
        assert!(segments(dir.path()).len() < before);
        assert_eq!(wal.read(1, 31).expect("read"), Vec::new());
    }
    // Reopened with the recorded purge point: entries at or below it are gone
    // even where they share a segment with later ones.
    let wal = open(dir.path(), Some(30));
    assert_eq!(indices(&wal), (31..=40).collect::<Vec<_>>());
}

#[test]
fn after_a_purge_past_the_end_the_log_continues_after_the_purge_point() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let wal = open(dir.path(), None);
        wal.append((1..=5).map(|i| entry(1, i, 10)))
            .expect("append");
        // A snapshot installed from the leader covers more than this log holds.
        purge(&wal, 100);
        assert_eq!(wal.len().expect("len"), 0);
        let error = wal.append([entry(1, 6, 10)]).expect_err("refused");
        assert!(error.to_string().contains("next index is 101"), "{error}");
        wal.append((101..=103).map(|i| entry(2, i, 10)))
            .expect("append");
        wal.sync().expect("sync");
    }
    let wal = open(dir.path(), Some(100));
    assert_eq!(indices(&wal), vec![101, 102, 103]);
}

#[test]
fn a_write_torn_by_a_crash_at_the_end_is_cut_off_and_the_rest_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    written(dir.path(), 1..=3, 100);
    let newest = dir
        .path()
        .join(DIRECTORY)
        .join(segments(dir.path()).last().expect("a segment"));
    let length = std::fs::metadata(&newest).expect("metadata").len();
    let file = OpenOptions::new().write(true).open(&newest).expect("open");
    // Half of the last record made it to disk.
    file.set_len(length - 40).expect("cut");
    drop(file);
    let wal = open(dir.path(), None);
    assert_eq!(indices(&wal), vec![1, 2]);
    wal.append([entry(1, 3, 100)])
        .expect("the log continues where it was cut");
    drop(wal);
    assert_eq!(indices(&open(dir.path(), None)), vec![1, 2, 3]);
}

#[test]
fn damage_before_the_newest_segment_refuses_to_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    written(dir.path(), 1..=40, 300);
    let first = segment_path(dir.path(), false);
    let mut bytes = std::fs::read(&first).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&first, bytes).expect("write");
    let error = Wal::open_with_segments_of(dir.path(), None, SMALL_SEGMENTS)
        .err()
        .expect("refused");
    assert!(matches!(error, WalError::Damaged { .. }), "{error}");
    assert!(
        error.to_string().contains("not the newest segment"),
        "{error}"
    );
}

#[test]
fn a_segment_created_just_before_a_crash_is_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    written(dir.path(), 1..=3, 10);
    let stray = dir.path().join(DIRECTORY).join(segment::file_name(4));
    std::fs::write(&stray, &segment::header()[..5]).expect("write");
    let wal = open(dir.path(), None);
    assert_eq!(indices(&wal), vec![1, 2, 3]);
    assert!(!stray.exists());
    wal.append([entry(1, 4, 10)]).expect("append");
}

#[test]
fn a_segment_of_another_format_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    written(dir.path(), 1..=3, 10);
    let only = segment_path(dir.path(), true);
    let mut bytes = std::fs::read(&only).expect("read");
    bytes[8] = 9;
    std::fs::write(&only, bytes).expect("write");
    let error = Wal::open_with_segments_of(dir.path(), None, SMALL_SEGMENTS)
        .err()
        .expect("refused");
    assert!(error.to_string().contains("format 9"), "{error}");
}

#[test]
fn a_flipped_bit_in_synced_records_with_later_writes_after_it_refuses_to_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let wal = Wal::open_with_segments_of(dir.path(), None, 1 << 20).expect("opens");
        wal.append((1..=10).map(|i| entry(1, i, 100)))
            .expect("append");
        wal.sync().expect("sync");
        // Written after the sync: their durable marks vouch for 1..=10.
        wal.append((11..=12).map(|i| entry(1, i, 100)))
            .expect("append");
    }
    let only = segment_path(dir.path(), true);
    let mut bytes = std::fs::read(&only).expect("read");
    // Inside the first record's payload: acknowledged, and records follow
    // whose marks say so.
    bytes[segment::HEADER_BYTES as usize + 30] ^= 0x01;
    std::fs::write(&only, bytes).expect("write");
    let error = Wal::open_with_segments_of(dir.path(), None, 1 << 20)
        .err()
        .expect("refused");
    assert!(
        error
            .to_string()
            .contains("intact records written after it had been synced follow"),
        "{error}"
    );
}

/// The offset of entry `index`'s record in the only segment of `dir`.
fn record_offset(dir: &Path, index: u64) -> u64 {
    let only = segment_path(dir, true);
    let file = File::open(&only).expect("open");
    let scan = segment::scan(&file, &only).expect("scan");
    scan.records
        .iter()
        .find(|r| r.log_id.index == index)
        .map(|r| r.offset)
        .expect("the record")
}

#[test]
fn a_record_torn_inside_unsynced_writes_is_cut_with_the_records_written_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let wal = Wal::open_with_segments_of(dir.path(), None, 1 << 20).expect("opens");
        wal.append((1..=5).map(|i| entry(1, i, 100)))
            .expect("append");
        wal.sync().expect("sync");
        // One group commit's worth of appends, never synced.
        wal.append((6..=7).map(|i| entry(1, i, 100)))
            .expect("append");
        wal.append((8..=9).map(|i| entry(1, i, 100)))
            .expect("append");
    }
    // The crash kept 8 and 9 but tore 7 (the disk wrote the pages out of order).
    let at = record_offset(dir.path(), 7) as usize + 40;
    let only = segment_path(dir.path(), true);
    let mut bytes = std::fs::read(&only).expect("read");
    bytes[at..at + 32].fill(0);
    std::fs::write(&only, bytes).expect("write");
    let wal = Wal::open_with_segments_of(dir.path(), None, 1 << 20).expect("the log opens");
    assert_eq!(indices(&wal), (1..=6).collect::<Vec<_>>());
    wal.append([entry(1, 7, 100)])
        .expect("the log continues where it was cut");
    wal.sync().expect("sync");
    drop(wal);
    assert_eq!(
        indices(&Wal::open_with_segments_of(dir.path(), None, 1 << 20).expect("opens")),
        (1..=7).collect::<Vec<_>>()
    );
}

#[test]
fn a_segment_of_format_1_is_read_and_new_entries_go_to_a_new_segment() {
    let dir = tempfile::tempdir().expect("tempdir");
    drop(open(dir.path(), None));
    // Entries 1..=3 as format 1 wrote them: length, CRC of length and payload.
    let mut bytes = segment::header().to_vec();
    bytes[8..12].copy_from_slice(&segment::VERSION_WITHOUT_MARKS.to_le_bytes());
    for index in 1..=3 {
        let payload = postcard::to_stdvec(&entry(1, index, 50)).expect("encodes");
        let length = (payload.len() as u32).to_le_bytes();
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&length);
        hasher.update(&payload);
        bytes.extend_from_slice(&length);
        bytes.extend_from_slice(&hasher.finalize().to_le_bytes());
        bytes.extend_from_slice(&payload);
    }
    std::fs::write(
        dir.path().join(DIRECTORY).join(segment::file_name(1)),
        bytes,
    )
    .expect("write");
    let wal = open(dir.path(), None);
    assert_eq!(indices(&wal), vec![1, 2, 3]);
    wal.append([entry(1, 4, 50)]).expect("append");
    wal.sync().expect("sync");
    drop(wal);
    assert_eq!(
        segments(dir.path()),
        vec![segment::file_name(1), segment::file_name(4)]
    );
    assert_eq!(indices(&open(dir.path(), None)), vec![1, 2, 3, 4]);
}

#[test]
fn terms_never_go_back_on_append_or_on_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = open(dir.path(), None);
    wal.append([entry(2, 1, 10)]).expect("append");
    let refused = wal.append([entry(1, 2, 10)]).expect_err("refused");
    assert!(
        refused.to_string().contains("terms never go back"),
        "{refused}"
    );
    assert_eq!(indices(&wal), vec![1]);
    drop(wal);
    // A segment that holds a term going back (written by hand: the log never
    // writes one) is refused at open.
    let other = tempfile::tempdir().expect("tempdir");
    drop(open(other.path(), None));
    let mut bytes = segment::header().to_vec();
    for (term, index) in [(2, 1), (1, 2)] {
        let payload = postcard::to_stdvec(&entry(term, index, 10)).expect("encodes");
        segment::encode_record(&payload, 0, &mut bytes);
    }
    std::fs::write(
        other.path().join(DIRECTORY).join(segment::file_name(1)),
        bytes,
    )
    .expect("write");
    let error = Wal::open_with_segments_of(other.path(), None, SMALL_SEGMENTS)
        .err()
        .expect("refused");
    assert!(error.to_string().contains("has term"), "{error}");
}

#[test]
fn a_last_record_whose_blocks_never_reached_the_disk_is_cut_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    written(dir.path(), 1..=3, 100);
    let newest = segment_path(dir.path(), true);
    let mut bytes = std::fs::read(&newest).expect("read");
    // The file's length made it, the last record's last bytes did not.
    let length = bytes.len();
    bytes[length - 30..].fill(0);
    std::fs::write(&newest, bytes).expect("write");
    assert_eq!(indices(&open(dir.path(), None)), vec![1, 2]);
}

#[test]
fn an_empty_newest_segment_under_a_name_the_log_does_not_continue_at_is_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log_dir = dir.path().join(DIRECTORY);
    {
        // A log of nothing but an empty segment named 5: the first append (1)
        // goes into a segment of its own name.
        drop(open(dir.path(), None));
        std::fs::write(log_dir.join(segment::file_name(5)), segment::header()).expect("write");
        let wal = open(dir.path(), None);
        wal.append((1..=3).map(|i| entry(1, i, 10)))
            .expect("append");
        wal.sync().expect("sync");
    }
    assert_eq!(indices(&open(dir.path(), None)), vec![1, 2, 3]);
    // Entries 1..3, then an empty segment named 10 (made for entries a crash
    // lost): it goes at open, and the log continues at 4.
    std::fs::write(log_dir.join(segment::file_name(10)), segment::header()).expect("write");
    let wal = open(dir.path(), None);
    assert!(!log_dir.join(segment::file_name(10)).exists());
    wal.append((4..=6).map(|i| entry(1, i, 10)))
        .expect("append");
    wal.sync().expect("sync");
    drop(wal);
    assert_eq!(
        indices(&open(dir.path(), None)),
        (1..=6).collect::<Vec<_>>()
    );
}

#[test]
fn segments_wholly_below_the_purge_point_are_deleted_unread() {
    let dir = tempfile::tempdir().expect("tempdir");
    written(dir.path(), 1..=40, 300);
    let oldest = segment_path(dir.path(), false);
    // Damage that a purge made irrelevant (the crash came before the delete).
    std::fs::write(&oldest, b"not a segment at all").expect("write");
    let wal = open(dir.path(), Some(30));
    assert_eq!(indices(&wal), (31..=40).collect::<Vec<_>>());
    assert!(!oldest.exists());
}

/// One step of the model test.
#[derive(Debug, Clone)]
enum Op {
    Append {
        count: u64,
        bytes: usize,
    },
    Truncate {
        back: u64,
    },
    Purge {
        forward: u64,
    },
    /// Sync, then close and open again.
    Reopen,
    /// Sync (acknowledging what is written so far).
    Sync,
    /// Power cut: the newest segment keeps what its last sync made durable and
    /// any part of what was written after (`kept` of it), the rest of its
    /// length as zeros (`zeros`) or gone; a segment created since the last
    /// sync may vanish (`lose_new`). Then open again.
    Crash {
        kept: f64,
        zeros: bool,
        lose_new: bool,
    },
    /// A sync fails (the disk reported an I/O error): the log refuses every
    /// further write, and the process goes down; what the disk kept of the
    /// writes since the last good sync is as after a power cut (`kept`,
    /// `zeros`). Then open again.
    FailedSync {
        kept: f64,
        zeros: bool,
    },
    /// Power cut that persisted the unsynced writes out of order: the first
    /// `lost` of what the newest segment took since its last sync never
    /// reached the disk (zeros), the rest did. Then open again.
    CrashOutOfOrder {
        lost: f64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u64..12, 1usize..900).prop_map(|(count, bytes)| Op::Append { count, bytes }),
        1 => (0u64..10).prop_map(|back| Op::Truncate { back }),
        1 => (0u64..14).prop_map(|forward| Op::Purge { forward }),
        1 => Just(Op::Reopen),
        1 => Just(Op::Sync),
        2 => (0.0f64..1.0, any::<bool>(), any::<bool>())
            .prop_map(|(kept, zeros, lose_new)| Op::Crash { kept, zeros, lose_new }),
        1 => (0.0f64..1.0).prop_map(|lost| Op::CrashOutOfOrder { lost }),
        1 => (0.0f64..1.0, any::<bool>()).prop_map(|(kept, zeros)| Op::FailedSync { kept, zeros }),
    ]
}

/// The newest segment file and its length.
fn newest_segment(dir: &Path) -> Option<(PathBuf, u64)> {
    let name = segments(dir).pop()?;
    let path = dir.join(DIRECTORY).join(name);
    let length = std::fs::metadata(&path).expect("metadata").len();
    Some((path, length))
}

/// What a power cut leaves of the newest segment (see [`Op::Crash`]).
fn cut_power(dir: &Path, synced: &Option<(PathBuf, u64)>, kept: f64, zeros: bool, lose_new: bool) {
    let Some((path, length)) = newest_segment(dir) else {
        return;
    };
    let durable = match synced {
        Some((synced_path, synced_len)) if *synced_path == path => *synced_len,
        // Created since the last sync: nothing of it need have survived.
        _ if lose_new => {
            std::fs::remove_file(&path).expect("remove");
            return;
        }
        _ => 0,
    };
    let keep = durable + ((length - durable) as f64 * kept) as u64;
    let file = OpenOptions::new().write(true).open(&path).expect("open");
    file.set_len(keep).expect("cut");
    if zeros {
        file.set_len(length).expect("zeros");
    }
}

/// What a power cut that persisted writes out of order leaves of the newest
/// segment (see [`Op::CrashOutOfOrder`]).
fn cut_power_out_of_order(dir: &Path, synced: &Option<(PathBuf, u64)>, lost: f64) {
    let Some((path, length)) = newest_segment(dir) else {
        return;
    };
    let durable = match synced {
        Some((synced_path, synced_len)) if *synced_path == path => *synced_len,
        _ => segment::HEADER_BYTES,
    };
    let hole = ((length - durable) as f64 * lost) as usize;
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[durable as usize..durable as usize + hole].fill(0);
    std::fs::write(&path, bytes).expect("write");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_log_holds_what_a_map_would_across_reopening_and_power_cuts(
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut wal = open(dir.path(), None);
        let mut model: BTreeMap<u64, Entry> = BTreeMap::new();
        let mut purged: Option<u64> = None;
        let mut next = 1u64;
        let mut term = 1u64;
        // The entries and the newest segment's length at the last sync.
        let mut acknowledged: BTreeMap<u64, Entry> = BTreeMap::new();
        let mut synced_newest: Option<(PathBuf, u64)> = None;
        // A power cut is simulated only where the last sync is all it can fall
        // back to: with no truncation or purge since (those sync themselves).
        let mut reshaped_since_sync = false;
        for op in ops {
            let sync_point = matches!(op, Op::Sync | Op::Reopen)
                || matches!(
                    op,
                    Op::Crash { .. } | Op::CrashOutOfOrder { .. } | Op::FailedSync { .. }
                ) && reshaped_since_sync;
            if sync_point {
                wal.sync().expect("sync");
                acknowledged = model.clone();
                synced_newest = newest_segment(dir.path());
                reshaped_since_sync = false;
            }
            match op {
                Op::Append { count, bytes } => {
                    let entries: Vec<Entry> =
                        (next..next + count).map(|i| entry(term, i, bytes)).collect();
                    wal.append(entries.clone()).expect("append");
                    for e in entries {
                        model.insert(e.log_id.index, e);
                    }
                    next += count;
                }
                Op::Truncate { back } => {
                    let first = purged.map_or(1, |p| p + 1);
                    let at = next.saturating_sub(back).max(first);
                    wal.truncate(at).expect("truncate");
                    model.retain(|i, _| *i < at);
                    next = at;
                    term += 1;
                    reshaped_since_sync = true;
                }
                Op::Purge { forward } => {
                    let to = purged.unwrap_or(0) + forward;
                    purge(&wal, to);
                    model.retain(|i, _| *i > to);
                    purged = Some(to);
                    next = next.max(to + 1);
                    reshaped_since_sync = true;
                }
                Op::Sync => {}
                Op::Reopen => {
                    drop(wal);
                    wal = open(dir.path(), purged);
                }
                Op::Crash { .. } | Op::CrashOutOfOrder { .. } | Op::FailedSync { .. } => {
                    if matches!(op, Op::FailedSync { .. }) {
                        // A failed sync acknowledges nothing, and the log
                        // refuses every write after it.
                        wal.fail_next_sync();
                        prop_assert!(wal.sync().is_err(), "an injected sync failure succeeded");
                        prop_assert!(
                            wal.append(vec![entry(term, next, 16)]).is_err(),
                            "an append after a failed sync was accepted"
                        );
                        prop_assert!(wal.sync().is_err(), "a sync after a failed one succeeded");
                    }
                    drop(wal);
                    match op {
                        Op::FailedSync { kept, zeros } => {
                            cut_power(dir.path(), &synced_newest, kept, zeros, false);
                        }
                        Op::Crash { kept, zeros, lose_new } => {
                            cut_power(dir.path(), &synced_newest, kept, zeros, lose_new);
                        }
                        Op::CrashOutOfOrder { lost } => {
                            cut_power_out_of_order(dir.path(), &synced_newest, lost);
                        }
                        _ => {}
                    }
                    wal = open(dir.path(), purged);
                    let survived: BTreeMap<u64, Entry> = wal
                        .read(0, u64::MAX)
                        .expect("read")
                        .into_iter()
                        .map(|e| (e.log_id.index, e))
                        .collect();
                    // Everything acknowledged survived; anything more is what
                    // was written (the reads below check there is no hole).
                    for (index, entry) in &acknowledged {
                        prop_assert_eq!(survived.get(index), Some(entry), "lost {}", index);
                    }
                    for (index, entry) in &survived {
                        prop_assert_eq!(model.get(index), Some(entry), "invented {}", index);
                    }
                    model = survived;
                    next = model
                        .keys()
                        .next_back()
                        .map_or(purged.map_or(1, |p| p + 1), |last| last + 1);
                    wal.sync().expect("sync");
                    acknowledged = model.clone();
                    synced_newest = newest_segment(dir.path());
                }
            }
            let held = wal.read(0, u64::MAX).expect("read");
            let expected: Vec<Entry> = model.values().cloned().collect();
            prop_assert_eq!(held, expected);
        }
    }
}
