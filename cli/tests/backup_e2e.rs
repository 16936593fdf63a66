//! Backup and restore, as the runbook has them: `corral admin snapshot save`
//! on a running cluster (online; a job submitted just before is in it),
//! `corral admin snapshot inspect`, and a new cluster started from the file
//! (`corrald restore` on every controller, through `corral local up
//! --restore`) that holds the same jobs and charges, numbers new jobs after
//! the old ones, runs a job that was held, and requeues the job that was
//! running when the backup was taken (no agent of the new cluster runs it).
//! A damaged file, a file that exists, a directory that holds a replica and
//! a caller without the admin role are each refused.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use support::{LocalCluster, corral_bin, corrald_bin, me, script, submit, wait_job};

/// `corral --json admin snapshot inspect FILE`, which needs no cluster.
fn inspect(file: &Path) -> std::process::Output {
    Command::new(corral_bin())
        .args(["--json", "admin", "snapshot", "inspect"])
        .arg(file)
        .output()
        .unwrap()
}

/// Every job's (state, requeue count), by id.
fn jobs_by_id(cluster: &LocalCluster) -> std::collections::BTreeMap<u64, (String, u64)> {
    cluster
        .jobs()
        .iter()
        .map(|j| {
            (
                j["id"].as_u64().unwrap(),
                (
                    j["state"].as_str().unwrap().to_string(),
                    j["requeue_count"].as_u64().unwrap(),
                ),
            )
        })
        .collect()
}

#[test]
fn a_backup_taken_online_starts_a_new_cluster_with_everything_acknowledged() {
    let saved = tempfile::tempdir().unwrap();
    let backup = saved.path().join("corral.backup");
    let (before, charged) = {
        let old = LocalCluster::start_with_args(3, &["--nodes", "2"]);
        let dir = old.dir.path();
        let done = submit(
            &old,
            &script(
                dir,
                "done.sh",
                "#!/bin/sh\n#SBATCH --gpus-per-node=2\nsleep 1\n",
            ),
        );
        wait_job(&old, &done, Duration::from_secs(60), "completion", |j| {
            j["state"] == "Completed"
        });
        // Its files outlive the old cluster's directory: it runs again on
        // the new one.
        let running = submit(
            &old,
            &script(
                saved.path(),
                "long.sh",
                &format!(
                    "#!/bin/sh\n#SBATCH --gpus-per-node=1\n#SBATCH --chdir={}\n\
                     echo \"attempt $SLURM_RESTART_COUNT\" >> attempts.txt\nsleep 600\n",
                    saved.path().display()
                ),
            ),
        );
        wait_job(&old, &running, Duration::from_secs(60), "start", |j| {
            j["state"] == "Running"
        });
        let held = old.ok(
            &me(),
            &[
                "submit",
                "--parsable",
                "--hold",
                script(
                    saved.path(),
                    "held.sh",
                    &format!(
                        "#!/bin/sh\n#SBATCH --chdir={}\nexit 0\n",
                        saved.path().display()
                    ),
                )
                .to_str()
                .unwrap(),
            ],
        );
        // Saved at once after the submission was acknowledged: it is in.
        let denied = old.corral(
            &me(),
            &["admin", "snapshot", "save", backup.to_str().unwrap()],
        );
        assert!(!denied.status.success(), "a user may not save a backup");
        assert!(
            String::from_utf8_lossy(&denied.stderr).contains("needs the admin role"),
            "{}",
            String::from_utf8_lossy(&denied.stderr)
        );
        old.ok(
            "user-corral-admin",
            &["admin", "snapshot", "save", backup.to_str().unwrap()],
        );
        let again = old.corral(
            "user-corral-admin",
            &["admin", "snapshot", "save", backup.to_str().unwrap()],
        );
        assert!(
            !again.status.success() && String::from_utf8_lossy(&again.stderr).contains("exists"),
            "a backup never overwrites a file"
        );
        let before = jobs_by_id(&old);
        assert_eq!(before.len(), 3, "{before:?}");
        assert_eq!(before[&held.trim().parse::<u64>().unwrap()].0, "Pending");
        let charged = old.ok("user-corral-admin", &["acct", "-a", "-j", &done]);
        (before, charged)
    };

    let inspected = inspect(&backup);
    assert!(inspected.status.success(), "{inspected:?}");
    let summary: serde_json::Value = serde_json::from_slice(&inspected.stdout).unwrap();
    assert_eq!(summary["jobs_by_state"]["PENDING"], 1, "{summary}");
    assert_eq!(summary["jobs_by_state"]["RUNNING"], 1, "{summary}");
    assert_eq!(summary["jobs_by_state"]["COMPLETED"], 1, "{summary}");
    assert_eq!(summary["next_job_id"], 4, "{summary}");
    assert!(summary["meta"]["index"].as_u64().unwrap() > 0);

    // A copy with one byte changed is refused, by inspect and by restore.
    let damaged = saved.path().join("damaged.backup");
    let mut bytes = std::fs::read(&backup).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&damaged, &bytes).unwrap();
    let refused = inspect(&damaged);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("damaged"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let up = Command::new(corral_bin())
        .args(["local", "up", "--nodes", "2", "--dir"])
        .arg(saved.path().join("never"))
        .arg("--restore")
        .arg(&damaged)
        .arg("--corrald")
        .arg(corrald_bin())
        .output()
        .unwrap();
    assert!(!up.status.success(), "a damaged backup starts no cluster");

    let new =
        LocalCluster::start_with_args(3, &["--nodes", "2", "--restore", backup.to_str().unwrap()]);
    let after = jobs_by_id(&new);
    for (id, (state, _)) in &before {
        assert!(after.contains_key(id), "job {id} ({state}) was lost");
    }
    assert_eq!(after[&1].0, "Completed");
    assert_eq!(
        new.ok("user-corral-admin", &["acct", "-a", "-j", "1"]),
        charged,
        "the completed job's accounting is the same"
    );
    // The job that ran when the backup was taken runs on no agent of this
    // cluster: it is requeued, and runs again.
    wait_job(
        &new,
        "2",
        Duration::from_secs(120),
        "a requeue and a new start",
        |j| j["requeue_count"].as_u64().unwrap_or(0) >= 1 && j["state"] == "Running",
    );
    support::wait_until(Duration::from_secs(60), "the second attempt to run", || {
        std::fs::read_to_string(saved.path().join("attempts.txt"))
            .is_ok_and(|t| t.contains("attempt 1"))
    });
    new.ok(&me(), &["release", "3"]);
    wait_job(
        &new,
        "3",
        Duration::from_secs(60),
        "the held job's run",
        |j| j["state"] == "Completed",
    );
    let fresh = submit(
        &new,
        &script(new.dir.path(), "fresh.sh", "#!/bin/sh\nexit 0\n"),
    );
    assert_eq!(fresh, "4", "new jobs are numbered after the old ones");

    // Restoring over a replica that has run is refused.
    let over = Command::new(corrald_bin())
        .arg("restore")
        .arg("--config")
        .arg(new.dir.path().join("controller-2/corral.toml"))
        .arg(&backup)
        .output()
        .unwrap();
    assert!(!over.status.success());
    assert!(
        String::from_utf8_lossy(&over.stderr).contains("is not empty"),
        "{}",
        String::from_utf8_lossy(&over.stderr)
    );
}

