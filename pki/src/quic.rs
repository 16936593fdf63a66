//! QUIC (quinn) settings from the same material as gRPC: mutual TLS against the
//! cluster CA, one ALPN protocol name, and the peer's identity read from the
//! connection, so the agent channel trusts exactly what the gRPC services trust.

use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::PkiError;
use crate::identity::{Identity, IdentityError};
use crate::material::TlsMaterial;

/// The ALPN protocol of the agent channel.
pub const AGENT_ALPN: &[u8] = b"corral-agent/1";

impl TlsMaterial {
    /// A QUIC server for the agent channel that requires a client certificate
    /// from the cluster CA.
    pub fn quic_server_config(&self) -> Result<quinn::ServerConfig, PkiError> {
        self.quic_server_config_for(AGENT_ALPN)
    }

    /// A QUIC client for the agent channel that verifies the server against the
    /// cluster CA and presents our certificate.
    pub fn quic_client_config(&self) -> Result<quinn::ClientConfig, PkiError> {
        self.quic_client_config_for(AGENT_ALPN)
    }

    /// A QUIC server speaking protocol `alpn` that requires a client
    /// certificate from the cluster CA.
    pub fn quic_server_config_for(&self, alpn: &[u8]) -> Result<quinn::ServerConfig, PkiError> {
        let roots = self.roots()?;
        let verifier = WebPkiClientVerifier::builder(Arc::new(roots))
            .build()
            .map_err(|e| PkiError::InvalidCa(format!("client verifier: {e}")))?;
        let mut tls = rustls::ServerConfig::builder()
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.chain()?, self.key()?)
            .map_err(|e| PkiError::InvalidCa(format!("server certificate: {e}")))?;
        tls.alpn_protocols = vec![alpn.to_vec()];
        let crypto = QuicServerConfig::try_from(tls)
            .map_err(|e| PkiError::InvalidCa(format!("QUIC server settings: {e}")))?;
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        config.transport_config(transport());
        Ok(config)
    }

    /// A QUIC client speaking protocol `alpn` that verifies the server against
    /// the cluster CA and presents our certificate.
    pub fn quic_client_config_for(&self, alpn: &[u8]) -> Result<quinn::ClientConfig, PkiError> {
        let mut tls = rustls::ClientConfig::builder()
            .with_root_certificates(self.roots()?)
            .with_client_auth_cert(self.chain()?, self.key()?)
            .map_err(|e| PkiError::InvalidCa(format!("client certificate: {e}")))?;
        tls.alpn_protocols = vec![alpn.to_vec()];
        let crypto = QuicClientConfig::try_from(tls)
            .map_err(|e| PkiError::InvalidCa(format!("QUIC client settings: {e}")))?;
        let mut config = quinn::ClientConfig::new(Arc::new(crypto));
        config.transport_config(transport());
        Ok(config)
    }

    fn roots(&self) -> Result<RootCertStore, PkiError> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| PkiError::InvalidCa(format!("CA certificate: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| PkiError::InvalidCa(format!("CA certificate: {e}")))?;
        }
        Ok(roots)
    }

    fn chain(&self) -> Result<Vec<CertificateDer<'static>>, PkiError> {
        CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| PkiError::InvalidCa(format!("certificate: {e}")))
    }

    fn key(&self) -> Result<PrivateKeyDer<'static>, PkiError> {
        PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(|e| PkiError::InvalidCa(format!("private key: {e}")))
    }
}

/// How often an otherwise quiet connection sends a keep-alive: a job step can
/// print nothing for hours, and its connection must outlive the idle timeout.
pub const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// How long a connection may go without hearing from its peer before it is
/// considered lost (several keep-alives).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Keep-alives both ends send, so only a peer that is really gone times out.
fn transport() -> Arc<quinn::TransportConfig> {
    let mut transport = quinn::TransportConfig::default();
    transport.keep_alive_interval(Some(KEEP_ALIVE));
    // 30 s always fits quinn's VarInt range.
    if let Ok(idle) = quinn::IdleTimeout::try_from(IDLE_TIMEOUT) {
        transport.max_idle_timeout(Some(idle));
    }
    Arc::new(transport)
}

/// Who is on the other end of a QUIC connection (its certificate's identity).
pub fn identity_of_connection(connection: &quinn::Connection) -> Result<Identity, IdentityError> {
    let certs = connection
        .peer_identity()
        .and_then(|any| any.downcast::<Vec<CertificateDer<'static>>>().ok())
        .ok_or(IdentityError::MissingName)?;
    let leaf = certs.first().ok_or(IdentityError::MissingName)?;
    Identity::from_der(leaf.as_ref())
}
