//! A job's process group: signalling all of it, and telling whether any of it
//! is still running.
//!
//! A process that leaves the group (`setsid`, `setpgid`) escapes both; the
//! agent finds such processes by their environment instead (see `escaped`).
//! corral does not confine jobs with cgroups.

use corral_state::slurm::signal::Signal;
use nix::errno::Errno;
use nix::sys::signal::{self, killpg};
use nix::unistd::Pid;

use super::ProcessError;
use super::proc_table::{ProcessEntry, processes};

/// Sends `signal` to every process of group `pgid`. A group with no process left
/// is not an error: there is nothing left to signal.
pub(super) fn signal_group(pgid: Pid, signal: Signal) -> Result<(), ProcessError> {
    let nix_signal = signal::Signal::try_from(i32::from(signal.0))
        .map_err(|_| ProcessError::UnsupportedSignal { signal: signal.0 })?;
    match killpg(pgid, nix_signal) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(source) => Err(ProcessError::Signal {
            signal: signal.name(),
            pgid: pgid.as_raw().unsigned_abs(),
            source,
        }),
    }
}

/// True while a process of group `pgid` exists and is not a zombie (see
/// [`group_alive`]).
pub fn process_group_alive(pgid: i32) -> bool {
    group_alive(Pid::from_raw(pgid))
}

/// True while a process of group `pgid` exists and is not a zombie (a zombie
/// holds no memory, GPU or file; it only waits for its parent, which may be an
/// init that never reaps).
pub(super) fn group_alive(pgid: Pid) -> bool {
    match killpg(pgid, None) {
        Err(Errno::ESRCH) => false,
        // The group exists (EPERM: it exists but is not ours to signal).
        _ => has_live_member(pgid).unwrap_or(true),
    }
}

/// The live (not zombie) processes of group `pgid`, from `/proc`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    processes()
        .into_iter()
        .flatten()
        .filter(|p| p.is_live_in_group(pgid))
        .map(|p| p.pid)
        .collect()
}

/// True while process `pid` exists and is not a zombie.
pub fn process_alive(pid: i32) -> bool {
    ProcessEntry::of(pid).is_live()
}

/// Whether `/proc` shows a process of group `pgid` that is not a zombie; `None`
/// when `/proc` cannot be read.
fn has_live_member(pgid: Pid) -> Option<bool> {
    Some(processes()?.any(|p| p.is_live_in_group(pgid.as_raw())))
}
