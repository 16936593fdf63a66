//! Advance reservations: nodes set aside for some users or accounts over a window.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// A reservation (Slurm's `scontrol create reservation`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// Name, given with `--reservation`.
    pub name: String,
    /// Reserved nodes.
    pub nodes: BTreeSet<String>,
    /// Start of the window.
    pub start: Timestamp,
    /// End of the window (exclusive).
    pub end: Timestamp,
    /// Users who may use it.
    pub users: BTreeSet<String>,
    /// Accounts whose users may use it.
    pub accounts: BTreeSet<String>,
    /// A maintenance reservation: nobody's jobs run on its nodes during the window.
    pub maintenance: bool,
}

impl Reservation {
    /// True when `at` falls inside the window.
    pub fn is_active(&self, at: Timestamp) -> bool {
        self.start <= at && at < self.end
    }

    /// True when the window `[from, to)` overlaps this reservation's window.
    pub fn overlaps_window(&self, from: Timestamp, to: Timestamp) -> bool {
        from < self.end && self.start < to
    }

    /// True when a job of `user` charging `account` may use this reservation.
    pub fn admits(&self, user: &str, account: &str) -> bool {
        !self.maintenance && (self.users.contains(user) || self.accounts.contains(account))
    }
}
