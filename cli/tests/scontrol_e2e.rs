//! End to end: the `corral` binary invoked through a link named `scontrol`, as a
//! job script would call it, against a local cluster of three controllers: hold,
//! show job, release, `show reservation` (of reservations made with `corral
//! admin reservation create`), `show config`, and `show hostnames` (which needs
//! no cluster).

#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{LocalCluster, corral_bin, script, slurm_link};

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
    // StartTime= moves the begin time, in --begin's forms.
    stdout_of(
        &scontrol(
            &cluster,
            leader,
            "user-alice",
            &["update", &job_id, "StartTime=2030-01-01T08:00:00"],
        ),
        "update StartTime",
    );
    let shown = stdout_of(
        &scontrol(&cluster, leader, "user-alice", &["show", "job", &id]),
        "show job",
    );
    assert!(
        shown.contains("EligibleTime=2030-01-01T08:00:00"),
        "{shown}"
    );
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

    show_reservations_and_config(&cluster, leader);

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

/// `show reservation` before and after an admin creates reservations, and
/// `show config`, as a plain user.
fn show_reservations_and_config(cluster: &LocalCluster, leader: &str) {
    let out = scontrol(cluster, leader, "user-alice", &["show", "reservation"]);
    assert_eq!(
        stdout_of(&out, "show reservation"),
        "No reservations in the system\n"
    );
    for create in [
        &[
            "demo",
            "--start",
            "2030-01-01T10:00:00",
            "--end",
            "2030-01-02T12:30:00",
            "--nodes",
            "gpu01",
            "--users",
            "alice,bob",
            "--accounts",
            "root",
        ][..],
        &[
            "window",
            "--start",
            "2030-02-01T00:00:00",
            "--duration",
            "4:00:00",
            "--nodes",
            "gpu[01-02]",
            "--maintenance",
        ][..],
    ] {
        let mut args = vec!["admin", "reservation", "create"];
        args.extend_from_slice(create);
        cluster.ok("user-corral-admin", &args);
    }
    let demo = "\
ReservationName=demo StartTime=2030-01-01T10:00:00 EndTime=2030-01-02T12:30:00 Duration=1-02:30:00
   Nodes=gpu01 NodeCnt=1 CoreCnt=64 Features=(null) PartitionName=(null) Flags=SPEC_NODES
   TRES=cpu=64
   Users=alice,bob Groups=(null) Accounts=root Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a
   MaxStartDelay=(null)

";
    let window = "\
ReservationName=window StartTime=2030-02-01T00:00:00 EndTime=2030-02-01T04:00:00 Duration=04:00:00
   Nodes=gpu[01-02] NodeCnt=2 CoreCnt=128 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES
   TRES=cpu=128
   Users=(null) Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a
   MaxStartDelay=(null)

";
    let out = scontrol(cluster, leader, "user-alice", &["show", "reservation"]);
    assert_eq!(
        stdout_of(&out, "show reservation"),
        format!("{demo}{window}")
    );
    let out = scontrol(cluster, leader, "user-alice", &["show", "res", "demo"]);
    assert_eq!(stdout_of(&out, "show res demo"), demo);
    // sinfo -T lists the same reservations, a line each.
    let out = slurm_link(cluster, "sinfo", "user-alice", &["-T"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "\
RESV_NAME     STATE           START_TIME             END_TIME     DURATION  NODELIST
demo       INACTIVE  2030-01-01T10:00:00  2030-01-02T12:30:00   1-02:30:00  gpu01
window     INACTIVE  2030-02-01T00:00:00  2030-02-01T04:00:00     04:00:00  gpu[01-02]
",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = scontrol(
        cluster,
        leader,
        "user-alice",
        &["-o", "show", "ReservationName=window"],
    );
    let one_line = stdout_of(&out, "-o show ReservationName=window");
    assert_eq!(one_line.lines().count(), 1, "{one_line}");
    assert!(
        one_line.starts_with("ReservationName=window StartTime=2030-02-01T00:00:00 "),
        "{one_line}"
    );
    assert!(
        one_line.ends_with(" Watts=n/a MaxStartDelay=(null)\n"),
        "{one_line}"
    );
    let out = scontrol(
        cluster,
        leader,
        "user-alice",
        &["show", "reservation", "nope"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Reservation nope not found\n"
    );

    let out = scontrol(cluster, leader, "user-alice", &["show", "config"]);
    let config = stdout_of(&out, "show config");
    assert!(
        config.starts_with("Configuration data as of 20"),
        "{config}"
    );
    for line in [
        "ClusterName             = local",
        "GresTypes               = gpu",
        "KillWait                = 10 sec",
        "PriorityType            = priority/multifactor",
        "PriorityDecayHalfLife   = 7-00:00:00",
        "PriorityWeightFairShare = 10000",
        "SchedulerType           = sched/backfill",
        "SelectType              = select/cons_tres",
        "",
        "Corral Configuration (no Slurm equivalent):",
        "PreemptGraceTime        = 00:02:00",
    ] {
        assert!(
            config.lines().any(|l| l == line),
            "no '{line}' in:\n{config}"
        );
    }
    for (i, address) in cluster.addresses.iter().enumerate() {
        let host = format!("SlurmctldHost[{i}]        = {address}");
        assert!(
            config.lines().any(|l| l == host),
            "no '{host}' in:\n{config}"
        );
    }
    let pinged: Vec<&str> = config.lines().rev().take(3).collect();
    assert!(
        pinged
            .iter()
            .all(|l| l.starts_with("Slurmctld(") && l.ends_with(" is UP")),
        "{config}"
    );
    assert!(
        pinged
            .iter()
            .any(|l| l.starts_with("Slurmctld(primary) at ")),
        "{config}"
    );
}
