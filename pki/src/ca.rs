//! The cluster CA: one ECDSA P-256 authority that signs every certificate in the
//! cluster (controllers, node agents, users, operators, admins), each naming its
//! holder in the Common Name and its role in the Organizational Unit.
//!
//! Validity: the CA for 30 years, every certificate it issues for 10 (never past
//! the CA), each backdated an hour against clock skew. That suits the development
//! and first-deployment CA this is; sites with their own CA set their own terms.

use std::fmt;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use time::OffsetDateTime;
use x509_parser::pem::parse_x509_pem;

use crate::error::PkiError;
use crate::material::TlsMaterial;
use crate::role::Role;

const DAY: Duration = Duration::from_secs(24 * 60 * 60);
/// How long the CA is valid.
const CA_VALIDITY: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);
/// How long an issued certificate is valid.
const CERT_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);
/// How far validity starts in the past, so a slightly slow clock accepts it.
const BACKDATE: Duration = Duration::from_secs(60 * 60);

/// A certificate and its private key, PEM-encoded.
#[derive(Clone, PartialEq, Eq)]
pub struct IssuedCert {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key (PKCS#8).
    pub key_pem: String,
}

impl fmt::Debug for IssuedCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedCert")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<private key>")
            .finish()
    }
}

/// The CA that signs every certificate of one cluster.
pub struct ClusterCa {
    issuer: Issuer<'static, KeyPair>,
    ca_pem: String,
    key_pem: String,
    not_after: OffsetDateTime,
}

impl fmt::Debug for ClusterCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterCa")
            .field("ca_pem", &self.ca_pem)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

