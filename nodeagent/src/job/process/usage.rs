//! What a job's processes use now, read from `/proc` as Slurm's
//! jobacct_gather/linux reads it, for `sstat`: per process group, the live
//! members' pids, CPU time (user + system, of the processes and their reaped
//! children), resident and virtual memory, major page faults, and the bytes
//! read and written (`rchar`/`wchar`, which Slurm reports as `fs/disk`). A
//! process that ends while it is read is left out; a reading the agent may not
//! make (another user's `io` without root) counts as 0.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;

use super::proc_table::processes;

/// What one process group uses, summed over its processes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupUsage {
    /// Its live processes.
    pub pids: Vec<u32>,
    /// CPU time, milliseconds.
    pub cpu_ms: u64,
    /// Resident memory, KiB.
    pub rss_kib: u64,
    /// Virtual memory, KiB.
    pub vmsize_kib: u64,
    /// Major page faults.
    pub major_faults: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
}

/// One process's figures from its `stat` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StatFigures {
    group: i32,
    ticks: u64,
    major_faults: u64,
    vsize_bytes: u64,
    rss_pages: u64,
}

/// The usage of each of `groups` (a group with no live process is left out).
pub fn usage_of_groups(groups: &BTreeSet<i32>) -> BTreeMap<i32, GroupUsage> {
    let mut usage: BTreeMap<i32, GroupUsage> = BTreeMap::new();
    let Some(all) = processes() else {
        return usage;
    };
    let ticks_per_second = clock_ticks();
    let page_kib = page_size() / 1024;
    for process in all {
        let dir = format!("/proc/{}", process.pid);
        let Some(stat) = fs::read_to_string(format!("{dir}/stat"))
            .ok()
            .and_then(|line| parse_stat(&line))
        else {
            continue;
        };
        if !groups.contains(&stat.group) {
            continue;
        }
        let (read, written) = fs::read_to_string(format!("{dir}/io"))
            .ok()
            .map(|io| parse_io(&io))
            .unwrap_or_default();
        let entry = usage.entry(stat.group).or_default();
        entry.pids.extend(u32::try_from(process.pid).ok());
        entry.cpu_ms = entry
            .cpu_ms
            .saturating_add(stat.ticks.saturating_mul(1000) / ticks_per_second.max(1));
        entry.rss_kib = entry
            .rss_kib
            .saturating_add(stat.rss_pages.saturating_mul(page_kib));
        entry.vmsize_kib = entry.vmsize_kib.saturating_add(stat.vsize_bytes / 1024);
        entry.major_faults = entry.major_faults.saturating_add(stat.major_faults);
        entry.read_bytes = entry.read_bytes.saturating_add(read);
        entry.write_bytes = entry.write_bytes.saturating_add(written);
    }
    for group in usage.values_mut() {
        group.pids.sort_unstable();
    }
    usage
}

/// The figures of a `/proc/<pid>/stat` line (`pid (comm) state ppid pgrp ...`;
/// comm may hold spaces and parentheses); `None` for a zombie or a line that
/// does not parse.
fn parse_stat(line: &str) -> Option<StatFigures> {
    let after_comm = &line[line.rfind(')')? + 1..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let number = |i: usize| -> Option<u64> { fields.get(i)?.parse().ok() };
    let state = fields.first()?.chars().next()?;
    if state == 'Z' || state == 'X' {
        return None;
    }
    let group = fields.get(2)?.parse().ok()?;
    // utime, stime, cutime, cstime: fields 14-17 of proc(5), 11-14 here.
    let ticks = (11..=14).try_fold(0u64, |sum, i| Some(sum.saturating_add(number(i)?)))?;
    Some(StatFigures {
        group,
        ticks,
        major_faults: number(9)?,
        vsize_bytes: number(20)?,
        rss_pages: number(21)?,
    })
}

/// `rchar` and `wchar` of a `/proc/<pid>/io` file.
fn parse_io(io: &str) -> (u64, u64) {
    let value = |name: &str| {
        io.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    (value("rchar:"), value("wchar:"))
}

fn clock_ticks() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|t| u64::try_from(t).ok())
        .unwrap_or(100)
}

fn page_size() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|t| u64::try_from(t).ok())
        .unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_past_odd_names_and_zombies() {
        let line = "4242 (python (rank 0)) R 1 4240 4240 0 -1 4194304 1000 0 7 0 150 50 10 5 20 0 8 0 12345 104857600 2560 18446744073709551615";
        assert_eq!(
            parse_stat(line),
            Some(StatFigures {
                group: 4240,
                ticks: 215,
                major_faults: 7,
                vsize_bytes: 104_857_600,
                rss_pages: 2560,
            })
        );
        assert_eq!(
            parse_stat("9 (x) Z 1 9 9 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 1 0 0"),
            None
        );
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (short) S 0 1"), None);
    }

    #[test]
    fn io_counts_characters_as_slurm_does() {
        let io = "rchar: 1000\nwchar: 20\nsyscr: 3\nread_bytes: 4096\nwrite_bytes: 0\n";
        assert_eq!(parse_io(io), (1000, 20));
        assert_eq!(parse_io(""), (0, 0));
    }

    #[test]
    fn this_process_group_is_measured() {
        let group = nix::unistd::getpgrp().as_raw();
        let usage = usage_of_groups(&BTreeSet::from([group]));
        let mine = usage.get(&group).expect("this test's own group");
        assert!(mine.pids.contains(&std::process::id()));
        assert!(mine.rss_kib > 0 && mine.vmsize_kib >= mine.rss_kib);
    }
}
