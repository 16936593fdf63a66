//! corral-jepsen: the history of a chaos run and the checkers that prove,
//! from that history alone, that corral kept its promises.
//!
//! Pure: no I/O, no clock. A runner (`corral-chaos`, or an operator's own
//! harness against a real cluster) records a [`History`]: client operations
//! with their outcomes, what the jobs themselves saw (attempts, GPUs,
//! checkpoints, resumes), what the controllers did, the faults injected, and
//! the cluster's records at the end. [`check_all`] runs one checker per
//! promise ([`checkers`]); [`report`] turns their verdicts into a table and a
//! timeline page.
//!
//! Start at [`history`] (the format), then [`checkers`]. The linearizability
//! search ([`linearizability`]) is the Wing–Gong/Lowe algorithm, generic
//! over a sequential model.

pub mod attempts;
pub mod checkers;
pub mod faults;
pub mod history;
pub mod linearizability;
pub mod recovery;
pub mod report;
#[cfg(test)]
mod testing;
pub mod verdict;

pub use checkers::check_all;
pub use history::{Event, EventKind, HISTORY_VERSION, Header, History};
pub use verdict::{Verdict, Violation};
