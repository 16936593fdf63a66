//! corral-state: the deterministic cluster state that the Raft log replicates.
//!
//! Pure: no I/O, no clock, no randomness. Time enters only inside commands, maps
//! are ordered, and arithmetic on usage is integer, so every replica that applies
//! the same commands holds the same bytes.
//!
//! Start reading at [`Command`] (every change there is) and [`ClusterState::apply`]
//! (how each is validated and applied); [`invariants::check`] states what must
//! always hold. Slurm's text formats live in [`slurm`].

pub mod account;
pub mod accounting;
mod apply;
pub mod backup;
pub mod civil;
pub mod command;
pub mod config;
pub mod digest;
pub mod format_v1;
pub mod format_v2;
mod format_v4;
pub mod ids;
pub mod invariants;
pub mod job;
pub mod job_request;
pub mod job_table;
pub mod job_update;
pub mod mig;
pub mod node;
pub mod node_liveness;
pub mod partition;
pub mod preemption;
pub mod qos;
pub mod rejection;
pub mod reservation;
pub mod slurm;
pub mod snapshot;
pub mod state;
pub mod submit_keys;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod time;
pub mod topology;
mod unfinished_index;

pub use command::{
    CancelTarget, Command, Outcome, PlanOutcome, PlannedAllocation, PlannedPreemption,
};
pub use digest::StateDigest;
pub use ids::{Actor, AttemptNumber, JobId, Role};
pub use rejection::Rejection;
pub use state::ClusterState;
pub use time::Timestamp;
