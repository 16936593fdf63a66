//! The one error type of every Slurm format parser.

use thiserror::Error;

/// A malformed value in one of Slurm's formats. `token` is the smallest piece of
/// the input that is wrong, so the user can find it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid {format} '{token}': {reason}")]
pub struct FormatError {
    /// Which format was being parsed, e.g. "hostlist" or "time limit".
    pub format: &'static str,
    /// The offending token, quoted back to the user.
    pub token: String,
    /// What is wrong and, where it helps, what is accepted instead.
    pub reason: String,
}

impl FormatError {
    /// Builds an error for `format` naming `token`.
    pub fn new(format: &'static str, token: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            format,
            token: token.into(),
            reason: reason.into(),
        }
    }
}
