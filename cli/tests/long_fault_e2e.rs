//! Faults that last a minute, end to end on real processes: a leader cut off
//! from the other controllers and the agents for 60 s stays quiet while it is
//! cut off (its log and its CPU stay small) and, once the cut heals, is a
//! replica with lag 0 again. Once through the loopback fault proxy (no root
//! needed) and once with every process in a network namespace of its own.
//!
//! Before the fix the cut-off leader re-entered its loop as fast as the CPU
//! allowed, logging a start and an end of leadership each turn: 800 MB of log
//! in 12 s, and it never rejoined.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use support::{LocalCluster, logs, netns_unsupported, wait_until};

/// How long the leader is cut off.
const CUT: Duration = Duration::from_secs(60);
/// Most log a cut-off controller may write while cut off, bytes per second.
/// (The loop that spun wrote about 70 MB/s; quiet, it writes under 1 KB/s.)
const MAX_LOG_BYTES_PER_SEC: u64 = 20 * 1024;
/// Most CPU a cut-off controller may use while cut off, as a share of a core.
const MAX_CPU_SHARE: f64 = 0.30;
/// Generous: only catches a replica that never rejoins.
const REJOIN_PATIENCE: Duration = Duration::from_secs(60);

/// User plus system CPU time of `pid` so far, in seconds (procfs).
fn cpu_seconds(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name may hold spaces: fields are counted after its ')'.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 here.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let per_second = nix_ticks_per_second();
    ticks as f64 / per_second
}

fn nix_ticks_per_second() -> f64 {
    let out = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(100.0)
}

fn a_leader_cut_off_for_a_minute_stays_quiet_and_rejoins(network: &str) {
    let cluster = LocalCluster::start_with_args(3, &["--nodes", "2", network]);
    let dir = cluster.dir.path();
    cluster.ok(
        &support::me(),
        &["submit", "--gpus-per-node=8", "--wrap", "sleep 600"],
    );
    let old = cluster.leader();
    let pid = cluster.pid(old);
    let log = dir.join(format!("logs/controller-{old}.log"));
    let others: Vec<String> = (1..=3)
        .filter(|c| *c != old)
        .map(|c| format!("controller-{c}"))
        .chain(["agent-gpu01".to_string(), "agent-gpu02".to_string()])
        .collect();
    let log_before = std::fs::metadata(&log).unwrap().len();
    let cpu_before = cpu_seconds(pid);
    let cut_at = Instant::now();
    cluster.cut(&format!("controller-{old}"), &others);
    // The fault's own length: nothing to wait for but time.
    std::thread::sleep(CUT);
    let cut_for = cut_at.elapsed().as_secs_f64();
    let log_bytes = std::fs::metadata(&log).unwrap().len() - log_before;
    let cpu = cpu_seconds(pid) - cpu_before;
    cluster.heal();
    let healed = Instant::now();
    eprintln!(
        "{network}: controller-{old} cut off {cut_for:.1} s: {log_bytes} bytes of log ({:.0} B/s), {cpu:.2} s of CPU ({:.1}% of a core)",
        log_bytes as f64 / cut_for,
        100.0 * cpu / cut_for
    );
    assert!(
        log_bytes <= MAX_LOG_BYTES_PER_SEC * cut_for as u64,
        "the cut-off leader wrote {log_bytes} bytes of log in {cut_for:.0} s\n{}",
        logs(dir)
    );
    assert!(
        cpu <= MAX_CPU_SHARE * cut_for,
        "the cut-off leader used {cpu:.1} s of CPU in {cut_for:.0} s\n{}",
        logs(dir)
    );
    // Every replica, the old leader too, back with lag 0 under one leader.
    wait_until(
        REJOIN_PATIENCE,
        "every replica with lag 0 after the heal",
        || {
            let status = cluster.status();
            status["leader"].is_u64()
                && status["members"]
                    .as_array()
                    .is_some_and(|m| m.len() == 3 && m.iter().all(|r| r["lag"] == 0))
        },
    );
    eprintln!(
        "{network}: every replica at lag 0 {:.2} s after the heal",
        healed.elapsed().as_secs_f64()
    );
}

#[test]
fn through_the_fault_proxy() {
    a_leader_cut_off_for_a_minute_stays_quiet_and_rejoins("--fault-proxy");
}

#[test]
fn in_network_namespaces() {
    if let Some(why) = netns_unsupported() {
        eprintln!("skipped: {why}");
        return;
    }
    a_leader_cut_off_for_a_minute_stays_quiet_and_rejoins("--netns");
}
