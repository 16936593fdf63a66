//! A development certificate authority: mints a CA and certificates signed by it
//! (ECDSA P-256), for tests, `corral demo` and first deployments. Production sites
//! bring certificates from their own CA.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::tls::PeerTls;

/// A CA that can issue certificates.
pub struct DevCa {
    issuer: Issuer<'static, KeyPair>,
    ca_pem: String,
}

/// A certificate and its key, PEM-encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedCert {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
}

impl DevCa {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Result<Self, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key)?;
        Ok(DevCa {
            issuer: Issuer::new(params, key),
            ca_pem: cert.pem(),
        })
    }

    /// The CA certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A certificate for `common_name`, valid for server and client auth, with
    /// `sans` (host names or IP addresses) as subject alternative names.
    pub fn issue(&self, common_name: &str, sans: &[&str]) -> Result<IssuedCert, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Peer TLS material for a controller reachable at `sans`.
    pub fn peer_tls(&self, common_name: &str, sans: &[&str]) -> Result<PeerTls, rcgen::Error> {
        let issued = self.issue(common_name, sans)?;
        Ok(PeerTls {
            ca_pem: self.ca_pem.clone(),
            cert_pem: issued.cert_pem,
            key_pem: issued.key_pem,
        })
    }
}
