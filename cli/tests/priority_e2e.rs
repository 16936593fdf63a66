//! End to end: `sprio` and `sshare` through their links against a local
//! cluster: the pending jobs' factors add up to the priority squeue shows,
//! `-w` prints the configured weights, and sshare shows the account tree with
//! the user's usage after a job ran.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::{LocalCluster, me, slurm_link as slurm, wait_job};

fn ok(cluster: &LocalCluster, name: &str, args: &[&str]) -> String {
    let out = slurm(cluster, name, &me(), args);
    assert!(
        out.status.success(),
        "{name} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn sprio_and_sshare_show_what_the_scheduler_weighs() {
    let cluster = LocalCluster::start_with_agents(3, 1);
    let user = me().trim_start_matches("user-").to_string();
    let blocker = ok(
        &cluster,
        "sbatch",
        &[
            "--parsable",
            "--exclusive",
            "--gres=gpu:8",
            "--wrap",
            "sleep 600",
        ],
    );
    let blocker = blocker.trim();
    wait_job(&cluster, blocker, Duration::from_secs(60), "start", |j| {
        j["state"] == "Running"
    });
    let small = ok(
        &cluster,
        "sbatch",
        &["--parsable", "--gres=gpu:1", "--wrap", "true"],
    );
    let big = ok(
        &cluster,
        "sbatch",
        &["--parsable", "--gres=gpu:8", "--wrap", "true"],
    );
    let (small, big) = (small.trim(), big.trim());

    // Every pending job, by id, its weighted factors summing to squeue's %Q.
    // The running blocker's first usage charge halves the fair-share factor at
    // a tick; read sprio on both sides of squeue so that both saw one state.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (out, queue) = loop {
        let before = ok(&cluster, "sprio", &["-l"]);
        let queue = ok(&cluster, "squeue", &["-h", "-t", "PD", "-o", "%i %Q"]);
        let after = ok(&cluster, "sprio", &["-l"]);
        if before == after {
            break (after, queue);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "priorities never settled:\n{before}\n{after}"
        );
    };
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap(),
        "          JOBID PARTITION     USER   PRIORITY       SITE        AGE      ASSOC  FAIRSHARE    JOBSIZE  PARTITION        QOS        NICE                 TRES"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    let ids: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(ids, [small, big], "{out}");
    for row in &rows {
        let factors: i64 = row[4..11].iter().map(|v| v.parse::<i64>().unwrap()).sum();
        let priority: i64 = row[3].parse().unwrap();
        assert_eq!(factors, priority, "{out}");
        assert!(
            queue.contains(&format!("{} {}", row[0], row[3])),
            "{queue}\n{out}"
        );
    }
    // Without -l, a column for each factor whose weight is not zero, as sprio
    // chooses (the local cluster weighs job size 0).
    let short = ok(&cluster, "sprio", &[]);
    let header = short.lines().next().unwrap();
    assert!(
        header.contains("FAIRSHARE") && !header.contains("JOBSIZE"),
        "{short}"
    );
    // Only the asked job and user.
    let one = ok(
        &cluster,
        "sprio",
        &["-h", "-j", big, "-u", &user, "-o", "%i %u %.10Y"],
    );
    assert_eq!(
        one.split_whitespace().collect::<Vec<_>>()[..2],
        [big, user.as_str()]
    );
    let weights = ok(&cluster, "sprio", &["-w", "-h"]);
    assert!(weights.trim_start().starts_with("Weights"), "{weights}");

    // sshare: the tree, and this user's row under its account.
    assert!(ok(&cluster, "scancel", &[blocker]).is_empty());
    wait_job(&cluster, big, Duration::from_secs(60), "end", |j| {
        j["state"] == "Completed"
    });
    let out = ok(&cluster, "sshare", &["-P"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare"
    );
    assert!(lines[1].starts_with("root||"), "{out}");
    let mine = lines
        .iter()
        .find(|l| l.split('|').nth(1) == Some(user.as_str()))
        .unwrap_or_else(|| panic!("no row of {user}: {out}"));
    assert!(
        mine.starts_with("  "),
        "a user row is indented below its account: {out}"
    );
    assert_eq!(mine.split('|').nth(2), Some("parent"));
    let used: u64 = mine.split('|').nth(4).unwrap().parse().unwrap();
    assert!(used > 0, "the blocker's GPU-seconds are charged: {out}");
    let fairshare: f64 = mine.split('|').nth(6).unwrap().parse().unwrap();
    assert!(fairshare < 1.0, "usage lowers the factor: {out}");
}
