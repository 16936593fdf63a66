//! A job's process group: signalling all of it, and telling whether any of it
//! is still running.
//!
//! A process that leaves the group (`setsid`, `setpgid`) escapes both; the
//! agent finds such processes by their environment instead (see `escaped`).
//! corral does not confine jobs with cgroups.

use std::fs;

use corral_state::slurm::signal::Signal;
use nix::errno::Errno;
use nix::sys::signal::{self, killpg};
use nix::unistd::Pid;

use super::ProcessError;

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
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut members = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if let Ok(stat) = fs::read_to_string(entry.path().join("stat"))
            && let Some((state, group)) = state_and_group(&stat)
            && group == pgid
            && state != 'Z'
            && state != 'X'
        {
            members.push(pid);
        }
    }
    members
}

/// True while process `pid` exists and is not a zombie.
pub fn process_alive(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| state_and_group(&stat))
        .is_some_and(|(state, _)| state != 'Z' && state != 'X')
}

/// Whether `/proc` shows a process of group `pgid` that is not a zombie; `None`
/// when `/proc` cannot be read.
fn has_live_member(pgid: Pid) -> Option<bool> {
    let entries = fs::read_dir("/proc").ok()?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // A process may exit while we look: skip what cannot be read.
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((state, group)) = state_and_group(&stat)
            && group == pgid.as_raw()
            && state != 'Z'
            && state != 'X'
        {
            return Some(true);
        }
    }
    Some(false)
}

/// The state letter and process group from a `/proc/<pid>/stat` line
/// (`pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses).
fn state_and_group(stat: &str) -> Option<(char, i32)> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_comm.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let group = fields.next()?.parse().ok()?;
    Some((state, group))
}

#[cfg(test)]
mod tests {
    use super::state_and_group;

    #[test]
    fn reads_state_and_group_past_odd_command_names() {
        assert_eq!(
            state_and_group("42 (sleep) S 1 40 40 0 -1"),
            Some(('S', 40))
        );
        assert_eq!(state_and_group("42 (a) b (c)) Z 1 7 7 0"), Some(('Z', 7)));
        assert_eq!(state_and_group("garbage"), None);
    }
}
