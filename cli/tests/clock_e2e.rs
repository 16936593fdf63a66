//! Time belongs to the leader, end to end: a follower whose clock is an hour
//! fast (libfaketime, from Debian's `faketime`) takes a submission, and
//! nothing in the cluster's time moves: running jobs keep running, the state's
//! clock stays the leader's, and `corral cluster` shows the follower's offset.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use support::{LocalCluster, me, script, submit_and_start, wait_until};

const FAKETIME_LIBRARIES: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
];

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn a_follower_an_hour_fast_moves_no_ones_time() {
    let Some(faketime) = FAKETIME_LIBRARIES.iter().find(|p| Path::new(p).exists()) else {
        eprintln!(
            "skipped: libfaketime is not installed (apt-get install faketime); it skews one controller's clock"
        );
        return;
    };
    let cluster = LocalCluster::start_with_agents(3, 1);
    let dir = cluster.dir.path();
    let (running, _) = submit_and_start(
        &cluster,
        &script(
            dir,
            "limited.sh",
            "#!/bin/bash\n#SBATCH --gpus-per-node=1\n#SBATCH --time=10\n#SBATCH --output=limited-%j.out\nsleep 300\n",
        ),
    );
    let leader = cluster.leader();
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    cluster.kill(follower);
    cluster.restart_with_env(
        &format!("controller-{follower}"),
        &[
            format!("LD_PRELOAD={faketime}"),
            "FAKETIME=+1h".into(),
            "FAKETIME_DONT_FAKE_MONOTONIC=1".into(),
        ],
    );
    // A submission that reaches the fast follower first.
    let follower_address = &cluster.addresses[follower as usize - 1];
    wait_until(Duration::from_secs(60), "the follower answers", || {
        cluster
            .corral_at(&me(), follower_address, &["--json", "cluster"])
            .status
            .success()
    });
    let submitted = cluster.corral_at(
        &me(),
        follower_address,
        &["submit", "--hold", "--parsable", "--wrap", "true"],
    );
    assert!(
        submitted.status.success(),
        "{}",
        String::from_utf8_lossy(&submitted.stderr)
    );
    // The leader's ticks go on; the running job's 10 minutes are not up.
    let leader_address = &cluster.addresses[leader as usize - 1];
    let offset = || -> Option<i64> {
        let out = cluster.corral_at("user-corral-admin", leader_address, &["--json", "cluster"]);
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        status["members"]
            .as_array()?
            .iter()
            .find(|m| m["id"] == follower)?["clock_offset_ms"]
            .as_i64()
            .filter(|o| *o != 0)
    };
    wait_until(
        Duration::from_secs(60),
        "the leader sees the follower's clock",
        || offset().is_some(),
    );
    let offset = offset().unwrap();
    assert!(
        (3_500_000..3_700_000).contains(&offset),
        "the follower's clock offset shows as {offset} ms"
    );
    let out = cluster.corral_at(
        "user-corral-admin",
        leader_address,
        &["--json", "show", "job", &running],
    );
    let job: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(job["job"]["state"], "Running", "{}", job["job"]);
    let status = cluster.status();
    let clock = status["clock_ms"].as_u64().unwrap_or(0);
    let drift = clock.abs_diff(now_ms());
    assert!(
        drift < 60_000,
        "the cluster's clock is {drift} ms away from the leader's machine"
    );
}
