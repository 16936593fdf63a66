//! The one place that makes writes durable: two threads, each answering
//! everyone who waited while its previous sync ran with one sync (group
//! commit). One `fdatasync`s the Raft log's segments ([`Wal::sync`]) for
//! appends and truncations; the other makes sled durable (vote, purge point)
//! with sled's blocking `Db::flush` (never `flush_async`, which deadlocks when
//! called concurrently in sled 0.34.7) and then an `fdatasync` of sled's data
//! file. They are apart so that a sled flush (which writes whatever sled has
//! buffered) never holds up the log's appends. Snapshots are files of their
//! own, made durable by the state machine (`crate::snapshot_file`).
//!
//! A sync that a stalled disk holds up is said while it waits, once a second
//! past [`STALLED_AFTER`] ([`StallWatch`], a thread beside each sync thread
//! that sleeps until a sync starts or its time is up), not only when it ends:
//! at 3 a.m. "the disk has held up writes for 6 s" is news, "it did" is history.
//!
//! The `fdatasync` of sled's file is ours because sled 0.34 on Linux makes its
//! writes "stable" with `sync_file_range` only: that survives a killed process
//! but neither flushes the drive's write cache nor records the file's new
//! length, so a power cut could lose what it wrote past the old end of the file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use openraft::storage::LogFlushed;
use tokio::sync::oneshot;

use crate::types::TypeConfig;
use crate::wal::Wal;

/// The file in a sled 0.34 directory that holds its log and pages.
const SLED_DATA_FILE: &str = "db";

/// A sync this slow is logged: it holds up every write waiting on it, and one
/// as long as a heartbeat interval delays Raft's answers into timeouts.
const SLOW_SYNC: Duration = Duration::from_millis(20);

/// Something waiting for a sync.
enum Waiter {
    /// openraft's append callback.
    Append(LogFlushed<TypeConfig>),
    /// A task.
    Task(oneshot::Sender<Result<(), String>>),
    /// Files to delete once what was written before is durable.
    Remove(Vec<PathBuf>),
}

/// Counters of one sync thread, for metrics and benchmarks.
#[derive(Debug, Default)]
pub struct FlushStats {
    /// Syncs performed.
    pub flushes: AtomicU64,
    /// Requests answered (one sync answers many when writes are concurrent).
    pub requests: AtomicU64,
    /// Time spent syncing, microseconds.
    pub micros: AtomicU64,
}

/// One thread that runs `sync` for whoever waits, many at a time.
/// A sync running this long is said to be waiting for the disk, and again
/// every [`STALLED_AFTER`] while it waits.
const STALLED_AFTER: Duration = Duration::from_secs(1);

/// The sync in progress, watched by a thread of its own.
#[derive(Default)]
struct StallWatch {
    state: Mutex<SyncInProgress>,
    changed: Condvar,
    /// How many times a stall was said.
    said: AtomicU64,
}

#[derive(Default)]
struct SyncInProgress {
    /// When the running sync began (none running: `None`).
    since: Option<Instant>,
    /// Counts syncs, so the watcher knows one ended and another began.
    number: u64,
    /// The sync thread stopped.
    stopped: bool,
}

