//! corral-proto: the client API every controller serves (`proto/api.proto`), and
//! the JSON payloads its messages carry. The CLI and the controller both build on
//! it; nothing here does I/O beyond what tonic generates.

#![allow(missing_docs)] // generated code

pub mod admin;
pub mod agent;
pub mod agent_protocol;
pub mod records;
pub mod roster;
pub mod step;

/// The gRPC metadata key with which a controller that does not lead names the
/// leader's client address, so clients retry there.
pub const LEADER_METADATA: &str = "corral-leader";

/// The largest client API message either side accepts (a submission carries
/// its script; the cluster's own limit on scripts, `max_batch_bytes`, is 4 MiB
/// by default and says so in its refusal).
pub const MAX_API_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The generated gRPC service, client and messages.
pub mod api {
    tonic::include_proto!("corral.api.v1");
}
