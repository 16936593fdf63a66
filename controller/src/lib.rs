//! corral-controller: the controller daemon's parts. `config` reads `corral.toml`;
//! `api` serves the client gRPC API on every replica (reads locally, writes through
//! the leader); `leader_loop` runs scheduling passes and time-driven commands while
//! this replica leads; `daemon` wires them to a `corral_consensus::Replica`.

pub mod agent_gateway;
pub mod api;
pub mod clock;
pub mod clock_skew;
pub mod cluster_clock;
pub mod config;
pub mod daemon;
pub mod leader_loop;
pub mod mail;
pub mod metrics;
pub mod pass_instruments;
pub mod retry_pause;
