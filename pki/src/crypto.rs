//! The process-wide rustls crypto provider.

/// Chooses rustls's ring provider for the process. rustls panics when it must
/// pick between two compiled-in providers, so every binary and test that uses
/// TLS calls this first; a second call is harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
