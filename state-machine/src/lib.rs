//! corral-state: the deterministic cluster state that the Raft log replicates.
//!
//! Pure: no I/O, no clock, no randomness. Time enters only inside commands.

pub mod slurm;
