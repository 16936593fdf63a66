//! Who a certificate says its holder is: the subject's Common Name is the name
//! (a user, a node, or `controller-<id>`), its Organizational Unit the role. The
//! CA vouches for both, so a request's identity comes from its TLS client
//! certificate and never from anything in the request body.

use std::collections::HashMap;
use std::fmt;
use std::sync::{LazyLock, Mutex};

use tonic::{Request, Status};
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::role::Role;

/// A principal as its certificate names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    /// The subject's Common Name: a user name, a node name or `controller-<id>`.
    pub name: String,
    /// The subject's Organizational Unit.
    pub role: Role,
}

/// Why a certificate names no usable identity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// The bytes are not an X.509 certificate.
    #[error("not a readable X.509 certificate ({0}); mint certificates with `corral certs`")]
    Unparsable(String),
    /// The subject has no Common Name.
    #[error(
        "the certificate's subject has no Common Name (the holder's name); \
         mint certificates with `corral certs`"
    )]
    MissingName,
    /// The subject has no Organizational Unit.
    #[error(
        "the certificate of '{name}' has no Organizational Unit (the holder's role); \
         mint certificates with `corral certs`"
    )]
    MissingRole {
        /// The Common Name.
        name: String,
    },
    /// The Organizational Unit is not one of corral's roles.
    #[error(
        "the certificate of '{name}' has role '{role}', which corral does not know \
         (user, operator, admin, controller or agent); mint certificates with `corral certs`"
    )]
    UnknownRole {
        /// The Common Name.
        name: String,
        /// The Organizational Unit found.
        role: String,
    },
    /// A subject field appears more than once, or is not text.
    #[error(
        "the certificate's {field} is ambiguous or not text; \
         mint certificates with `corral certs`"
    )]
    Malformed {
        /// "Common Name" or "Organizational Unit".
        field: &'static str,
    },
}

impl Identity {
    /// The identity in a DER-encoded certificate.
    pub fn from_der(cert_der: &[u8]) -> Result<Identity, IdentityError> {
        let (_, cert) = X509Certificate::from_der(cert_der)
            .map_err(|e| IdentityError::Unparsable(e.to_string()))?;
        let subject = cert.subject();
        let name = only(
            "Common Name",
            subject.iter_common_name().map(|a| a.as_str()),
        )?
        .ok_or(IdentityError::MissingName)?;
        let role = only(
            "Organizational Unit",
            subject.iter_organizational_unit().map(|a| a.as_str()),
        )?
        .ok_or_else(|| IdentityError::MissingRole {
            name: name.to_string(),
        })?;
        let role = role.parse().map_err(|_| IdentityError::UnknownRole {
            name: name.to_string(),
            role: role.to_string(),
        })?;
        Ok(Identity {
            name: name.to_string(),
            role,
        })
    }
}

/// The single, non-empty text value of a subject field, if present.
fn only<'a, E>(
    field: &'static str,
    mut values: impl Iterator<Item = Result<&'a str, E>>,
) -> Result<Option<&'a str>, IdentityError> {
    let malformed = || IdentityError::Malformed { field };
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(malformed());
    }
    let value = first.map_err(|_| malformed())?;
    Ok(Some(value).filter(|v| !v.is_empty()))
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.role)
    }
}

/// The identity of a gRPC caller, from the client certificate it presented on a
/// mutual-TLS connection (the first of the peer certificates is its own).
/// `unauthenticated` when there is none or it names no usable identity.
pub fn identity_of<T>(request: &Request<T>) -> Result<Identity, Status> {
    let certs = request.peer_certs().ok_or_else(|| {
        Status::unauthenticated(
            "no client certificate: corral accepts only mutual-TLS connections \
             with a certificate from the cluster CA (see `corral certs`)",
        )
    })?;
    let leaf = certs.first().ok_or_else(|| {
        Status::unauthenticated(
            "the connection presented no client certificate; \
             use one from the cluster CA (see `corral certs`)",
        )
    })?;
    remembered_identity(leaf)
        .map_err(|e| Status::unauthenticated(format!("client certificate refused: {e}")))
}

/// Most certificates whose identity is remembered; past it the memory starts over.
const REMEMBERED_CERTIFICATES: usize = 4096;

