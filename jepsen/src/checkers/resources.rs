//! Promise 13: no process spins or floods its log, and none leaks. The runner
//! samples each of the cluster's processes (`controller-N`, `agent-gpuNN`)
//! about once a second (`ProcessSample`: cumulative CPU time since its pid
//! started, resident memory, open file descriptors, the size of its log
//! file), and from those samples, per process:
//!
//! - **CPU**: over any window of at least 10 s between two samples of one pid
//!   (each sample against the latest sample of that pid at least 10 s before
//!   it), the process used at most 800 ms of CPU per second of wall time,
//!   0.8 of one core. A spinning loop is a full core. The bound is not lower
//!   because the cluster may be debug builds on a 2-core CI machine under a
//!   busy workload, where a healthy leader replaying its log after a failover
//!   runs hot for a while; a steady full core is what it must catch. A
//!   restart (a new pid) starts its CPU count afresh, so windows never span
//!   pids.
//! - **Log**: over any window of at least 10 s between two samples of the
//!   process, its log file grew by at most 100,000 bytes a second. Every run
//!   of a process name writes the same file, so its size only grows, and the
//!   windows may span a restart.
//! - **Leaks**: for each pid sampled for at least 60 s, its open fds and
//!   resident memory at its last sample against its first sample 20 s or
//!   more after its first (start-up growth, caches filling, connections
//!   opening, is not a leak): fds may grow by 64 plus 50%, memory by
//!   256 MiB plus 100%. The bounds are generous on purpose: they catch what
//!   grows with every fault over a long run (a descriptor per reconnect, a
//!   buffer per failover), not a warm cache, a bigger Raft log or the
//!   allocator's high-water mark.
//!
//! Each episode over a bound is one violation naming the process, its pid,
//! the span it covered and its worst window's figure against the bound. The
//! figures (`samples`, `processes_sampled`, `max_cpu_pct_10s`,
//! `max_log_bytes_per_s_10s`, `pids_leak_checked`, `max_fds_growth`,
//! `max_rss_growth_mib`) show what was measured; a history without samples
//! (older ones, or a runner that samples nothing) has nothing to check
//! (`samples` = 0) and holds.

use std::collections::{BTreeMap, BTreeSet};

use crate::history::{EventKind, History};
use crate::verdict::Verdict;

/// The checker's name.
pub const NAME: &str = "resources";
const PROMISE: &str = "no process spins or floods its log, and none leaks";

/// The shortest window the CPU and log rates are averaged over, ms: long
/// enough that a burst (an election, a start-up, a log replay) averages out.
const WINDOW_MS: u64 = 10_000;

/// The most CPU a process may use per second of wall time over a window,
/// ms: 0.8 of one core. A spinning loop uses a full core; a busy debug build
/// on a 2-core CI machine may well use half of one.
const MAX_CPU_MS_PER_WALL_S: u64 = 800;

/// The most a process's log may grow per second over a window, bytes.
const MAX_LOG_BYTES_PER_S: u64 = 100_000;

/// How long after a pid's first sample its leak baseline is taken, ms.
const LEAK_BASELINE_AFTER_MS: u64 = 20_000;

/// How long a pid must have been sampled for its leak check, ms: shorter
/// runs show start-up, not a leak.
const LEAK_MIN_SAMPLED_MS: u64 = 60_000;

/// Open fds a pid may gain over its baseline, plus [`FD_GROWTH_PCT`] of it.
const FD_GROWTH_SLACK: u64 = 64;
/// Percent of its baseline a pid's open fds may grow by, beyond the slack.
const FD_GROWTH_PCT: u64 = 50;
/// Resident KiB a pid may gain over its baseline (256 MiB), plus
/// [`RSS_GROWTH_PCT`] of it.
const RSS_GROWTH_SLACK_KIB: u64 = 256 * 1024;
/// Percent of its baseline a pid's resident memory may grow by, beyond the
/// slack.
const RSS_GROWTH_PCT: u64 = 100;

