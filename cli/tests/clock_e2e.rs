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

/// libfaketime, when installed (it says the test is skipped when not).
fn faketime() -> Option<&'static str> {
    let found = FAKETIME_LIBRARIES
        .iter()
        .copied()
        .find(|p| Path::new(p).exists());
    if found.is_none() {
        eprintln!(
            "skipped: libfaketime is not installed (apt-get install faketime); it skews one controller's clock"
        );
    }
    found
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn a_follower_an_hour_fast_moves_no_ones_time() {
    let Some(faketime) = faketime() else {
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
            // A reading taken before the restart shows the real clock.
            .filter(|o| o.unsigned_abs() > 1_000_000)
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

/// A controller an hour fast that wins an election: before, it stamped its
/// own time, so the running job's time limit was up at once and the
/// cluster's clock stayed an hour ahead. Now the other controllers' clocks
/// outvote it: it stamps their time and says so. Its first stamps wait for
/// their clocks to be read, and while the controller it replaced is still
/// down (no majority of clocks agrees), it stamps the clock the replicated
/// time vouches for: before, those stamps were its own clock held within 15
/// minutes of the cluster's time, which moved the cluster's time 15 minutes
/// ahead for good and timed out a 10-minute job.
#[test]
fn a_leader_an_hour_fast_stamps_the_majoritys_time() {
    let Some(faketime) = faketime() else {
        return;
    };
    let cluster = LocalCluster::start_with_agents(3, 1);
    let dir = cluster.dir.path();
    let (running, _) = submit_and_start(
        &cluster,
        &script(
            dir,
            "limited.sh",
            "#!/bin/bash\n#SBATCH --gpus-per-node=1\n#SBATCH --time=10\n#SBATCH --output=limited-%j.out\nsleep 900\n",
        ),
    );
    let first = cluster.leader();
    let fast = (1..=3).find(|id| *id != first).unwrap();
    cluster.kill(fast);
    cluster.restart_with_env(
        &format!("controller-{fast}"),
        &[
            format!("LD_PRELOAD={faketime}"),
            "FAKETIME=+1h".into(),
            "FAKETIME_DONT_FAKE_MONOTONIC=1".into(),
        ],
    );
    let caught_up = || {
        cluster.status()["members"]
            .as_array()
            .is_some_and(|members| members.iter().all(|m| m["lag"].as_u64() == Some(0)))
    };
    // Which of the two others wins an election is the election's (and a
    // lower id goes first on a tie): the leader and the third controller are
    // killed together and the third started again at once, so the fast one,
    // campaigning already, is the one it votes for; again until it wins.
    let mut leader = first;
    for _ in 0..12 {
        if leader == fast {
            break;
        }
        wait_until(
            Duration::from_secs(60),
            "every replica caught up",
            caught_up,
        );
        let lost = leader;
        let third = (1..=3).find(|id| *id != lost && *id != fast).unwrap();
        cluster.kill(lost);
        cluster.kill(third);
        cluster.restart(&format!("controller-{third}"));
        wait_until(Duration::from_secs(60), "a new leader", || {
            cluster.status()["leader"]
                .as_u64()
                .is_some_and(|l| l != lost)
        });
        leader = cluster.leader();
        cluster.restart(&format!("controller-{lost}"));
    }
    if leader != fast {
        for line in cluster.controller_log_lines(&format!("controller-{fast}")) {
            eprintln!("{line}");
        }
        for line in cluster.controller_log_lines("") {
            if line.starts_with(&format!("controller-{fast}")) {
                eprintln!("{line}");
            }
        }
    }
    assert_eq!(leader, fast, "the fast controller never won an election");
    // A submission, stamped by it (committed when `submit` returns).
    cluster.ok(&me(), &["submit", "--hold", "--parsable", "--wrap", "true"]);
    let clock = cluster.status()["clock_ms"].as_u64().unwrap_or(0);
    let drift = clock.abs_diff(now_ms());
    if drift >= 30_000 {
        for line in cluster.controller_log_lines("") {
            if line.contains("clock") || line.contains("leading") || line.contains("stamp") {
                eprintln!("{line}");
            }
        }
        eprintln!("clock_ms {clock} now {}", now_ms());
    }
    // Not an hour, nor the 15 minutes its first stamps could be held within:
    // the other machines' time (the slack is for this test's own pace).
    assert!(
        drift < 30_000,
        "the cluster's clock is {drift} ms away from the other controllers' machines"
    );
    let out = cluster.corral_at(
        "user-corral-admin",
        &cluster.addresses.join(","),
        &["--json", "show", "job", &running],
    );
    let job: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(job["job"]["state"], "Running", "{}", job["job"]);
    wait_until(
        Duration::from_secs(60),
        "it says its clock is outvoted",
        || {
            !cluster
                .controller_log_lines("ahead of a majority of the controllers' clocks")
                .is_empty()
        },
    );
}
