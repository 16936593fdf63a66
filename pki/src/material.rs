//! A participant's TLS material (the cluster CA, its own certificate and key)
//! and the tonic settings built from it: mutual TLS everywhere, each side
//! verifying the other against the cluster CA.

use std::fmt;
use std::fs;
use std::path::Path;

use time::OffsetDateTime;
use tonic::transport::{Certificate, ClientTlsConfig, ServerTlsConfig};
use x509_parser::pem::{Pem, parse_x509_pem};

use crate::error::PkiError;
use crate::identity::{Identity, IdentityError};

/// PEM material for one participant's connections.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsMaterial {
    /// The cluster CA certificate.
    pub ca_pem: String,
    /// This participant's certificate (a server's SANs must name the host
    /// clients reach it at).
    pub cert_pem: String,
    /// This participant's private key.
    pub key_pem: String,
}

impl fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("ca_pem", &self.ca_pem)
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<private key>")
            .finish()
    }
}

impl TlsMaterial {
    /// Reads the CA certificate, our certificate and our key, checking that each
    /// file holds what it should and that both certificates are valid now.
    pub fn load(ca: &Path, cert: &Path, key: &Path) -> Result<TlsMaterial, PkiError> {
        let ca_pem = read(ca)?;
        check_certificate(ca, &ca_pem)?;
        let cert_pem = read(cert)?;
        check_certificate(cert, &cert_pem)?;
        let key_pem = read(key)?;
        let label = first_pem(key, &key_pem, "a PEM private key")?.label;
        if !label.ends_with("PRIVATE KEY") {
            return Err(PkiError::NotPem {
                path: key.to_path_buf(),
                expected: "a PEM private key",
                reason: format!("found a {label} block"),
            });
        }
        Ok(TlsMaterial {
            ca_pem,
            cert_pem,
            key_pem,
        })
    }

    /// Server side: present our certificate and require a client certificate
    /// signed by the cluster CA.
    pub fn server_config(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(tonic::transport::Identity::from_pem(
                &self.cert_pem,
                &self.key_pem,
            ))
            .client_ca_root(Certificate::from_pem(&self.ca_pem))
    }

    /// Client side: verify the server against the cluster CA and present our
    /// certificate.
    pub fn client_config(&self) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca_pem))
            .identity(tonic::transport::Identity::from_pem(
                &self.cert_pem,
                &self.key_pem,
            ))
    }

    /// Who our own certificate says we are.
    pub fn identity(&self) -> Result<Identity, IdentityError> {
        let (_, pem) = parse_x509_pem(self.cert_pem.as_bytes())
            .map_err(|e| IdentityError::Unparsable(format!("not PEM: {e}")))?;
        Identity::from_der(&pem.contents)
    }
}

fn read(path: &Path) -> Result<String, PkiError> {
    fs::read_to_string(path).map_err(|source| PkiError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn first_pem(path: &Path, text: &str, expected: &'static str) -> Result<Pem, PkiError> {
    parse_x509_pem(text.as_bytes())
        .map(|(_, pem)| pem)
        .map_err(|e| PkiError::NotPem {
            path: path.to_path_buf(),
            expected,
            reason: e.to_string(),
        })
}

/// The first PEM block of `text` is a certificate valid now.
fn check_certificate(path: &Path, text: &str) -> Result<(), PkiError> {
    const EXPECTED: &str = "a PEM certificate";
    let not_pem = |reason: String| PkiError::NotPem {
        path: path.to_path_buf(),
        expected: EXPECTED,
        reason,
    };
    let pem = first_pem(path, text, EXPECTED)?;
    if pem.label != "CERTIFICATE" {
        return Err(not_pem(format!("found a {} block", pem.label)));
    }
    let cert = pem.parse_x509().map_err(|e| not_pem(e.to_string()))?;
    let validity = cert.validity();
    let now = OffsetDateTime::now_utc();
    if now < validity.not_before.to_datetime() || validity.not_after.to_datetime() < now {
        return Err(PkiError::Expired {
            path: path.to_path_buf(),
            not_before: validity.not_before.to_string(),
            not_after: validity.not_after.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ca::ClusterCa;
    use crate::role::Role;

    fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn material_written_to_disk_loads_back_with_its_identity() {
        let ca = ClusterCa::generate("test").unwrap();
        let issued = ca.issue(Role::Agent, "gpu-001", &["gpu-001"]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let loaded = TlsMaterial::load(
            &write(dir.path(), "ca.pem", ca.ca_pem()),
            &write(dir.path(), "a.pem", &issued.cert_pem),
            &write(dir.path(), "a.key", &issued.key_pem),
        )
        .unwrap();
        assert_eq!(loaded.cert_pem, issued.cert_pem);
        assert_eq!(
            loaded.identity().unwrap(),
            Identity {
                name: "gpu-001".into(),
                role: Role::Agent
            }
        );
        assert!(!format!("{loaded:?}").contains(&issued.key_pem));
    }

    #[test]
    fn load_errors_name_the_file_and_say_what_to_do() {
        let ca = ClusterCa::generate("test").unwrap();
        let issued = ca.issue(Role::User, "alice", &[]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ca_path = write(dir.path(), "ca.pem", ca.ca_pem());
        let cert = write(dir.path(), "alice.pem", &issued.cert_pem);
        let key = write(dir.path(), "alice.key", &issued.key_pem);
        let missing = dir.path().join("nowhere.pem");

        let err = TlsMaterial::load(&ca_path, &missing, &key).unwrap_err();
        assert!(matches!(&err, PkiError::Read { path, .. } if *path == missing));
        let message = err.to_string();
        assert!(message.contains("nowhere.pem") && message.contains("corral certs"));

        // Certificate and key swapped.
        let err = TlsMaterial::load(&ca_path, &key, &cert).unwrap_err();
        assert!(
            matches!(&err, PkiError::NotPem { path, .. } if *path == key),
            "{err}"
        );
        let err = TlsMaterial::load(&ca_path, &cert, &cert).unwrap_err();
        assert!(
            matches!(&err, PkiError::NotPem { path, .. } if *path == cert),
            "{err}"
        );

        let expired = {
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            params.not_before = rcgen::date_time_ymd(2001, 1, 1);
            params.not_after = rcgen::date_time_ymd(2002, 1, 1);
            let key = rcgen::KeyPair::generate().unwrap();
            write(
                dir.path(),
                "old.pem",
                &params.self_signed(&key).unwrap().pem(),
            )
        };
        let err = TlsMaterial::load(&ca_path, &expired, &key).unwrap_err();
        assert!(matches!(&err, PkiError::Expired { path, .. } if *path == expired));
        assert!(err.to_string().contains("2002"), "{err}");

        let junk = write(dir.path(), "junk.pem", "hello");
        let err = TlsMaterial::load(&junk, &cert, &key).unwrap_err();
        assert!(err.to_string().contains("junk.pem"), "{err}");
    }
}