impl StallWatch {
    fn lock(&self) -> std::sync::MutexGuard<'_, SyncInProgress> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn begin(&self) {
        let mut state = self.lock();
        state.since = Some(Instant::now());
        state.number += 1;
        self.changed.notify_all();
    }

    fn end(&self) {
        self.lock().since = None;
        self.changed.notify_all();
    }

    fn stop(&self) {
        self.lock().stopped = true;
        self.changed.notify_all();
    }

    /// Sleeps until a sync begins; while one runs past [`STALLED_AFTER`],
    /// says so every [`STALLED_AFTER`]; returns when the sync thread stopped.
    fn watch(&self, name: &str) {
        let mut state = self.lock();
        loop {
            while state.since.is_none() && !state.stopped {
                state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            if state.stopped {
                return;
            }
            let (number, since) = (state.number, state.since.unwrap_or_else(Instant::now));
            let mut due = since + STALLED_AFTER;
            while state.number == number && state.since.is_some() && !state.stopped {
                let now = Instant::now();
                if now >= due {
                    tracing::warn!(
                        thread = name,
                        waited_ms = since.elapsed().as_millis() as u64,
                        "slow sync: the disk has held up writes for {:.1} s and still does",
                        since.elapsed().as_secs_f64()
                    );
                    self.said.fetch_add(1, Ordering::Relaxed);
                    due += STALLED_AFTER;
                    continue;
                }
                state = self
                    .changed
                    .wait_timeout(state, due - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
    }
}

struct SyncThread {
    sender: Option<mpsc::Sender<Waiter>>,
    thread: Option<JoinHandle<()>>,
    watch: Arc<StallWatch>,
    watcher: Option<JoinHandle<()>>,
    stats: Arc<FlushStats>,
}

impl SyncThread {
    fn start(
        (name, store): (&str, &'static str),
        sync: impl Fn() -> Result<(), String> + Send + 'static,
    ) -> std::io::Result<Self> {
        let (sender, receiver) = mpsc::channel::<Waiter>();
        let stats = Arc::new(FlushStats::default());
        let thread_stats = Arc::clone(&stats);
        let watch = Arc::new(StallWatch::default());
        let thread_watch = Arc::clone(&watch);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || run(&sync, &receiver, (&thread_stats, store), &thread_watch))?;
        let watcher_watch = Arc::clone(&watch);
        let watched = name.to_string();
        let watcher = std::thread::Builder::new()
            .name(format!("{name}-watch"))
            .spawn(move || watcher_watch.watch(&watched))?;
        Ok(SyncThread {
            sender: Some(sender),
            thread: Some(thread),
            watch,
            watcher: Some(watcher),
            stats,
        })
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

    async fn wait(&self) -> Result<(), String> {
        let (done, wait) = oneshot::channel();
        self.send(Waiter::Task(done));
        wait.await
            .map_err(|_| "the flusher thread stopped".to_string())?
    }

    /// Stops the thread once it has answered everyone queued.
    fn stop(&mut self) {
        self.sender.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.watch.stop();
        if let Some(watcher) = self.watcher.take() {
            let _ = watcher.join();
        }
    }
}

/// Handle to the sync threads. Dropping it stops and joins them.
pub struct Flusher {
    log: SyncThread,
    database: SyncThread,
    /// Set once the threads (and with them the database handle) are gone.
    closed: tokio::sync::watch::Sender<bool>,
    /// Tests: the log's syncs wait until then, as on a disk that holds writes.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    log_hold: Arc<Mutex<Option<Instant>>>,
}

impl Flusher {
    /// Starts the threads for `db`, which was opened in `dir`, and `wal`.
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
        let log_hold = Arc::new(Mutex::new(None));
        let held = Arc::clone(&log_hold);
        let log = SyncThread::start(("corral-log-sync", "log"), move || {
            hold_while(&held);
            wal.sync().map_err(|e| e.to_string())
        })?;
        let database = SyncThread::start(("corral-db-sync", "database"), move || {
            db.flush()
                .map_err(|e| e.to_string())
                .and_then(|_| data_file.sync_data().map_err(|e| format!("fdatasync: {e}")))
        })?;
        let closed = tokio::sync::watch::channel(false).0;
        Ok(Flusher {
            log,
            database,
            closed,
            log_hold,
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
        self.log.send(Waiter::Append(callback));
    }

    /// Waits until everything written to the log's segments so far is durable.
    pub async fn sync_log(&self) -> Result<(), String> {
        self.log.wait().await
    }

    /// Waits until everything written to sled so far is durable.
    pub async fn flush(&self) -> Result<(), String> {
        self.database.wait().await
    }

    /// Deletes `paths` after the next sled sync succeeds (they must not go
    /// before something written to sled is durable), without waiting for it.
    pub fn remove_after_database_sync(&self, paths: Vec<PathBuf>) {
        if !paths.is_empty() {
            self.database.send(Waiter::Remove(paths));
        }
    }

    /// Tests: every sync of the log waits until `until` has passed, as on a
    /// disk that holds writes (openraft's core waits for them).
    #[cfg(feature = "testkit")]
    pub fn hold_log_syncs(&self, until: Instant) {
        *self.log_hold.lock().unwrap_or_else(|p| p.into_inner()) = Some(until);
    }

    /// Counters of the log's syncs (the ones on every write's path).
    pub fn stats(&self) -> &FlushStats {
        &self.log.stats
    }

    /// Counters of sled's flushes.
    pub fn database_stats(&self) -> &FlushStats {
        &self.database.stats
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.log.stop();
        self.database.stop();
        self.closed.send_replace(true);
    }
}

fn run(
    sync: &dyn Fn() -> Result<(), String>,
    receiver: &mpsc::Receiver<Waiter>,
    (stats, store): (&FlushStats, &'static str),
    watch: &StallWatch,
) {
    while let Ok(first) = receiver.recv() {
        let mut batch = vec![first];
        batch.extend(receiver.try_iter());
        let started = Instant::now();
        watch.begin();
        let result = sync();
        watch.end();
        let took = started.elapsed();
        if took >= SLOW_SYNC {
            tracing::warn!(
                thread = std::thread::current().name().unwrap_or("sync"),
                took_ms = took.as_millis() as u64,
                waiting = batch.len(),
                "slow sync: the disk held up writes"
            );
        }
        crate::instruments::sync_duration().record(
            took.as_secs_f64() * 1000.0,
            &[opentelemetry::KeyValue::new("store", store)],
        );
        stats
            .micros
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
        stats.flushes.fetch_add(1, Ordering::Relaxed);
        stats
            .requests
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        // Deletions last: nobody waits for them.
        batch.sort_by_key(|waiter| matches!(waiter, Waiter::Remove(_)));
        for waiter in batch {
            answer(waiter, result.clone());
        }
    }
    // Stopping: one more sync, so what was written without a waiter (the
    // committed index) is durable and sled's own drop finds nothing left to
    // write (a write it started there could outlive the last handle for a
    // moment and keep the directory locked against reopening).
    if let Err(e) = sync() {
        tracing::warn!("the last sync before stopping failed: {e}");
    }
}

/// Sleeps while a test holds the syncs (never outside tests: nothing else
/// sets a hold).
fn hold_while(hold: &Mutex<Option<Instant>>) {
    let until = *hold.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(wait) = until.and_then(|until| until.checked_duration_since(Instant::now())) {
        std::thread::sleep(wait);
    }
}

fn answer(waiter: Waiter, result: Result<(), String>) {
    match waiter {
        Waiter::Append(callback) => {
            callback.log_io_completed(result.map_err(std::io::Error::other))
        }
        Waiter::Task(done) => {
            let _ = done.send(result);
        }
        Waiter::Remove(paths) => match result {
            Ok(()) => {
                for path in paths {
                    if let Err(e) = std::fs::remove_file(&path) {
                        tracing::warn!("could not delete {}: {e}", path.display());
                    }
                }
            }
            // Kept: the write they waited on may not be durable.
            Err(e) => tracing::warn!("kept {} files: the sync failed: {e}", paths.len()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sync held up past a second is said while it waits, once a second,
    /// and no more once it ended; the watcher stops with its sync thread.
    #[test]
    fn a_stalled_sync_is_said_while_it_waits() {
        let watch = Arc::new(StallWatch::default());
        let watcher = {
            let watch = Arc::clone(&watch);
            std::thread::spawn(move || watch.watch("test-sync"))
        };
        watch.begin();
        let deadline = Instant::now() + Duration::from_secs(20);
        while watch.said.load(Ordering::Relaxed) < 2 {
            assert!(Instant::now() < deadline, "the stall was never said");
            std::thread::sleep(Duration::from_millis(10));
        }
        watch.end();
        let said = watch.said.load(Ordering::Relaxed);
        // A short sync is not a stall.
        watch.begin();
        watch.end();
        watch.stop();
        watcher.join().expect("the watcher stops");
        assert!(watch.said.load(Ordering::Relaxed) <= said + 1);
    }

    #[tokio::test]
    async fn a_flush_syncs_sleds_data_file_and_counts_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = crate::open_database(dir.path()).expect("database");
        let wal = Arc::new(Wal::open(dir.path(), None).expect("log"));
        let flusher = Flusher::start(db.clone(), dir.path(), wal).expect("flusher");
        db.insert(b"k", b"v".to_vec()).expect("insert");
        flusher.flush().await.expect("durable");
        assert_eq!(flusher.database_stats().flushes.load(Ordering::Relaxed), 1);
        assert_eq!(flusher.stats().flushes.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn files_queued_for_removal_go_once_sled_has_synced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = crate::open_database(dir.path()).expect("database");
        let wal = Arc::new(Wal::open(dir.path(), None).expect("log"));
        let flusher = Flusher::start(db, dir.path(), wal).expect("flusher");
        let doomed: Vec<_> = (0..3)
            .map(|i| dir.path().join(format!("old-{i}")))
            .collect();
        for path in &doomed {
            std::fs::write(path, b"purged entries").expect("write");
        }
        flusher.remove_after_database_sync(doomed.clone());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while doomed.iter().any(|p| p.exists()) {
            assert!(std::time::Instant::now() < deadline, "files never removed");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert!(flusher.database_stats().flushes.load(Ordering::Relaxed) >= 1);
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