/// One sample of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sample {
    t: u64,
    pid: u32,
    cpu_ms: u64,
    rss_kib: u64,
    fds: u64,
    log_bytes: u64,
}

/// For each sample of `samples` (in time order), the latest sample at least
/// [`WINDOW_MS`] before it, as index pairs `(from, to)`.
fn windows(samples: &[Sample]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut from: Option<usize> = None;
    for (to, sample) in samples.iter().enumerate() {
        let mut next = from.map_or(0, |f| f + 1);
        while next < to && sample.t.saturating_sub(samples[next].t) >= WINDOW_MS {
            from = Some(next);
            next += 1;
        }
        if let Some(from) = from {
            out.push((from, to));
        }
    }
    out
}

/// A window's rate: `delta` units over `ms` of wall time, per second.
fn per_second(delta: u64, ms: u64) -> f64 {
    if ms == 0 {
        return 0.0;
    }
    delta as f64 * 1000.0 / ms as f64
}

/// A run of windows over a bound that overlap one another.
struct Episode {
    from: u64,
    to: u64,
    pids: BTreeSet<u32>,
    /// The worst window's rate per second, and its span.
    worst: (f64, u64, u64),
}

/// Windows of `samples` whose growth of `value` exceeds `bound` per second,
/// merged into episodes where they overlap; and the highest rate of any
/// window.
fn over_bound(
    samples: &[Sample],
    value: impl Fn(&Sample) -> u64,
    bound: u64,
) -> (Vec<Episode>, f64) {
    let mut episodes: Vec<Episode> = Vec::new();
    let mut highest = 0.0f64;
    for (from, to) in windows(samples) {
        let (a, b) = (&samples[from], &samples[to]);
        let ms = b.t.saturating_sub(a.t);
        // A count that went backwards (a log file truncated) grew by nothing.
        let delta = value(b).saturating_sub(value(a));
        let rate = per_second(delta, ms);
        highest = highest.max(rate);
        if u128::from(delta) * 1000 <= u128::from(bound) * u128::from(ms) {
            continue;
        }
        let pids = samples[from..=to].iter().map(|s| s.pid);
        match episodes.last_mut() {
            Some(episode) if a.t <= episode.to => {
                episode.to = b.t;
                episode.pids.extend(pids);
                if rate > episode.worst.0 {
                    episode.worst = (rate, a.t, b.t);
                }
            }
            _ => episodes.push(Episode {
                from: a.t,
                to: b.t,
                pids: pids.collect(),
                worst: (rate, a.t, b.t),
            }),
        }
    }
    (episodes, highest)
}

/// `process (pid N)`, or `(pids N, M)` for a span across restarts.
fn who(process: &str, pids: &BTreeSet<u32>) -> String {
    let list: Vec<String> = pids.iter().map(u32::to_string).collect();
    let label = if list.len() == 1 { "pid" } else { "pids" };
    format!("{process} ({label} {})", list.join(", "))
}

/// Runs of consecutive samples with one pid.
fn by_pid(samples: &[Sample]) -> impl Iterator<Item = &[Sample]> {
    samples.chunk_by(|a, b| a.pid == b.pid)
}

