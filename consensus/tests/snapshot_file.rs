//! The state machine's snapshot file: a built snapshot survives a reopen and is
//! sent from its file; a received snapshot that is not the one announced, or is
//! damaged, is refused and changes nothing; a snapshot an earlier build kept in
//! sled moves into the file; a reception begun while another is finishing does
//! not disturb it, and an abandoned one leaves no file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use corral_consensus::snapshot_file::{DIRECTORY, SnapshotDir};
use corral_consensus::state_machine::StateMachineStore;
use corral_consensus::storage::Storage;
use corral_consensus::types::{Entry, LogId, Proposal};
use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, EntryPayload, RaftSnapshotBuilder};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn log_id(index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(1, 1), index)
}

fn entry(index: u64) -> Entry {
    Entry {
        log_id: log_id(index),
        payload: EntryPayload::Normal(Proposal::new(&[mark(&format!("a{index}"))]).unwrap()),
    }
}

/// A store in `dir` that applied entries 1..=`last`.
async fn applied(dir: &std::path::Path, last: u64) -> StateMachineStore {
    let mut store = Storage::open(dir).unwrap().state;
    store.apply((1..=last).map(entry)).await.unwrap();
    store
}

fn digest(store: &StateMachineStore) -> corral_state::StateDigest {
    store.read(|state| state.digest()).unwrap()
}

async fn bytes_of(
    snapshot: &mut openraft::storage::Snapshot<corral_consensus::types::TypeConfig>,
) -> Vec<u8> {
    let mut bytes = Vec::new();
    snapshot.snapshot.read_to_end(&mut bytes).await.unwrap();
    bytes
}

/// A leader that applied 1..=`last` and built a snapshot, and that snapshot's
/// bytes as they travel.
struct Leader {
    _dir: tempfile::TempDir,
    store: StateMachineStore,
    meta: corral_consensus::snapshot_file::Meta,
    bytes: Vec<u8>,
}

async fn leader_snapshot(last: u64) -> Leader {
    let dir = tempfile::tempdir().unwrap();
    let mut store = applied(dir.path(), last).await;
    let mut sent = store.build_snapshot().await.unwrap();
    let bytes = bytes_of(&mut sent).await;
    Leader {
        _dir: dir,
        store,
        meta: sent.meta,
        bytes,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_built_snapshot_survives_a_reopen_and_is_sent_from_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let digest_before;
    {
        let mut store = applied(dir.path(), 20).await;
        digest_before = digest(&store);
        let mut built = store.build_snapshot().await.unwrap();
        assert_eq!(built.meta.last_log_id, Some(log_id(20)));
        let on_disk = std::fs::read(dir.path().join(DIRECTORY).join("current")).unwrap();
        assert_eq!(bytes_of(&mut built).await, on_disk);
        let mut current = store.get_current_snapshot().await.unwrap().unwrap();
        assert_eq!(current.meta, built.meta);
        assert_eq!(bytes_of(&mut current).await, on_disk);
        assert!(store.snapshot_disk_bytes() >= on_disk.len() as u64);
    }
    let store = Storage::open(dir.path()).unwrap().state;
    assert_eq!(store.last_applied(), Some(log_id(20)));
    assert_eq!(digest(&store), digest_before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_received_snapshot_that_is_not_the_one_announced_changes_nothing() {
    let leader = leader_snapshot(30).await;
    let good = &leader.bytes;

    let dir = tempfile::tempdir().unwrap();
    let mut follower = applied(dir.path(), 3).await;
    let before = digest(&follower);
    let snapshots = dir.path().join(DIRECTORY);

    // Announced at 31, holding 30; then the right position with a flipped bit
    // in the state.
    let mut wrong_meta = leader.meta.clone();
    wrong_meta.last_log_id = Some(log_id(31));
    let mut damaged = good.clone();
    let last = damaged.len() - 40;
    damaged[last] ^= 1;
    for (meta, bytes) in [(&wrong_meta, good), (&leader.meta, &damaged)] {
        let mut received = follower.begin_receiving_snapshot().await.unwrap();
        received.write_all(bytes).await.unwrap();
        let error = follower.install_snapshot(meta, received).await;
        assert!(error.is_err(), "a wrong snapshot was installed");
        assert_eq!(digest(&follower), before);
        assert_eq!(follower.last_applied(), Some(log_id(3)));
        assert!(follower.get_current_snapshot().await.unwrap().is_none());
        let left: Vec<_> = std::fs::read_dir(&snapshots).unwrap().collect();
        assert!(left.is_empty(), "a refused snapshot's file stays: {left:?}");
    }

    // The real one installs.
    let mut received = follower.begin_receiving_snapshot().await.unwrap();
    received.write_all(good).await.unwrap();
    follower
        .install_snapshot(&leader.meta, received)
        .await
        .unwrap();
    assert_eq!(follower.last_applied(), Some(log_id(30)));
    assert_eq!(digest(&follower), digest(&leader.store));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_an_earlier_build_kept_in_sled_moves_to_its_file() {
    // Builds before the snapshot file stored (meta, state encoding) under
    // `current` in sled tree `snapshot`.
    let source = tempfile::tempdir().unwrap();
    let mut store = applied(source.path(), 12).await;
    let built = store.build_snapshot().await.unwrap();
    let expected = digest(&store);
    let loaded = SnapshotDir::open(source.path())
        .unwrap()
        .load()
        .unwrap()
        .unwrap();
    let legacy = postcard::to_stdvec(&(&built.meta, loaded.state())).unwrap();
    drop((store, built, loaded));

    let dir = tempfile::tempdir().unwrap();
    {
        let db = corral_consensus::open_database(dir.path()).unwrap();
        db.open_tree("snapshot")
            .unwrap()
            .insert(b"current", legacy)
            .unwrap();
        db.flush().unwrap();
    }
    let storage = Storage::open(dir.path()).unwrap();
    assert_eq!(storage.state.last_applied(), Some(log_id(12)));
    assert_eq!(digest(&storage.state), expected);
    assert!(dir.path().join(DIRECTORY).join("current").exists());
    let tree = storage.db.open_tree("snapshot").unwrap();
    assert!(
        tree.get(b"current").unwrap().is_none(),
        "sled still holds it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_reception_leaves_a_finished_one_alone_and_an_abandoned_one_leaves_no_file() {
    let leader = leader_snapshot(8).await;
    let (bytes, sent) = (&leader.bytes, &leader);

    let dir = tempfile::tempdir().unwrap();
    let mut follower = applied(dir.path(), 2).await;
    let mut finished = follower.begin_receiving_snapshot().await.unwrap();
    finished.write_all(bytes).await.unwrap();
    // Another leader's transfer begins before the first is installed.
    let mut abandoned = follower.begin_receiving_snapshot().await.unwrap();
    abandoned.write_all(&bytes[..10]).await.unwrap();
    follower
        .install_snapshot(&sent.meta, finished)
        .await
        .unwrap();
    assert_eq!(follower.last_applied(), Some(log_id(8)));

    abandoned.shutdown().await.unwrap();
    drop(abandoned);
    let files: Vec<_> = std::fs::read_dir(dir.path().join(DIRECTORY))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files, vec![std::ffi::OsString::from("current")]);
}
