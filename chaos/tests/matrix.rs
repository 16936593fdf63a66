//! The chaos matrix CI runs: every scenario of `corral-chaos list`, each a
//! short run on a fresh local cluster of real processes, checked by every
//! checker (`isolate-leader` through the loopback fault proxy, the others on
//! network namespaces where this machine allows them). A scenario that breaks a promise fails the test with its verdict
//! table; its directory (history, report, the cluster's logs) is kept.
//!
//! Needs the workspace's binaries (`corral`, `corrald`, `corral-agent`)
//! beside `corral-chaos`: `cargo test --workspace` builds them all.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;

/// Seconds of workload for `scenario`: its own, chosen by risk (`corral-chaos
/// list --matrix`: a minute where leadership moves, 15 s elsewhere), or
/// `CORRAL_CHAOS_SECONDS` for every scenario
/// (`CORRAL_CHAOS_SECONDS=60 cargo test -p corral-chaos --test matrix` runs
/// the minute-long matrix, about 30 minutes on two cores).
fn duration_s(own: &str) -> String {
    std::env::var("CORRAL_CHAOS_SECONDS").unwrap_or_else(|_| own.to_string())
}

fn chaos_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_corral-chaos"))
}

/// The matrix: every scenario with its seconds of workload.
fn scenarios() -> Vec<(String, String)> {
    let out = Command::new(chaos_bin())
        .args(["list", "--matrix"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(name, seconds)| (name.to_string(), seconds.to_string()))
        .collect()
}

#[test]
fn every_scenario_keeps_every_promise() {
    let corral = chaos_bin().with_file_name("corral");
    assert!(
        corral.exists(),
        "{} is missing: build the workspace's binaries first (cargo build --bins)",
        corral.display()
    );
    let scenarios = scenarios();
    assert!(scenarios.len() >= 10, "only {} scenarios", scenarios.len());
    let root = tempfile::tempdir().unwrap();
    let mut failed = Vec::new();
    for (seed, (scenario, seconds)) in scenarios.iter().enumerate() {
        let out_dir = root.path().join(scenario);
        // Long trainers (20-25 s) only where they matter: a hung agent's job
        // must outlive its node's down declaration for the watchdog to be
        // tested; elsewhere they only lengthen the drain.
        let long_pct = if scenario.starts_with("pause-agent") {
            "40"
        } else {
            "0"
        };
        // The leader's isolation goes through the loopback fault proxy (what
        // a run without root gets); every other partition through network
        // namespaces where this machine has them.
        let network = if scenario == "isolate-leader" {
            "proxy"
        } else {
            "auto"
        };
        let out = Command::new(chaos_bin())
            .args([
                "run",
                "--scenario",
                scenario,
                "--duration-s",
                &duration_s(seconds),
            ])
            .args(["--network", network])
            .args(["--long-pct", long_pct])
            .args(["--seed", &(seed as u64 + 1).to_string()])
            .arg("--out")
            .arg(&out_dir)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        println!("{stdout}");
        if !out.status.success() {
            failed.push(format!(
                "{scenario} (exit {:?}):\n{stdout}\n{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    if !failed.is_empty() {
        let kept = root.keep();
        panic!(
            "{} scenario(s) broke a promise (histories, reports and logs kept in {}):\n{}",
            failed.len(),
            kept.display(),
            failed.join("\n")
        );
    }
}
