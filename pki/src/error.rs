//! What can go wrong minting, loading and writing certificates.

use std::io;
use std::path::PathBuf;

/// An error of the cluster CA or of TLS material on disk.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// rcgen could not generate a key or sign a certificate.
    #[error("certificate generation failed: {0}")]
    Generate(#[from] rcgen::Error),
    /// A file could not be read.
    #[error("cannot read {}: {source}; create TLS material with `corral certs DIR`", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A file or directory could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A file does not hold the PEM block expected.
    #[error(
        "{} does not hold {expected} ({reason}); create TLS material with `corral certs DIR`",
        path.display()
    )]
    NotPem {
        /// The file.
        path: PathBuf,
        /// "a PEM certificate" or "a PEM private key".
        expected: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// A certificate on disk is outside its validity period.
    #[error(
        "the certificate in {} is valid only from {not_before} to {not_after}; \
         issue a new one with `corral certs DIR`",
        path.display()
    )]
    Expired {
        /// The file.
        path: PathBuf,
        /// Start of validity.
        not_before: String,
        /// End of validity.
        not_after: String,
    },
    /// A CA certificate and key cannot be used to issue certificates.
    #[error("unusable CA: {0}")]
    InvalidCa(String),
    /// A CA directory holds the certificate or the key, but not both.
    #[error(
        "{} exists but {} does not: restore it, or remove both to mint a new CA \
         (every certificate must then be reissued)",
        present.display(),
        missing.display()
    )]
    HalfCa {
        /// The file that exists.
        present: PathBuf,
        /// The file that is missing.
        missing: PathBuf,
    },
    /// A user was given a role reserved for daemons.
    #[error("user '{name}' cannot have role {role}: users are user, operator or admin")]
    NotAUserRole {
        /// The user.
        name: String,
        /// The role asked for.
        role: crate::role::Role,
    },
    /// A principal's name cannot go into a certificate or a file name.
    #[error("invalid name '{name}': {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// Why.
        reason: &'static str,
    },
}
