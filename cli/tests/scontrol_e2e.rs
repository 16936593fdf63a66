//! End to end: the `corral` binary invoked through a link named `scontrol`, as a
//! job script would call it, against a local cluster of three controllers: hold,
//! show job, release, and `show hostnames` (which needs no cluster).

#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{LocalCluster, corral_bin, script};

const BATCH: &str = "#!/bin/bash\n#SBATCH --gpus-per-node=1\n#SBATCH --time=10:00\necho hello\n";

/// A link named `scontrol` to the corral binary, in `dir`.
fn scontrol_link(dir: &Path) -> PathBuf {
    let link = dir.join("scontrol");
    std::os::unix::fs::symlink(corral_bin(), &link).unwrap();
    link
}

/// Runs `scontrol ARGS` as `principal`, the cluster given the way a job's
/// environment gives it: CORRAL_* variables (scontrol has no flags for them).
fn scontrol(cluster: &LocalCluster, address: &str, principal: &str, args: &[&str]) -> Output {
    let certs = cluster.dir.path().join("certs");
    Command::new(cluster.dir.path().join("scontrol"))
        .args(args)
        .env_remove("CORRAL_CONFIG")
        .env_remove("SLURM_JOB_NODELIST")
        .env("HOME", cluster.dir.path())
        .env("CORRAL_CLUSTER", address)
        .env("CORRAL_CA", certs.join("ca.pem"))
        .env("CORRAL_CERT", certs.join(format!("{principal}.pem")))
        .env("CORRAL_KEY", certs.join(format!("{principal}.key")))
        .current_dir(cluster.dir.path())
        .output()
        .unwrap()
}

fn stdout_of(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "scontrol {what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn scontrol_holds_shows_and_releases_a_job_and_expands_hostnames() {
    let cluster = LocalCluster::start(3, 2);
    scontrol_link(cluster.dir.path());
    // The leader answers reads from state that includes every change it acknowledged.
    let leader = &cluster.addresses[(cluster.leader() - 1) as usize];
    let path = script(cluster.dir.path(), "job.sh", BATCH);
    let id = cluster
        .ok(
            "user-alice",
            &["submit", "--parsable", path.to_str().unwrap()],
        )
        .trim()
        .to_string();

    stdout_of(
        &scontrol(&cluster, leader, "user-alice", &["hold", &id]),
        "hold",
    );
    let shown = stdout_of(
        &scontrol(&cluster, leader, "user-alice", &["show", "job", &id]),
        "show job",
    );
    assert!(shown.starts_with(&format!("JobId={id} ")), "{shown}");
    assert!(shown.contains("JobState=PENDING"), "{shown}");
    assert!(shown.contains("Reason=JobHeldUser"), "{shown}");
    let one_line = stdout_of(
        &scontrol(
            &cluster,
            leader,
            "user-alice",
            &["-o", "show", &format!("JobId={id}")],
        ),
        "-o show job",
    );
    assert_eq!(one_line.lines().count(), 1, "{one_line}");
    assert!(one_line.contains("Reason=JobHeldUser"), "{one_line}");

    stdout_of(
        &scontrol(&cluster, leader, "user-alice", &["release", &id]),
        "release",
    );
    let shown = stdout_of(
        &scontrol(&cluster, leader, "user-alice", &["show", "jobid", &id]),
        "show job",
    );
    assert!(shown.contains("JobState=PENDING"), "{shown}");
    assert!(!shown.contains("JobHeld"), "{shown}");

    // update: the controller parses Slurm's fields; a bad one changes nothing.
    let job_id = format!("JobId={id}");
    stdout_of(
        &scontrol(
            &cluster,
            leader,
            "user-alice",
            &["update", &job_id, "TimeLimit=30", "JobName=renamed"],
        ),
        "update",
    );
    let shown = stdout_of(
        &scontrol(&cluster, leader, "user-alice", &["show", "job", &id]),
        "show job",
    );
    assert!(shown.contains("JobName=renamed"), "{shown}");
    assert!(shown.contains("TimeLimit=00:30:00"), "{shown}");
    for (field, says) in [("Partition=nope", "nope"), ("MinCPUsNode=4", "TimeLimit")] {
        let out = scontrol(&cluster, leader, "user-alice", &["update", &job_id, field]);
        assert_eq!(out.status.code(), Some(1), "{field}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{field}: {stderr}");
    }
    let shown = stdout_of(
        &scontrol(&cluster, leader, "user-alice", &["show", "job", &id]),
        "show job",
    );
    assert!(shown.contains("JobName=renamed"), "{shown}");

    // Another user's job cannot be held: refused, exit status 1.
    let out = scontrol(&cluster, leader, "user-bob", &["hold", &id]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!("job {id}")),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Hostnames need no cluster at all.
    let out = Command::new(cluster.dir.path().join("scontrol"))
        .args(["show", "hostnames", "gpu[01-02]"])
        .env_remove("CORRAL_CLUSTER")
        .env_remove("CORRAL_CONFIG")
        .env("HOME", cluster.dir.path())
        .output()
        .unwrap();
    assert_eq!(stdout_of(&out, "show hostnames"), "gpu01\ngpu02\n");
}