/// `corrald salvage --config CONFIG OUT`.
fn salvage(config: &Path, out: &Path) -> std::process::Output {
    Command::new(corrald_bin())
        .arg("salvage")
        .arg("--config")
        .arg(config)
        .arg(out)
        .output()
        .unwrap()
}

#[test]
fn a_cluster_that_lost_its_majority_for_good_is_rebuilt_from_one_replica() {
    let saved = tempfile::tempdir().unwrap();
    let salvaged = saved.path().join("salvaged.backup");
    let before = {
        let old = LocalCluster::start_with_args(3, &["--nodes", "2", "--no-agents"]);
        for n in 0..3 {
            submit(
                &old,
                &script(
                    old.dir.path(),
                    &format!("queued-{n}.sh"),
                    "#!/bin/sh\nexit 0\n",
                ),
            );
        }
        let leader = old.leader();
        let survivor = (1..=3).find(|id| *id != leader).unwrap();
        let config = old
            .dir
            .path()
            .join(format!("controller-{survivor}/corral.toml"));
        let running = salvage(&config, &salvaged);
        assert!(
            !running.status.success() && !salvaged.exists(),
            "a running replica's directory is not read"
        );
        // Every acknowledged submission reached the survivor before the end.
        support::wait_until(Duration::from_secs(30), "the survivor to catch up", || {
            old.status()["members"].as_array().is_some_and(|m| {
                m.iter()
                    .all(|m| m["lag"].as_u64().is_some_and(|lag| lag == 0))
            })
        });
        let before = jobs_by_id(&old);
        for id in 1..=3 {
            old.kill(id);
        }
        let out = salvage(&config, &salvaged);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{said}");
        assert!(
            said.contains("DISASTER RECOVERY") && said.contains("LOST:"),
            "salvage says what may be lost: {said}"
        );
        before
    };
    let new = LocalCluster::start_with_args(
        3,
        &[
            "--nodes",
            "2",
            "--no-agents",
            "--restore",
            salvaged.to_str().unwrap(),
        ],
    );
    assert_eq!(jobs_by_id(&new), before, "every acknowledged job is back");
    let next = submit(
        &new,
        &script(new.dir.path(), "after.sh", "#!/bin/sh\nexit 0\n"),
    );
    assert_eq!(next, "4");
}