/// Checks the promise.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::new(NAME, PROMISE);
    let mut processes: BTreeMap<&str, Vec<Sample>> = BTreeMap::new();
    for event in &history.events {
        if let EventKind::ProcessSample {
            process,
            pid,
            cpu_ms,
            rss_kib,
            fds,
            log_bytes,
        } = &event.kind
        {
            processes.entry(process.as_str()).or_default().push(Sample {
                t: event.t,
                pid: *pid,
                cpu_ms: *cpu_ms,
                rss_kib: *rss_kib,
                fds: *fds,
                log_bytes: *log_bytes,
            });
        }
    }
    let samples: usize = processes.values().map(Vec::len).sum();
    let (mut max_cpu, mut max_log) = (0.0f64, 0.0f64);
    let mut leaks = LeakFigures::default();
    for (process, samples) in &mut processes {
        // The history is in time order once sorted; a stray unsorted one
        // must not make a window's span negative.
        samples.sort_by_key(|s| s.t);
        let samples: &[Sample] = samples;
        for run in by_pid(samples) {
            let (episodes, highest) = over_bound(run, |s| s.cpu_ms, MAX_CPU_MS_PER_WALL_S);
            max_cpu = max_cpu.max(highest);
            for episode in episodes {
                let (rate, from, to) = episode.worst;
                verdict.violation(
                    Some(episode.to),
                    None,
                    format!(
                        "{} used {:.0}% of a core over {from}..{to} ms, above the {}% bound (10 s windows over it from {} to {} ms: spinning?)",
                        who(process, &episode.pids),
                        rate / 10.0,
                        MAX_CPU_MS_PER_WALL_S / 10,
                        episode.from,
                        episode.to
                    ),
                );
            }
            check_leaks(&mut verdict, process, run, &mut leaks);
        }
        let (episodes, highest) = over_bound(samples, |s| s.log_bytes, MAX_LOG_BYTES_PER_S);
        max_log = max_log.max(highest);
        for episode in episodes {
            let (rate, from, to) = episode.worst;
            verdict.violation(
                Some(episode.to),
                None,
                format!(
                    "{} grew its log by {:.0} bytes/s over {from}..{to} ms, above the {MAX_LOG_BYTES_PER_S} bytes/s bound (10 s windows over it from {} to {} ms: flooding its log?)",
                    who(process, &episode.pids),
                    rate,
                    episode.from,
                    episode.to
                ),
            );
        }
    }
    verdict.measure("samples", samples as f64);
    verdict.measure("processes_sampled", processes.len() as f64);
    verdict.measure("max_cpu_pct_10s", (max_cpu / 10.0).round());
    verdict.measure("max_log_bytes_per_s_10s", max_log.round());
    verdict.measure("pids_leak_checked", f64::from(leaks.checked));
    verdict.measure("max_fds_growth", leaks.max_fds_gained as f64);
    verdict.measure(
        "max_rss_growth_mib",
        (leaks.max_rss_gained_kib / 1024) as f64,
    );
    verdict
}

/// What the leak checks measured.
#[derive(Debug, Default)]
struct LeakFigures {
    /// Pids sampled long enough to check.
    checked: u32,
    /// The most open fds a checked pid gained over its baseline.
    max_fds_gained: u64,
    /// The most resident KiB a checked pid gained over its baseline.
    max_rss_gained_kib: u64,
}