/// [`Identity::from_der`], remembered by certificate bytes: every request on a
/// connection presents the same certificate, and parsing X.509 on each one cost
/// several percent of a busy leader. The result depends on the bytes alone (the
/// TLS handshake already verified the chain), so remembering it changes nothing
/// but the cost.
fn remembered_identity(cert_der: &[u8]) -> Result<Identity, IdentityError> {
    type Memory = HashMap<Vec<u8>, Result<Identity, IdentityError>>;
    static MEMORY: LazyLock<Mutex<Memory>> = LazyLock::new(Mutex::default);
    if let Ok(memory) = MEMORY.lock()
        && let Some(known) = memory.get(cert_der)
    {
        return known.clone();
    }
    let identity = Identity::from_der(cert_der);
    if let Ok(mut memory) = MEMORY.lock() {
        if memory.len() >= REMEMBERED_CERTIFICATES {
            memory.clear();
        }
        memory.insert(cert_der.to_vec(), identity.clone());
    }
    identity
}

/// The caller's identity if its role is one of `allowed`; `permission_denied`
/// otherwise, saying that `what` needs one of them (and `unauthenticated` as in
/// [`identity_of`]).
pub fn require_role<T>(
    request: &Request<T>,
    allowed: &[Role],
    what: &str,
) -> Result<Identity, Status> {
    let identity = identity_of(request)?;
    if allowed.contains(&identity.role) {
        return Ok(identity);
    }
    let roles = allowed
        .iter()
        .map(|r| r.as_str())
        .collect::<Vec<_>>()
        .join(" or ");
    Err(Status::permission_denied(format!(
        "{identity} may not use {what}: it needs a certificate with role {roles}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    fn cert(fields: &[(DnType, &str)]) -> Vec<u8> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (ty, value) in fields {
            params.distinguished_name.push(ty.clone(), *value);
        }
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn name_and_role_come_from_common_name_and_organizational_unit() {
        let der = cert(&[
            (DnType::CommonName, "alice"),
            (DnType::OrganizationalUnitName, "operator"),
        ]);
        let identity = Identity::from_der(&der).unwrap();
        assert_eq!(
            identity,
            Identity {
                name: "alice".into(),
                role: Role::Operator
            }
        );
        assert_eq!(identity.to_string(), "alice (operator)");
    }

    #[test]
    fn a_remembered_identity_is_the_one_its_certificate_names() {
        let alice = cert(&[
            (DnType::CommonName, "alice"),
            (DnType::OrganizationalUnitName, "user"),
        ]);
        let bob = cert(&[
            (DnType::CommonName, "bob"),
            (DnType::OrganizationalUnitName, "admin"),
        ]);
        let no_role = cert(&[(DnType::CommonName, "carol")]);
        for _ in 0..2 {
            for der in [&alice, &bob, &no_role] {
                assert_eq!(remembered_identity(der), Identity::from_der(der));
            }
            assert!(remembered_identity(b"not a certificate").is_err());
        }
    }

    #[test]
    fn missing_or_unknown_fields_are_errors_that_say_what_is_missing() {
        let no_role = cert(&[(DnType::CommonName, "alice")]);
        let err = Identity::from_der(&no_role).unwrap_err();
        assert_eq!(
            err,
            IdentityError::MissingRole {
                name: "alice".into()
            }
        );
        assert!(err.to_string().contains("Organizational Unit"));
        assert!(err.to_string().contains("corral certs"));

        let no_name = cert(&[(DnType::OrganizationalUnitName, "user")]);
        assert_eq!(
            Identity::from_der(&no_name),
            Err(IdentityError::MissingName)
        );

        let empty_name = cert(&[
            (DnType::CommonName, ""),
            (DnType::OrganizationalUnitName, "user"),
        ]);
        assert_eq!(
            Identity::from_der(&empty_name),
            Err(IdentityError::MissingName)
        );

        let unknown = cert(&[
            (DnType::CommonName, "alice"),
            (DnType::OrganizationalUnitName, "root"),
        ]);
        assert!(matches!(
            Identity::from_der(&unknown),
            Err(IdentityError::UnknownRole { role, .. }) if role == "root"
        ));

        let two_roles = cert(&[
            (DnType::CommonName, "alice"),
            (DnType::OrganizationalUnitName, "user"),
            // The same OID under another key, so rcgen writes both.
            (DnType::CustomDnType(vec![2, 5, 4, 11]), "admin"),
        ]);
        assert_eq!(
            Identity::from_der(&two_roles),
            Err(IdentityError::Malformed {
                field: "Organizational Unit"
            })
        );

        assert!(matches!(
            Identity::from_der(b"not a certificate"),
            Err(IdentityError::Unparsable(_))
        ));
    }

    #[test]
    fn a_request_without_a_tls_connection_is_unauthenticated() {
        let status = identity_of(&Request::new(())).unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unauthenticated);
        assert!(status.message().contains("client certificate"));
        let status = require_role(&Request::new(()), &[Role::Admin], "x").unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unauthenticated);
    }
}
