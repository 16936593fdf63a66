//! How many lines this process logged, by level, and how many of them the
//! repeat limit dropped: counted by [`crate::RepeatLimit`] as every enabled
//! event passes it, for the metrics (`corral_log_lines_total{level}`): a
//! daemon that floods its log shows in one glance, suppressed or not.

use std::sync::atomic::{AtomicU64, Ordering};

use tracing::Level;

/// The levels, most severe first, as metrics name them.
pub const LEVELS: [&str; 5] = ["error", "warn", "info", "debug", "trace"];

static LOGGED: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];
static SUPPRESSED: AtomicU64 = AtomicU64::new(0);

fn slot(level: &Level) -> usize {
    match *level {
        Level::ERROR => 0,
        Level::WARN => 1,
        Level::INFO => 2,
        Level::DEBUG => 3,
        Level::TRACE => 4,
    }
}

/// Counts one line at `level`; `suppressed` when the repeat limit dropped it.
pub fn count(level: &Level, suppressed: bool) {
    LOGGED[slot(level)].fetch_add(1, Ordering::Relaxed);
    if suppressed {
        SUPPRESSED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Lines logged so far, by level (in [`LEVELS`] order), suppressed ones
/// included.
pub fn logged() -> [(&'static str, u64); 5] {
    std::array::from_fn(|i| (LEVELS[i], LOGGED[i].load(Ordering::Relaxed)))
}

/// Lines the repeat limit dropped so far.
pub fn suppressed() -> u64 {
    SUPPRESSED.load(Ordering::Relaxed)
}
