//! Payload encoding for peer RPCs: postcard, which is compact for the byte
//! vectors inside snapshot chunks and log entries.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Encodes a value for the wire.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, postcard::Error> {
    postcard::to_stdvec(value)
}

/// Decodes a value from the wire.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, postcard::Error> {
    postcard::from_bytes(bytes)
}

/// Largest peer message accepted or sent: a batch of log entries or one snapshot
/// chunk, with headroom.
pub const MAX_MESSAGE_BYTES: usize = 128 * 1024 * 1024;
