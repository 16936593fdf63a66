//! corral-pki: the cluster CA. Mints certificates whose subject carries a name and
//! a role (user, operator, admin, controller, agent), reads that identity back from
//! a peer's certificate, and builds the TLS settings every corral connection uses.
//!
//! One CA signs every certificate in a cluster ([`ClusterCa`]); a certificate's
//! Common Name is its holder's name and its Organizational Unit the holder's
//! [`Role`]. Servers learn who calls from the client certificate
//! ([`identity_of`]), never from a request body. [`write_dev_bundle`] writes a
//! whole cluster's material to a directory (behind `corral certs DIR`).

mod bundle;
mod ca;
mod crypto;
mod error;
mod identity;
mod material;
mod quic;
mod role;

pub use bundle::{BundlePaths, BundleSpec, PrincipalFiles, write_dev_bundle};
pub use ca::{ClusterCa, IssuedCert};
pub use crypto::install_crypto_provider;
pub use error::PkiError;
pub use identity::{Identity, IdentityError, identity_of, require_role};
pub use material::TlsMaterial;
pub use quic::{AGENT_ALPN, identity_of_connection};
pub use role::{Role, UnknownRole};
