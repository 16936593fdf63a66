//! corral-proto: the client API every controller serves (`proto/api.proto`), and
//! the JSON payloads its messages carry. The CLI and the controller both build on
//! it; nothing here does I/O beyond what tonic generates.

#![allow(missing_docs)] // generated code

pub mod admin;
pub mod agent;
pub mod records;
pub mod step;

/// The gRPC metadata key with which a controller that does not lead names the
/// leader's client address, so clients retry there.
pub const LEADER_METADATA: &str = "corral-leader";

/// The generated gRPC service, client and messages.
pub mod api {
    tonic::include_proto!("corral.api.v1");
}
