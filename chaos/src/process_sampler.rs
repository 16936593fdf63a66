//! What the cluster's processes cost while faults come and go: about once a
//! second, each controller's and agent's CPU time, resident memory, open file
//! descriptors and log size, read from procfs and the cluster's `pids/` and
//! `logs/` (a local cluster only: a deployment's processes are on other
//! hosts), recorded as `ProcessSample` events for the `resources` checker. A
//! leader that spins or floods its log through a fault shows here even when
//! every job survives it.
//!
//! It also reads what each controller's log gained since the last look for
//! [`CORE_HELD_LINE`], and records a `CoreHeld` event per line: a leader
//! whose disk held its Raft core past the core-hold limit stops vouching for
//! itself, and the `elections` checker counts that as a cause, whatever
//! fault (or none) the run injected then.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use corral_jepsen::history::EventKind;

use crate::recorder::Recorder;

/// How often each process is sampled.
const EVERY: Duration = Duration::from_secs(1);

/// What a leader logs when its Raft core has not answered past the
/// core-hold limit and it stops vouching for itself (corral-consensus,
/// `election/beacon.rs`). The `disk-stall` scenario counts it as the stall's
/// effect, so a change of the wording fails its coverage.
pub const CORE_HELD_LINE: &str = "it no longer vouches for itself";

/// Most bytes of one log read in one look (a flood is the `resources`
/// checker's to judge; the rest is skipped).
const MOST_READ: u64 = 4 << 20;

/// One process's figures now.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sample {
    pid: u32,
    cpu_ms: u64,
    rss_kib: u64,
    fds: u64,
}

/// Samples `names` (`controller-1`, `agent-gpu01`) of the local cluster in
/// `dir` until `stop`.
pub fn run(dir: &Path, names: &[String], recorder: &Recorder, stop: &AtomicBool) {
    let ticks_per_s = clock_ticks_per_second();
    let mut read_to: BTreeMap<&str, u64> = BTreeMap::new();
    while !stop.load(Ordering::SeqCst) {
        for name in names {
            let log = dir.join("logs").join(format!("{name}.log"));
            if name.starts_with("controller-") {
                let from = read_to.entry(name).or_insert(0);
                let (held, to) = new_lines_with(&log, *from, CORE_HELD_LINE);
                *from = to;
                for _ in 0..held {
                    recorder.record(EventKind::CoreHeld {
                        process: name.clone(),
                    });
                }
            }
            let Some(sample) = sample(dir, name, ticks_per_s) else {
                continue;
            };
            let log_bytes = std::fs::metadata(&log).map_or(0, |m| m.len());
            recorder.record(EventKind::ProcessSample {
                process: name.clone(),
                pid: sample.pid,
                cpu_ms: sample.cpu_ms,
                rss_kib: sample.rss_kib,
                fds: sample.fds,
                log_bytes,
            });
        }
        std::thread::sleep(EVERY);
    }
}

/// How many whole lines holding `text` the file at `path` gained past byte
/// `from`, and where the next look starts (after the last whole line; from
/// the start again when the file was rotated and is shorter now).
fn new_lines_with(path: &Path, from: u64, text: &str) -> (u64, u64) {
    let Ok(mut file) = std::fs::File::open(path) else {
        return (0, from);
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let from = if len < from { 0 } else { from };
    let from = from.max(len.saturating_sub(MOST_READ));
    let mut tail = Vec::new();
    if file.seek(SeekFrom::Start(from)).is_err()
        || file.take(len - from).read_to_end(&mut tail).is_err()
    {
        return (0, from);
    }
    let whole = tail.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let count = String::from_utf8_lossy(&tail[..whole])
        .lines()
        .filter(|line| line.contains(text))
        .count() as u64;
    (count, from + whole as u64)
}

/// The figures of process `name`, if it runs now.
fn sample(dir: &Path, name: &str, ticks_per_s: u64) -> Option<Sample> {
    let pid: u32 = std::fs::read_to_string(dir.join("pids").join(format!("{name}.pid")))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let proc_dir = Path::new("/proc").join(pid.to_string());
    let stat = std::fs::read_to_string(proc_dir.join("stat")).ok()?;
    let (state, utime, stime) = parse_stat(&stat)?;
    if state == 'Z' || state == 'X' {
        return None;
    }
    let status = std::fs::read_to_string(proc_dir.join("status")).ok()?;
    let rss_kib = parse_rss_kib(&status)?;
    let fds = std::fs::read_dir(proc_dir.join("fd")).ok()?.count() as u64;
    let cpu_ms = (utime + stime).saturating_mul(1000) / ticks_per_s.max(1);
    Some(Sample {
        pid,
        cpu_ms,
        rss_kib,
        fds,
    })
}

/// The state, user and system CPU ticks from `/proc/PID/stat` (the fields
/// after the command name, which may hold spaces and parentheses).
fn parse_stat(stat: &str) -> Option<(char, u64, u64)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime and stime are fields 14 and 15.
    let state = fields.first()?.chars().next()?;
    let utime = fields.get(11)?.parse().ok()?;
    let stime = fields.get(12)?.parse().ok()?;
    Some((state, utime, stime))
}

/// `VmRSS` from `/proc/PID/status`, KiB.
fn parse_rss_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`; 100 where it
/// cannot be asked).
fn clock_ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_the_command_name() {
        let stat = "4242 (corrald (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 1234 56 0 0 20 0 9 0 100 0 0";
        assert_eq!(parse_stat(stat), Some(('S', 1234, 56)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn rss_is_read_from_status() {
        let status = "Name:\tcorrald\nVmPeak:\t  9000 kB\nVmRSS:\t   51234 kB\nThreads:\t9\n";
        assert_eq!(parse_rss_kib(status), Some(51_234));
        assert_eq!(parse_rss_kib("Name:\tx\n"), None);
    }

    #[test]
    fn new_lines_are_counted_once_whole_and_again_after_a_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("controller-1.log");
        std::fs::write(&log, "a\nX held\nX ha").unwrap();
        let (count, to) = new_lines_with(&log, 0, "X");
        assert_eq!((count, to), (1, 9), "the unfinished line waits");
        std::fs::write(&log, "a\nX held\nX half\nb\n").unwrap();
        assert_eq!(new_lines_with(&log, to, "X"), (1, 18));
        assert_eq!(new_lines_with(&log, 18, "X"), (0, 18));
        std::fs::write(&log, "X new\n").unwrap();
        assert_eq!(
            new_lines_with(&log, 18, "X"),
            (1, 6),
            "rotated: read from the start"
        );
        assert_eq!(new_lines_with(&dir.path().join("none"), 5, "X"), (0, 5));
    }

    #[test]
    fn this_process_can_be_sampled() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("pids")).unwrap();
        std::fs::write(
            dir.path().join("pids/self.pid"),
            std::process::id().to_string(),
        )
        .unwrap();
        let me = sample(dir.path(), "self", clock_ticks_per_second()).unwrap();
        assert_eq!(me.pid, std::process::id());
        assert!(me.rss_kib > 0 && me.fds > 0, "{me:?}");
        assert!(sample(dir.path(), "missing", 100).is_none());
    }
}
