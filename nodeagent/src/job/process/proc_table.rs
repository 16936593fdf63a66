//! The processes in `/proc`, as the agent reads them to find a job's
//! processes: every process now, its state and process group, its owner and
//! its environment. A process may end while it is looked at: what cannot be
//! read is left out (or counts as not there).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// One process, as `/proc` shows it.
pub(super) struct ProcessEntry {
    /// Its pid.
    pub pid: i32,
    dir: PathBuf,
}

impl ProcessEntry {
    /// Process `pid`.
    pub fn of(pid: i32) -> ProcessEntry {
        ProcessEntry {
            pid,
            dir: PathBuf::from(format!("/proc/{pid}")),
        }
    }

    /// Its state letter and process group.
    pub fn state_and_group(&self) -> Option<(char, i32)> {
        state_and_group(&fs::read_to_string(self.dir.join("stat")).ok()?)
    }

    /// Whether it runs: it exists and is not a zombie (a zombie holds no
    /// memory, GPU or file; it only waits for its parent).
    pub fn is_live(&self) -> bool {
        self.state_and_group()
            .is_some_and(|(state, _)| live_state(state))
    }

    /// Whether it is a live member of process group `pgid`.
    pub fn is_live_in_group(&self, pgid: i32) -> bool {
        self.state_and_group()
            .is_some_and(|(state, group)| group == pgid && live_state(state))
    }

    /// Its owner's uid.
    pub fn uid(&self) -> Option<u32> {
        fs::metadata(&self.dir).map(|m| m.uid()).ok()
    }

    /// Its environment, NUL-separated `NAME=VALUE` entries.
    pub fn environ(&self) -> Option<Vec<u8>> {
        fs::read(self.dir.join("environ")).ok()
    }
}

/// Every process now, this one included; `None` when `/proc` cannot be read.
pub(super) fn processes() -> Option<impl Iterator<Item = ProcessEntry>> {
    let entries = fs::read_dir("/proc").ok()?;
    Some(entries.flatten().filter_map(|entry| {
        let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
        Some(ProcessEntry {
            pid,
            dir: entry.path(),
        })
    }))
}

/// This process's pid, to leave it out.
pub(super) fn own_pid() -> i32 {
    i32::try_from(std::process::id()).unwrap_or(-1)
}

fn live_state(state: char) -> bool {
    state != 'Z' && state != 'X'
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
    use super::*;

    #[test]
    fn reads_state_and_group_past_odd_command_names() {
        assert_eq!(
            state_and_group("42 (sleep) S 1 40 40 0 -1"),
            Some(('S', 40))
        );
        assert_eq!(state_and_group("42 (a) b (c)) Z 1 7 7 0"), Some(('Z', 7)));
        assert_eq!(state_and_group("garbage"), None);
    }

    #[test]
    fn this_process_is_seen_live() {
        let me = own_pid();
        assert!(processes().expect("/proc").any(|p| p.pid == me));
        assert!(ProcessEntry::of(me).is_live());
        assert!(!ProcessEntry::of(-5).is_live());
    }
}
