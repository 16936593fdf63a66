//! corral-consensus: Raft replication of the cluster state (issue 4, not started yet).
//!
//! It will own the openraft type configuration whose app data is
//! `corral_state::Command`, the sled log and state-machine stores, snapshots built
//! from `corral_state::snapshot`, and Raft RPC over tonic with mutual TLS.