impl ClusterCa {
    /// A new CA for the cluster `cluster_name`, with a fresh key.
    pub fn generate(cluster_name: &str) -> Result<ClusterCa, PkiError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params
            .distinguished_name
            .push(DnType::CommonName, format!("corral CA {cluster_name}"));
        params
            .distinguished_name
            .push(DnType::OrganizationName, "corral");
        let now = OffsetDateTime::now_utc();
        params.not_before = now - BACKDATE;
        params.not_after = now + CA_VALIDITY;
        let cert = params.self_signed(&key)?;
        Ok(ClusterCa {
            ca_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            not_after: params.not_after,
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA saved as `cert_pem` and `key_pem` (from [`ca_pem`](Self::ca_pem)
    /// and [`key_pem`](Self::key_pem)), to issue more certificates later.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<ClusterCa, PkiError> {
        let invalid = |what: &str| PkiError::InvalidCa(what.to_string());
        let key = KeyPair::from_pem(key_pem)
            .map_err(|e| PkiError::InvalidCa(format!("the key is not a PEM private key: {e}")))?;
        let (_, pem) = parse_x509_pem(cert_pem.as_bytes())
            .map_err(|e| PkiError::InvalidCa(format!("the certificate is not PEM: {e}")))?;
        let cert = pem
            .parse_x509()
            .map_err(|e| PkiError::InvalidCa(format!("the certificate cannot be parsed: {e}")))?;
        if !cert.is_ca() {
            return Err(invalid("the certificate is not a CA certificate"));
        }
        if cert.public_key().subject_public_key.data.as_ref() != key.public_key_raw() {
            return Err(invalid("the key does not belong to the certificate"));
        }
        let not_after = cert.validity().not_after.to_datetime();
        if not_after < OffsetDateTime::now_utc() + DAY {
            return Err(invalid(
                "the CA certificate has expired or expires within a day",
            ));
        }
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)?;
        Ok(ClusterCa {
            issuer,
            ca_pem: cert_pem.to_string(),
            key_pem: key_pem.to_string(),
            not_after,
        })
    }

    /// The CA certificate, PEM: every participant trusts this.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA's private key, PEM: keep it off the cluster's machines.
    pub fn key_pem(&self) -> String {
        self.key_pem.clone()
    }

    /// A certificate for `name` with `role`, usable both as a TLS server and a
    /// client. `sans` are the host names and IP addresses (IP literals become IP
    /// SANs) a server presenting it is reached at; clients need none.
    pub fn issue(&self, role: Role, name: &str, sans: &[&str]) -> Result<IssuedCert, PkiError> {
        if name.is_empty() {
            return Err(PkiError::InvalidName {
                name: String::new(),
                reason: "a certificate must name its holder",
            });
        }
        let key = KeyPair::generate()?;
        let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(sans)?;
        params.distinguished_name.push(DnType::CommonName, name);
        params
            .distinguished_name
            .push(DnType::OrganizationalUnitName, role.as_str());
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        let now = OffsetDateTime::now_utc();
        params.not_before = now - BACKDATE;
        params.not_after = (now + CERT_VALIDITY).min(self.not_after);
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// [`issue`](Self::issue), packaged with this CA as TLS material.
    pub fn material(&self, role: Role, name: &str, sans: &[&str]) -> Result<TlsMaterial, PkiError> {
        let issued = self.issue(role, name, sans)?;
        Ok(TlsMaterial {
            ca_pem: self.ca_pem.clone(),
            cert_pem: issued.cert_pem,
            key_pem: issued.key_pem,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use x509_parser::extensions::GeneralName;
    use x509_parser::prelude::{FromDer, X509Certificate};

    use super::*;
    use crate::identity::Identity;

    fn der(pem: &str) -> Vec<u8> {
        parse_x509_pem(pem.as_bytes()).unwrap().1.contents
    }

    #[test]
    fn issued_certificates_carry_identity_sans_both_usages_and_the_ca_as_issuer() {
        let ca = ClusterCa::generate("test").unwrap();
        let issued = ca
            .issue(
                Role::Controller,
                "controller-1",
                &["localhost", "127.0.0.1"],
            )
            .unwrap();
        let leaf = der(&issued.cert_pem);
        assert_eq!(
            Identity::from_der(&leaf).unwrap(),
            Identity {
                name: "controller-1".into(),
                role: Role::Controller
            }
        );
        let (_, cert) = X509Certificate::from_der(&leaf).unwrap();
        let eku = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.server_auth && eku.client_auth);
        let sans = &cert
            .subject_alternative_name()
            .unwrap()
            .unwrap()
            .value
            .general_names;
        assert!(sans.contains(&GeneralName::DNSName("localhost")));
        let loopback = Ipv4Addr::LOCALHOST.octets();
        assert!(sans.contains(&GeneralName::IPAddress(&loopback)));
        assert!(!cert.is_ca());

        let ca_der = der(ca.ca_pem());
        let (_, ca_cert) = X509Certificate::from_der(&ca_der).unwrap();
        assert_eq!(cert.issuer(), ca_cert.subject());
        cert.verify_signature(Some(ca_cert.public_key())).unwrap();
        assert!(cert.validity().not_after <= ca_cert.validity().not_after);
        let days =
            (cert.validity().not_after.to_datetime() - OffsetDateTime::now_utc()).whole_days();
        assert!((3640..=3650).contains(&days), "ten years, not {days} days");
    }

    #[test]
    fn a_reloaded_ca_issues_certificates_that_verify_against_the_original() {
        let ca = ClusterCa::generate("test").unwrap();
        let again = ClusterCa::from_pem(ca.ca_pem(), &ca.key_pem()).unwrap();
        assert_eq!(again.ca_pem(), ca.ca_pem());
        let issued = again.issue(Role::User, "alice", &[]).unwrap();
        let ca_der = der(ca.ca_pem());
        let (_, ca_cert) = X509Certificate::from_der(&ca_der).unwrap();
        let leaf = der(&issued.cert_pem);
        let (_, cert) = X509Certificate::from_der(&leaf).unwrap();
        assert_eq!(cert.issuer(), ca_cert.subject());
        cert.verify_signature(Some(ca_cert.public_key())).unwrap();
    }

    #[test]
    fn a_ca_with_the_wrong_key_or_a_leaf_certificate_is_refused() {
        let ca = ClusterCa::generate("a").unwrap();
        let other = ClusterCa::generate("b").unwrap();
        assert!(matches!(
            ClusterCa::from_pem(ca.ca_pem(), &other.key_pem()),
            Err(PkiError::InvalidCa(m)) if m.contains("does not belong")
        ));
        let leaf = ca.issue(Role::Admin, "root", &[]).unwrap();
        assert!(matches!(
            ClusterCa::from_pem(&leaf.cert_pem, &leaf.key_pem),
            Err(PkiError::InvalidCa(m)) if m.contains("not a CA")
        ));
        assert!(matches!(
            ClusterCa::from_pem("garbage", &ca.key_pem()),
            Err(PkiError::InvalidCa(_))
        ));
        assert!(matches!(
            ClusterCa::from_pem(ca.ca_pem(), "garbage"),
            Err(PkiError::InvalidCa(_))
        ));
    }

    #[test]
    fn an_empty_name_is_refused() {
        let ca = ClusterCa::generate("test").unwrap();
        assert!(matches!(
            ca.issue(Role::User, "", &[]),
            Err(PkiError::InvalidName { .. })
        ));
    }
}
