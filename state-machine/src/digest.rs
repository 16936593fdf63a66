//! A stable digest of the whole state: SHA-256 of its canonical encoding. Replicas
//! that applied the same log have the same digest; tests compare them.

use sha2::{Digest, Sha256};

use crate::state::ClusterState;

/// A 32-byte state digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StateDigest(pub [u8; 32]);

impl std::fmt::Display for StateDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl ClusterState {
    /// The digest of the state. Every map in the state is ordered, so the encoding,
    /// and with it the digest, depends only on the contents.
    pub fn digest(&self) -> StateDigest {
        let mut hasher = Sha256::new();
        // Encoding an in-memory state cannot fail: every type in it is plain data
        // that postcard supports. A failure is a programming error (a new field of
        // a type postcard cannot encode) and every test would catch it.
        let bytes = postcard::to_stdvec(self).expect("cluster state always encodes");
        hasher.update(&bytes);
        StateDigest(hasher.finalize().into())
    }
}
