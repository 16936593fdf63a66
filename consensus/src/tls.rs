//! Mutual TLS between controllers, and who may speak the peer protocol.
//!
//! One cluster CA signs every certificate (controllers, node agents, users), so
//! being signed by it is not enough: every peer RPC (AppendEntries, Vote,
//! InstallSnapshot, Propose, Metrics) first checks, in [`controllers_only`], that
//! the caller's certificate has the role `controller`. Both sides of a peer
//! connection verify the other against the CA ([`corral_pki::TlsMaterial`]).

use corral_pki::{Role, require_role};
use tonic::{Request, Status};

/// The peer server's interceptor: lets a request through only when its client
/// certificate has the controller role (`permission_denied` otherwise, and
/// `unauthenticated` without a usable certificate). It runs before the request
/// body is decoded.
pub fn controllers_only(request: Request<()>) -> Result<Request<()>, Status> {
    require_role(
        &request,
        &[Role::Controller],
        "the controllers' peer protocol",
    )?;
    Ok(request)
}
