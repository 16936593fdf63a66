//! `inject`: the client side of the simulated backend's control socket, used by
//! `corral local xid` and the chaos tests. Blocking, with a short timeout.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::error::GpuError;
use super::fault_command::{FaultCommand, MAX_COMMAND_LEN};

/// How long `inject` waits for the agent to read the command and answer.
pub const INJECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends `command` to the simulated GPUs listening at `control` and waits for the
/// answer. Fails with [`GpuError::AgentNotRunning`] when nothing listens there,
/// and [`GpuError::InjectionRefused`] with the agent's reason when it refuses
/// the command (for example a GPU index out of range).
pub fn inject(control: &Path, command: &FaultCommand) -> Result<(), GpuError> {
    let io_error = |source: io::Error| GpuError::Injection {
        path: control.to_path_buf(),
        source,
    };
    let mut stream = UnixStream::connect(control).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => GpuError::AgentNotRunning {
            path: control.to_path_buf(),
        },
        _ => io_error(source),
    })?;
    stream
        .set_read_timeout(Some(INJECT_TIMEOUT))
        .map_err(io_error)?;
    stream
        .set_write_timeout(Some(INJECT_TIMEOUT))
        .map_err(io_error)?;
    let line = format!("{command}\n");
    stream.write_all(line.as_bytes()).map_err(io_error)?;
    let mut answer = String::new();
    let limit = u64::try_from(MAX_COMMAND_LEN * 4).unwrap_or(u64::MAX);
    BufReader::new(stream.take(limit))
        .read_line(&mut answer)
        .map_err(io_error)?;
    let answer = answer.trim_end();
    if answer == "ok" {
        return Ok(());
    }
    let reason = match answer.strip_prefix("error: ") {
        Some(reason) => reason.to_string(),
        None if answer.is_empty() => {
            "the agent closed the connection without answering".to_string()
        }
        None => format!("unexpected answer {answer:?}"),
    };
    Err(GpuError::InjectionRefused {
        command: command.to_string(),
        reason,
    })
}
