//! Time as the state machine sees it: timestamps carried inside commands.
//!
//! The state machine never reads a clock. The leader stamps each command with its
//! own wall-clock time; `apply` clamps it to the latest time already seen so state
//! time never runs backwards when leadership moves to a replica whose clock is
//! slightly behind.

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch, as stamped by the leader.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// No command may carry a later time (2500-01-01): a leader whose clock is that
    /// wrong is refused rather than allowed to overflow accounting arithmetic.
    pub const LATEST_ACCEPTED: Timestamp = Timestamp(16_725_225_600_000);

    /// The timestamp `secs` whole seconds after the epoch.
    pub const fn from_secs(secs: u64) -> Self {
        Timestamp(secs.saturating_mul(1000))
    }

    /// Milliseconds since the epoch.
    pub const fn as_ms(self) -> u64 {
        self.0
    }

    /// Whole seconds since the epoch.
    pub const fn as_secs(self) -> u64 {
        self.0 / 1000
    }

    /// This timestamp plus `secs` seconds, saturating at the end of time.
    pub const fn plus_secs(self, secs: u64) -> Self {
        Timestamp(self.0.saturating_add(secs.saturating_mul(1000)))
    }

    /// Milliseconds from `earlier` to `self`, or zero if `earlier` is later.
    pub const fn ms_since(self, earlier: Timestamp) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// Whole seconds from `earlier` to `self`, or zero if `earlier` is later.
    pub const fn secs_since(self, earlier: Timestamp) -> u64 {
        self.ms_since(earlier) / 1000
    }
}
