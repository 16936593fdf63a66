//! The JSON encoding of the domain records the API carries (`*_json` fields):
//! serde JSON of corral-state's types, so `--json` output and the wire agree.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A record that could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
#[error("malformed {what} record: {source}; are the client and controller the same version?")]
pub struct RecordError {
    /// What was being read.
    pub what: &'static str,
    /// The decoder's complaint.
    #[source]
    pub source: serde_json::Error,
}

/// Encodes a record named `what` (for the error message).
pub fn encode<T: Serialize>(what: &'static str, value: &T) -> Result<String, RecordError> {
    serde_json::to_string(value).map_err(|source| RecordError { what, source })
}

/// Decodes a record named `what` (for the error message).
pub fn decode<T: DeserializeOwned>(what: &'static str, json: &str) -> Result<T, RecordError> {
    serde_json::from_str(json).map_err(|source| RecordError { what, source })
}
