//! Exit statuses, so scripts can tell kinds of failure apart, and how an error
//! becomes one.

use tonic::Code;

use crate::connection::StatusError;

/// The cluster refused the request (bad input, permission, unknown object).
pub const REFUSED: u8 = 1;
/// Command-line usage error (clap uses 2 too).
pub const USAGE: u8 = 2;
/// The cluster could not be reached, or did not answer in time.
pub const UNREACHABLE: u8 = 3;
/// A job waited for ended unsuccessfully.
pub const JOB_FAILED: u8 = 4;

/// The status for an error that ended the command.
pub fn code_for(error: &anyhow::Error) -> u8 {
    match error.downcast_ref::<StatusError>() {
        Some(StatusError(status)) => match status.code() {
            Code::Unavailable | Code::DeadlineExceeded => UNREACHABLE,
            _ => REFUSED,
        },
        None if error.to_string().starts_with("cannot reach the cluster") => UNREACHABLE,
        None => REFUSED,
    }
}
