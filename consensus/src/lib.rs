//! corral-consensus: Raft replication of the cluster state.
//!
//! Three (or five) controller replicas run [`Replica`]: openraft 0.9 over a log
//! of entries in segment files ([`wal`]) with its metadata in sled
//! ([`log_store`]), and a state machine that applies `corral_state::Command`s
//! ([`state_machine`]; a panic in apply becomes the same refusal on every
//! replica, `apply_total`) with its snapshot in a file ([`snapshot_file`]), opened together by
//! [`storage`]; peer RPC runs over tonic and mutual TLS ([`network`],
//! [`peer_service`], [`tls`]), open to controller certificates only. Every fsync
//! goes through one thread ([`flusher`]), which also gives group commit. The
//! [`proposer`] batches concurrent proposals into log entries.
//!
//! Start reading at [`replica`]: the API the controller uses.

// openraft's storage traits fix the error type (`StorageError`, ~224 bytes); the
// helpers that build it must return it as is.
#![allow(clippy::result_large_err)]

mod apply_total;
pub mod call_stream;
pub mod codec;
pub mod core_watch;
pub mod durable_dir;
pub mod election;
pub mod error;
pub mod flusher;
mod instruments;
pub mod leader_client;
pub mod leadership;
pub mod log_store;
pub mod network;
pub mod peer_service;
pub mod proposer;
pub mod replica;
pub mod restore;
pub mod salvage;
pub mod snapshot_data;
pub mod snapshot_file;
pub mod state_machine;
pub mod storage;
pub mod tls;
pub mod types;
pub mod wal;

/// Generated peer protocol.
#[allow(missing_docs, clippy::all)]
pub mod pb {
    tonic::include_proto!("corral.peer.v1");
}

pub use error::{MembershipError, ProposeError, ReadError, StartError};
pub use proposer::{Clock, ClockReading};
pub use replica::{
    Leadership, Member, RaftTiming, Replica, ReplicaConfig, ReplicaMetrics, StateCopy,
    open_database,
};
pub use types::{ReplicaAddr, ReplicaId};
