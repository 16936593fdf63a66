//! `corral local` caps its daemons' logs: past `CORRAL_LOG_MAX_BYTES` a
//! daemon renames its log `NAME.log.1` (older ones up to `CORRAL_LOG_KEEP`)
//! and writes a fresh one, so a daemon whose log floods fills a bounded
//! amount of disk. Here a tiny cap makes the controllers' normal start-up
//! lines rotate (a cap of 2,000 bytes was not reached in CI: the followers log little).

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::{LocalCluster, wait_until};

/// Smaller than the start-up lines of any controller (each line is 100-300 bytes).
const CAP: u64 = 300;

#[test]
fn a_daemons_log_is_rotated_past_its_cap_and_old_ones_are_dropped() {
    let cap = CAP.to_string();
    let cluster = LocalCluster::start_with_env(
        3,
        &["--nodes", "1"],
        &[("CORRAL_LOG_MAX_BYTES", &cap), ("CORRAL_LOG_KEEP", "2")],
    );
    let logs = cluster.dir.path().join("logs");
    // Work that logs: jobs submitted and run.
    for _ in 0..6 {
        cluster.ok(&support::me(), &["submit", "--wrap", "true"]);
    }
    wait_until(Duration::from_secs(60), "a rotated controller log", || {
        (1..=3).any(|c| logs.join(format!("controller-{c}.log.1")).exists())
    });
    for entry in std::fs::read_dir(&logs).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let size = entry.metadata().unwrap().len();
        assert!(
            !name.ends_with(".log.3"),
            "{name}: only two rotated logs are kept"
        );
        if name.starts_with("controller-") {
            // One line may take a file past the cap before it rotates.
            assert!(size <= CAP + 4_096, "{name} holds {size} bytes, cap {CAP}");
        }
    }
    // The cap is in each daemon's launch record: a restart keeps it.
    let record =
        std::fs::read_to_string(cluster.dir.path().join("launch/controller-1.json")).unwrap();
    assert!(record.contains("CORRAL_LOG_MAX_BYTES"), "{record}");
}
