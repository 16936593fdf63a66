//! Purges do not wait for the disk, except one to or past the end of the log (a
//! snapshot installed ahead of it): the entries appended next start after a gap
//! that only a durable purge point explains.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::Ordering;

use corral_consensus::log_store::LogStore;
use corral_consensus::storage::Storage;
use openraft::storage::RaftLogStorage;
use openraft::{CommittedLeaderId, LogId};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_past_the_end_of_the_log_returns_once_the_purge_point_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(dir.path()).unwrap();
    let mut log = LogStore::open(
        &storage.db,
        Arc::clone(&storage.wal),
        Arc::clone(&storage.flusher),
    )
    .unwrap();
    let flushes = || {
        storage
            .flusher
            .database_stats()
            .flushes
            .load(Ordering::Relaxed)
    };
    let before = flushes();
    log.purge(LogId::new(CommittedLeaderId::new(3, 1), 5000))
        .await
        .unwrap();
    assert!(flushes() > before, "purge returned before sled synced");
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(5000));
    assert_eq!(state.last_log_id.map(|l| l.index), Some(5000));
}
