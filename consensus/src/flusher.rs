//! The one place that makes writes durable: a dedicated thread that calls sled's
//! blocking `Db::flush` (never `flush_async`, which deadlocks when called
//! concurrently in sled 0.34.7). Requests that arrive while a flush runs are
//! answered by the next one, so concurrent appends share fsyncs (group commit).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

use openraft::storage::LogFlushed;
use tokio::sync::oneshot;

use crate::types::TypeConfig;

/// Something waiting for durability.
enum Waiter {
    /// openraft's append callback.
    Log(LogFlushed<TypeConfig>),
    /// A task awaiting a flush (vote, committed index, snapshot).
    Task(oneshot::Sender<Result<(), String>>),
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
    /// Starts the thread for `db`.
    pub fn start(db: sled::Db) -> std::io::Result<Self> {
        let (sender, receiver) = mpsc::channel::<Waiter>();
        let stats = Arc::new(FlushStats::default());
        let thread_stats = Arc::clone(&stats);
        let thread = std::thread::Builder::new()
            .name("corral-fsync".into())
            .spawn(move || run(&db, &receiver, &thread_stats))?;
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

    /// Queues openraft's callback; it fires after the next fsync.
    pub fn after_flush(&self, callback: LogFlushed<TypeConfig>) {
        self.send(Waiter::Log(callback));
    }

    /// Waits until everything written so far is durable.
    pub async fn flush(&self) -> Result<(), String> {
        let (done, wait) = oneshot::channel();
        self.send(Waiter::Task(done));
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

fn run(db: &sled::Db, receiver: &mpsc::Receiver<Waiter>, stats: &FlushStats) {
    while let Ok(first) = receiver.recv() {
        let mut batch = vec![first];
        batch.extend(receiver.try_iter());
        let started = std::time::Instant::now();
        let result = db.flush().map(|_| ()).map_err(|e| e.to_string());
        stats
            .micros
            .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        stats.flushes.fetch_add(1, Ordering::Relaxed);
        stats
            .requests
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        for waiter in batch {
            answer(waiter, result.clone());
        }
    }
}

fn answer(waiter: Waiter, result: Result<(), String>) {
    match waiter {
        Waiter::Log(callback) => callback.log_io_completed(result.map_err(std::io::Error::other)),
        Waiter::Task(done) => {
            let _ = done.send(result);
        }
    }
}