/// The leak check of one pid's samples (`run`), if sampled long enough,
/// its figures added to `figures`.
fn check_leaks(verdict: &mut Verdict, process: &str, run: &[Sample], figures: &mut LeakFigures) {
    let (Some(first), Some(last)) = (run.first(), run.last()) else {
        return;
    };
    if last.t.saturating_sub(first.t) < LEAK_MIN_SAMPLED_MS {
        return;
    }
    let Some(base) = run
        .iter()
        .find(|s| s.t >= first.t.saturating_add(LEAK_BASELINE_AFTER_MS))
    else {
        return;
    };
    figures.checked += 1;
    let pid = BTreeSet::from([first.pid]);
    let fds_gained = last.fds.saturating_sub(base.fds);
    let rss_gained = last.rss_kib.saturating_sub(base.rss_kib);
    figures.max_fds_gained = figures.max_fds_gained.max(fds_gained);
    figures.max_rss_gained_kib = figures.max_rss_gained_kib.max(rss_gained);
    let fds_allowed = FD_GROWTH_SLACK + base.fds * FD_GROWTH_PCT / 100;
    if fds_gained > fds_allowed {
        verdict.violation(
            Some(last.t),
            None,
            format!(
                "{} went from {} open fds at {} ms to {} at {} ms, {fds_gained} more where {FD_GROWTH_SLACK} + {FD_GROWTH_PCT}% ({fds_allowed}) are allowed (leaking fds?)",
                who(process, &pid),
                base.fds,
                base.t,
                last.fds,
                last.t
            ),
        );
    }
    let rss_allowed = RSS_GROWTH_SLACK_KIB + base.rss_kib * RSS_GROWTH_PCT / 100;
    if rss_gained > rss_allowed {
        verdict.violation(
            Some(last.t),
            None,
            format!(
                "{} went from {} KiB resident at {} ms to {} KiB at {} ms, {rss_gained} KiB more where {} MiB + {RSS_GROWTH_PCT}% ({rss_allowed} KiB) are allowed (leaking memory?)",
                who(process, &pid),
                base.rss_kib,
                base.t,
                last.rss_kib,
                last.t,
                RSS_GROWTH_SLACK_KIB / 1024
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Builder;

    /// Samples of `process` with `pid` once a second from `from` for `secs`
    /// seconds (inclusive of both ends), its figures at each second `i`
    /// (counting from 0) given by `at(i)`: `(cpu_ms, rss_kib, fds,
    /// log_bytes)`.
    fn samples<'b>(
        b: &'b mut Builder,
        process: &str,
        pid: u32,
        (from, secs): (u64, u64),
        at: impl Fn(u64) -> (u64, u64, u64, u64),
    ) -> &'b mut Builder {
        for i in 0..=secs {
            let (cpu_ms, rss_kib, fds, log_bytes) = at(i);
            b.event(
                from + i * 1_000,
                EventKind::ProcessSample {
                    process: process.into(),
                    pid,
                    cpu_ms,
                    rss_kib,
                    fds,
                    log_bytes,
                },
            );
        }
        b
    }

    /// 5% of a core, 50 MiB, 30 fds, 1 KB of log a second.
    fn quiet(i: u64) -> (u64, u64, u64, u64) {
        (50 * i, 50 * 1024, 30, 1_000 * i)
    }

    /// Three quiet controllers and an agent for 90 s.
    fn quiet_cluster() -> Builder {
        let mut b = Builder::new();
        for (n, name) in [
            "controller-1",
            "controller-2",
            "controller-3",
            "agent-gpu01",
        ]
        .iter()
        .enumerate()
        {
            samples(&mut b, name, 100 + n as u32, (0, 90), quiet);
        }
        b
    }

    #[test]
    fn a_quiet_cluster_passes_with_its_figures() {
        let verdict = check(&quiet_cluster().history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("samples"), Some(4.0 * 91.0));
        assert_eq!(verdict.measured("processes_sampled"), Some(4.0));
        assert_eq!(verdict.measured("max_cpu_pct_10s"), Some(5.0));
        assert_eq!(verdict.measured("max_log_bytes_per_s_10s"), Some(1_000.0));
        assert_eq!(verdict.measured("pids_leak_checked"), Some(4.0));
        assert_eq!(verdict.measured("max_fds_growth"), Some(0.0));
        assert_eq!(verdict.measured("max_rss_growth_mib"), Some(0.0));
    }

    #[test]
    fn a_process_spinning_a_full_core_for_15_s_is_caught_once() {
        let mut b = quiet_cluster();
        // controller-2 again, after a restart at 100 s, spinning from 105 s.
        samples(&mut b, "controller-2", 200, (100_000, 20), |i| {
            let spinning = i.saturating_sub(5) * 1_000;
            (50 * i + spinning, 50 * 1024, 30, 91_000 + 1_000 * i)
        });
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        let violation = &verdict.violations[0];
        assert_eq!(violation.job, None);
        assert_eq!(violation.t, Some(120_000));
        assert!(
            violation
                .message
                .starts_with("controller-2 (pid 200) used 105% of a core over 105000..115000 ms, above the 80% bound"),
            "{verdict:?}"
        );
        assert!(
            violation.message.contains("from 103000 to 120000 ms"),
            "{verdict:?}"
        );
        assert_eq!(verdict.measured("max_cpu_pct_10s"), Some(105.0));
    }

    #[test]
    fn a_process_flooding_its_log_at_1_mb_a_second_for_12_s_is_caught() {
        let mut b = quiet_cluster();
        samples(&mut b, "agent-gpu02", 300, (0, 30), |i| {
            let flood = i.clamp(10, 22) - 10;
            (50 * i, 50 * 1024, 30, 1_000 * i + flood * 1_000_000)
        });
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        let message = &verdict.violations[0].message;
        assert!(
            message.starts_with("agent-gpu02 (pid 300) grew its log by 1001000 bytes/s over"),
            "{message}"
        );
        assert!(
            message.contains("above the 100000 bytes/s bound"),
            "{message}"
        );
        assert_eq!(
            verdict.measured("max_log_bytes_per_s_10s"),
            Some(1_001_000.0)
        );
        assert_eq!(verdict.measured("max_cpu_pct_10s"), Some(5.0));
    }

    #[test]
    fn fds_growing_from_20_to_500_over_120_s_are_caught() {
        let mut b = quiet_cluster();
        samples(&mut b, "agent-gpu03", 400, (0, 120), |i| {
            (50 * i, 50 * 1024, 20 + 4 * i, 1_000 * i)
        });
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        let violation = &verdict.violations[0];
        assert_eq!(violation.t, Some(120_000));
        assert!(
            violation.message.starts_with(
                "agent-gpu03 (pid 400) went from 100 open fds at 20000 ms to 500 at 120000 ms, 400 more where 64 + 50% (114) are allowed"
            ),
            "{verdict:?}"
        );
        assert_eq!(verdict.measured("max_fds_growth"), Some(400.0));
    }

    #[test]
    fn memory_doubling_past_256_mib_is_caught_and_a_warm_cache_is_not() {
        // 100 MiB to 300 MiB: 200 MiB more, within 256 MiB + 100%.
        let mut b = Builder::new();
        samples(&mut b, "controller-1", 1, (0, 90), |i| {
            (0, 100 * 1024 + (200 * 1024 * i) / 90, 30, 0)
        });
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        // 100 MiB to 2 GiB is a leak.
        let mut b = Builder::new();
        samples(&mut b, "controller-1", 1, (0, 90), |i| {
            (0, 100 * 1024 + (1948 * 1024 * i) / 90, 30, 0)
        });
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(
            verdict.violations[0]
                .message
                .contains("KiB resident at 20000 ms"),
            "{verdict:?}"
        );
    }

    #[test]
    fn a_pid_sampled_for_under_60_s_is_not_leak_checked() {
        let mut b = Builder::new();
        samples(&mut b, "agent-gpu01", 1, (0, 50), |i| {
            (0, 1024, 20 + 20 * i, 0)
        });
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("pids_leak_checked"), Some(0.0));
    }

    #[test]
    fn a_restart_starts_cpu_afresh_without_a_false_violation() {
        let mut b = Builder::new();
        // Half a core for 40 s (20 s of CPU), then a restart whose count
        // starts again at 0 and runs at 60%; the log file carries on.
        samples(&mut b, "controller-1", 100, (0, 40), |i| {
            (500 * i, 50 * 1024, 30, 1_000 * i)
        });
        samples(&mut b, "controller-1", 200, (41_000, 20), |i| {
            (600 * i, 50 * 1024, 30, 41_000 + 1_000 * i)
        });
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("max_cpu_pct_10s"), Some(60.0));
        assert_eq!(verdict.measured("max_log_bytes_per_s_10s"), Some(1_000.0));
        assert_eq!(verdict.measured("processes_sampled"), Some(1.0));
    }

    #[test]
    fn without_samples_there_is_nothing_to_check_and_it_says_so() {
        let mut b = Builder::new();
        b.final_job(crate::testing::finished(1, "w1"));
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("samples"), Some(0.0));
        assert_eq!(verdict.measured("processes_sampled"), Some(0.0));
        assert_eq!(verdict.measured("max_cpu_pct_10s"), Some(0.0));
    }
}
