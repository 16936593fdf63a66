//! Whether this replica's Raft core is answering, measured from outside it.
//!
//! openraft 0.9's core waits for the fsync of every append it makes
//! (`append_to_log` awaits the flush callback), so while the disk holds a sync
//! the core does nothing else: a leader sends no heartbeats and reads no
//! answers, a follower answers no AppendEntries. A task asks the core a
//! trivial question every [`PROBE_EVERY`] and notes when it answered; the
//! [`crate::election::beacon`] vouches for a core held this way, and only for
//! as long as [`crate::RaftTiming::core_hold_limit`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::types::Raft;

/// How often the core is asked. The beacon starts speaking for a held core
/// within this (plus its own trigger), well inside the followers' lease.
pub const PROBE_EVERY: Duration = Duration::from_millis(50);

/// When the core last answered, shared by its readers.
#[derive(Clone)]
pub struct CoreWatch {
    /// The instant every reading counts from.
    origin: Instant,
    /// Microseconds after `origin` of the last answer.
    answered_us: Arc<AtomicU64>,
    /// Set once the core refused a probe: it stopped, and never answers again.
    stopped: Arc<AtomicBool>,
}

impl CoreWatch {
    /// A watch whose core answered just now (for a core that is not probed:
    /// see [`CoreWatch::answered`]).
    pub fn new() -> Self {
        CoreWatch {
            origin: Instant::now(),
            answered_us: Arc::new(AtomicU64::new(0)),
            stopped: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Starts probing `raft`'s core; the task ends when the core stops.
    pub fn start(raft: &Raft) -> Self {
        let watch = CoreWatch::new();
        let (probe, raft) = (watch.clone(), raft.clone());
        tokio::spawn(async move {
            let mut every = tokio::time::interval(PROBE_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                // Waits as long as the core is held: the answer's time is the
                // reading.
                if raft.with_raft_state(|_| ()).await.is_err() {
                    probe.stopped.store(true, Ordering::Relaxed);
                    return;
                }
                probe.answered(Instant::now());
            }
        });
        watch
    }

    /// Notes an answer at `at`.
    pub fn answered(&self, at: Instant) {
        let us = at.saturating_duration_since(self.origin).as_micros() as u64;
        self.answered_us.fetch_max(us, Ordering::Relaxed);
    }

    /// True once the core stopped (it refused a probe).
    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// How long ago, at `now`, the core last answered (forever, once it
    /// stopped).
    pub fn silent_for(&self, now: Instant) -> Duration {
        if self.stopped() {
            return Duration::MAX;
        }
        let answered =
            self.origin + Duration::from_micros(self.answered_us.load(Ordering::Relaxed));
        now.saturating_duration_since(answered)
    }

    /// True when the core answered within `limit` of `now`.
    pub fn answered_within(&self, now: Instant, limit: Duration) -> bool {
        self.silent_for(now) <= limit
    }
}

impl Default for CoreWatch {
    fn default() -> Self {
        CoreWatch::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_counts_from_the_latest_answer() {
        let watch = CoreWatch::new();
        let at = |ms: u64| watch.origin + Duration::from_millis(ms);
        assert_eq!(watch.silent_for(at(300)), Duration::from_millis(300));
        watch.answered(at(250));
        assert!(watch.answered_within(at(300), Duration::from_millis(50)));
        assert!(!watch.answered_within(at(301), Duration::from_millis(50)));
        // An older answer noted late changes nothing.
        watch.answered(at(100));
        assert_eq!(watch.silent_for(at(300)), Duration::from_millis(50));
        watch.stopped.store(true, Ordering::Relaxed);
        assert!(!watch.answered_within(at(300), Duration::from_secs(3600)));
    }
}
