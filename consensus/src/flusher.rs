//! The one place that makes writes durable: a dedicated thread that
//! `fdatasync`s the Raft log's segments ([`Wal::sync`]) for appends and
//! truncations, and for everything in sled (vote, purge point, snapshot) calls
//! sled's blocking `Db::flush` (never `flush_async`, which deadlocks when called
//! concurrently in sled 0.34.7), then `fdatasync`s sled's data file. Requests
//! that arrive while a sync runs are answered by the next one, so concurrent
//! appends share fsyncs (group commit).
//!
//! The `fdatasync` of sled's file is ours because sled 0.34 on Linux makes its
//! writes "stable" with `sync_file_range` only: that survives a killed process
//! but neither flushes the drive's write cache nor records the file's new
//! length, so a power cut could lose what it wrote past the old end of the file.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

use openraft::storage::LogFlushed;
use tokio::sync::oneshot;

use crate::types::TypeConfig;
use crate::wal::Wal;

/// The file in a sled 0.34 directory that holds its log and pages.
const SLED_DATA_FILE: &str = "db";

/// Something waiting for durability.
enum Waiter {
    /// openraft's append callback: the log's segments.
    Append(LogFlushed<TypeConfig>),
    /// A task awaiting the log's segments (truncation).
    Log(oneshot::Sender<Result<(), String>>),
    /// A task awaiting sled (vote, purge point, snapshot).
    Database(oneshot::Sender<Result<(), String>>),
}

impl Waiter {
    fn needs_log(&self) -> bool {
        matches!(self, Waiter::Append(_) | Waiter::Log(_))
    }
}

/// Counters of the flusher, for metrics and benchmarks.
#[derive(Debug, Default)]
pub struct FlushStats {
    /// fsyncs performed.
    pub flushes: AtomicU64,
    /// Requests answered (one fsync answers many when writes are concurrent).
    pub requests: AtomicU64,
    /// Time spent in fsync, microseconds.
    pub micros: AtomicU64,
}

/// Handle to the flusher thread. Dropping it stops and joins the thread.
pub struct Flusher {
    sender: Option<mpsc::Sender<Waiter>>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<FlushStats>,
    /// Set once the thread (and with it its database handle) is gone.
    closed: tokio::sync::watch::Sender<bool>,
}

impl Flusher {
    /// Starts the thread for `db`, which was opened in `dir`, and `wal`.
    pub fn start(db: sled::Db, dir: &Path, wal: Arc<Wal>) -> std::io::Result<Self> {
        let path = dir.join(SLED_DATA_FILE);
        let data_file = std::fs::File::open(&path).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "sled's data file {} cannot be opened to fsync it: {e}",
                    path.display()
                ),
            )
        })?;
        let (sender, receiver) = mpsc::channel::<Waiter>();
        let stats = Arc::new(FlushStats::default());
        let thread_stats = Arc::clone(&stats);
        let thread = std::thread::Builder::new()
            .name("corral-fsync".into())
            .spawn(move || run(&db, &data_file, &wal, &receiver, &thread_stats))?;
        let closed = tokio::sync::watch::channel(false).0;
        Ok(Flusher {
            sender: Some(sender),
            thread: Some(thread),
            stats,
            closed,
        })
    }

    /// Becomes true when the flusher has stopped: by then every store that shared
    /// it has been dropped, so the database can be opened again.
    pub fn closed(&self) -> tokio::sync::watch::Receiver<bool> {
        self.closed.subscribe()
    }

    /// Queues openraft's append callback; it fires once the log's segments
    /// are synced.
    pub fn after_log_sync(&self, callback: LogFlushed<TypeConfig>) {
        self.send(Waiter::Append(callback));
    }

    /// Waits until everything written to the log's segments so far is durable.
    pub async fn sync_log(&self) -> Result<(), String> {
        let (done, wait) = oneshot::channel();
        self.send(Waiter::Log(done));
        Self::answer_of(wait).await
    }

    /// Waits until everything written to sled so far is durable.
    pub async fn flush(&self) -> Result<(), String> {
        let (done, wait) = oneshot::channel();
        self.send(Waiter::Database(done));
        Self::answer_of(wait).await
    }

    async fn answer_of(wait: oneshot::Receiver<Result<(), String>>) -> Result<(), String> {
        wait.await
            .map_err(|_| "the flusher thread stopped".to_string())?
    }

    fn send(&self, waiter: Waiter) {
        let undelivered = match &self.sender {
            Some(sender) => sender.send(waiter).err().map(|e| e.0),
            None => Some(waiter),
        };
        if let Some(waiter) = undelivered {
            answer(waiter, Err("the flusher thread stopped".to_string()));
        }
    }

    /// Counters.
    pub fn stats(&self) -> &FlushStats {
        &self.stats
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.sender.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.closed.send_replace(true);
    }
}

fn run(
    db: &sled::Db,
    data_file: &std::fs::File,
    wal: &Wal,
    receiver: &mpsc::Receiver<Waiter>,
    stats: &FlushStats,
) {
    while let Ok(first) = receiver.recv() {
        let mut batch = vec![first];
        batch.extend(receiver.try_iter());
        let started = std::time::Instant::now();
        let (log, database) = batch
            .iter()
            .fold((false, false), |(l, d), w| (l || w.needs_log(), d || !w.needs_log()));
        let log_result = if log {
            wal.sync().map_err(|e| e.to_string())
        } else {
            Ok(())
        };
        let database_result = if database {
            db.flush()
                .map_err(|e| e.to_string())
                .and_then(|_| data_file.sync_data().map_err(|e| format!("fdatasync: {e}")))
        } else {
            Ok(())
        };
        stats
            .micros
            .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        stats.flushes.fetch_add(1, Ordering::Relaxed);
        stats
            .requests
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        for waiter in batch {
            let result = if waiter.needs_log() {
                log_result.clone()
            } else {
                database_result.clone()
            };
            answer(waiter, result);
        }
    }
}

fn answer(waiter: Waiter, result: Result<(), String>) {
    match waiter {
        Waiter::Append(callback) => {
            callback.log_io_completed(result.map_err(std::io::Error::other))
        }
        Waiter::Log(done) | Waiter::Database(done) => {
            let _ = done.send(result);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_flush_syncs_sleds_data_file_and_counts_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = crate::open_database(dir.path()).expect("database");
        let wal = Arc::new(Wal::open(dir.path(), None).expect("log"));
        let flusher = Flusher::start(db.clone(), dir.path(), wal).expect("flusher");
        db.insert(b"k", b"v".to_vec()).expect("insert");
        flusher.flush().await.expect("durable");
        assert_eq!(flusher.stats().flushes.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_directory_without_sleds_data_file_is_refused_by_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::Config::new()
            .temporary(true)
            .open()
            .expect("temporary sled");
        let wal = Arc::new(Wal::open(dir.path(), None).expect("log"));
        let error = Flusher::start(db, dir.path(), wal)
            .err()
            .expect("no data file to fsync");
        assert!(error.to_string().contains("data file"), "{error}");
        assert!(error.to_string().contains(SLED_DATA_FILE), "{error}");
    }
}
