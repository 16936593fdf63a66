//! Mutual TLS between controllers. Every controller holds a certificate from the
//! controllers' CA (kept apart from the CA that signs users and node agents, so
//! no user certificate can speak the peer protocol), and both sides of every
//! peer connection verify the other against it.

use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// PEM material for peer connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerTls {
    /// The controllers' CA certificate.
    pub ca_pem: String,
    /// This controller's certificate (its SANs must name its peer address host).
    pub cert_pem: String,
    /// This controller's private key.
    pub key_pem: String,
}

impl PeerTls {
    /// Server side: present our certificate, require one from the controllers' CA.
    pub fn server_config(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(Identity::from_pem(&self.cert_pem, &self.key_pem))
            .client_ca_root(Certificate::from_pem(&self.ca_pem))
    }

    /// Client side: verify the server against the controllers' CA, present ours.
    pub fn client_config(&self) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca_pem))
            .identity(Identity::from_pem(&self.cert_pem, &self.key_pem))
    }
}

/// Chooses rustls's ring provider for the process. rustls panics when it must
/// pick between two compiled-in providers, so every binary and test calls this
/// first; a second call is harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
