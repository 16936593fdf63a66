//! End to end with three `corrald` processes started by `corral local up`, driven
//! through the `corral` binary: submission through a follower, a submission storm
//! while the leader is SIGKILLed (every acknowledged job present exactly once),
//! bad input refused with its error and no change, authorization, and
//! `--test-only` and explanations (planned on a copy, one per user at a time),
//! and a queue larger than one reply (listed page by page).

mod support;

use std::collections::BTreeMap;
use std::process::Command;

use support::{LocalCluster, client, corral_bin, script};

const BATCH: &str = "#!/bin/bash\n#SBATCH --gpus-per-node=1\n#SBATCH --time=10:00\necho hello\n";

#[test]
fn a_submission_through_a_follower_reaches_every_replica() {
    let cluster = LocalCluster::start(3, 2);
    let leader = cluster.leader();
    let follower = (1..=3u64).find(|id| *id != leader).unwrap();
    let follower_addr = &cluster.addresses[(follower - 1) as usize];
    let path = script(cluster.dir.path(), "job.sh", BATCH);
    let out = cluster.corral_at(
        "user-alice",
        follower_addr,
        &["submit", "--job-name=via-follower", path.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let id: u64 = stdout
        .trim()
        .strip_prefix("Submitted batch job ")
        .unwrap_or_else(|| panic!("unexpected output: {stdout}"))
        .parse()
        .unwrap();
    // Every replica answers with the job (reads are served locally).
    for addr in &cluster.addresses {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let out = cluster.corral_at(
                "user-alice",
                addr,
                &["--json", "queue", "-j", &id.to_string()],
            );
            let jobs: Vec<serde_json::Value> =
                serde_json::from_slice(&out.stdout).unwrap_or_default();
            if jobs.len() == 1 {
                assert_eq!(jobs[0]["spec"]["name"], "via-follower");
                assert_eq!(jobs[0]["spec"]["user"], "alice");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "replica {addr} never showed job {id}"
            );
        }
    }
}

#[test]
fn a_submission_storm_survives_a_leader_kill_without_loss_or_duplicates() {
    let cluster = LocalCluster::start(3, 2);
    let leader = cluster.leader();
    let path = script(cluster.dir.path(), "job.sh", BATCH);
    let certs = cluster.dir.path().join("certs");
    // Four submitters in parallel, each submitting 25 jobs one after another.
    let submitters: Vec<_> = (0..4)
        .map(|s| {
            let addresses = cluster.addresses.join(",");
            let (certs, path) = (certs.clone(), path.clone());
            std::thread::spawn(move || {
                let mut acknowledged = BTreeMap::new();
                for i in 0..25 {
                    let name = format!("storm-{s}-{i}");
                    let out = client(&addresses, &certs.join("ca.pem"), &certs, "user-alice")
                        .args(["submit", "--parsable", &format!("--job-name={name}")])
                        .arg(&path)
                        .output()
                        .unwrap();
                    if out.status.success() {
                        let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
                        acknowledged.insert(name, id);
                    }
                }
                acknowledged
            })
        })
        .collect();
    // Kill the leader once the storm is under way.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while cluster.jobs().len() < 20 {
        assert!(
            std::time::Instant::now() < deadline,
            "the storm never got going"
        );
    }
    cluster.kill(leader);
    let mut acknowledged = BTreeMap::new();
    for submitter in submitters {
        acknowledged.extend(submitter.join().unwrap());
    }
    assert!(
        acknowledged.len() >= 90,
        "only {} of 100 submissions were acknowledged",
        acknowledged.len()
    );
    let mut by_name: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for job in cluster.jobs() {
        by_name
            .entry(job["spec"]["name"].as_str().unwrap().to_string())
            .or_default()
            .push(job["id"].as_u64().unwrap());
    }
    for (name, id) in &acknowledged {
        assert_eq!(
            by_name.get(name),
            Some(&vec![*id]),
            "acknowledged job {name} (id {id}) is not present exactly once"
        );
    }
    for (name, ids) in &by_name {
        assert_eq!(ids.len(), 1, "{name} was submitted more than once: {ids:?}");
    }
    assert_ne!(cluster.leader(), leader, "the killed replica still leads");
}

#[test]
fn bad_input_gets_its_error_and_changes_nothing() {
    let cluster = LocalCluster::start(3, 2);
    let dir = cluster.dir.path();
    let good = script(dir, "good.sh", BATCH);
    let no_shebang = script(dir, "bad.sh", "echo no interpreter line\n");
    let bad_directive = script(
        dir,
        "bad2.sh",
        "#!/bin/bash\n#SBATCH --time=1-25:00:00\necho\n",
    );
    let good = good.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["submit", "--partition=nope", good],
            "unknown partition 'nope'",
        ),
        (
            vec!["submit", "--gpus-per-node=9", good],
            "largest node has 8",
        ),
        (vec!["submit", "--time=3-99", good], "time"),
        (vec!["submit", no_shebang.to_str().unwrap()], "#!"),
        (vec!["submit", bad_directive.to_str().unwrap()], "#SBATCH"),
        (vec!["submit", "--account=ghost", good], "account"),
        (vec!["cancel", "424242"], "unknown job 424242"),
        (vec!["nodes", "-p", "nope"], "unknown partition 'nope'"),
    ];
    let before = cluster.jobs();
    for (args, expected) in cases {
        let out = cluster.corral("user-alice", &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(expected),
            "{args:?}: expected '{expected}' in: {stderr}"
        );
    }
    assert_eq!(cluster.jobs(), before, "refused input changed the jobs");
}

#[test]
fn users_act_only_on_their_own_jobs_and_strangers_get_nothing() {
    let cluster = LocalCluster::start(3, 2);
    let path = script(cluster.dir.path(), "job.sh", BATCH);
    let id = cluster
        .ok(
            "user-alice",
            &["submit", "--parsable", "--hold", path.to_str().unwrap()],
        )
        .trim()
        .to_string();
    // Bob may not cancel Alice's job.
    let out = cluster.corral("user-bob", &["cancel", &id]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("permission denied"));
    // A user may not change configuration.
    let out = cluster.corral("user-bob", &["admin", "account", "set", "evil"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("admin"));
    let jobs = cluster.jobs();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["state"], "Pending");
    // A client whose certificate another CA signed gets no answer.
    let other = tempfile::tempdir().unwrap();
    let out = Command::new(corral_bin())
        .args(["certs", "--users", "mallory", "--controllers", "1"])
        .arg(other.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = client(
        &cluster.addresses.join(","),
        &cluster.dir.path().join("certs/ca.pem"),
        other.path(),
        "user-mallory",
    )
    .args(["--timeout", "2", "queue"])
    .output()
    .unwrap();
    assert!(
        !out.status.success(),
        "a stranger was answered: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Alice cancels her own job.
    cluster.ok("user-alice", &["cancel", &id]);
    assert_eq!(cluster.jobs()[0]["state"], "Cancelled");
}

#[test]
fn a_controller_stops_promptly_and_cleanly_while_a_client_waits_on_it() {
    let cluster = LocalCluster::start(1, 1);
    let path = script(cluster.dir.path(), "job.sh", BATCH);
    let id = cluster
        .ok(
            "user-alice",
            &["submit", "--parsable", "--hold", path.to_str().unwrap()],
        )
        .trim()
        .to_string();
    // `corral wait` holds a watch stream open on the controller; its first line
    // (the job's current state) shows the stream is open.
    let certs = cluster.dir.path().join("certs");
    let mut waiter = client(
        &cluster.addresses[0],
        &certs.join("ca.pem"),
        &certs,
        "user-alice",
    )
    .args(["wait", &id])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(waiter.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(
        first.contains("PENDING"),
        "unexpected first line: {first:?}"
    );
    let pid = cluster.pid(1);
    let started = std::time::Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let running = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                != Some("Z")
        })
    };
    while running() && started.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let took = started.elapsed();
    let _ = waiter.kill();
    let _ = waiter.wait();
    let log = std::fs::read_to_string(cluster.dir.path().join("logs/controller-1.log"))
        .unwrap_or_default();
    assert!(
        took < std::time::Duration::from_secs(4),
        "the controller took {took:?} to stop with a watch open\n{log}"
    );
    assert!(
        !log.contains("still in use at shutdown"),
        "the replica was not shut down cleanly\n{log}"
    );
}

#[test]
fn test_only_and_explanations_plan_without_changing_anything_even_many_at_once() {
    let cluster = LocalCluster::start(3, 2);
    let dir = cluster.dir.path();
    let good = script(dir, "good.sh", BATCH);
    let good = good.to_str().unwrap().to_string();
    let before = cluster.jobs();
    // Four at once from one user: they take turns, and every one answers.
    let runs: Vec<std::process::Child> = (0..4)
        .map(|_| {
            let certs = dir.join("certs");
            client(
                &cluster.addresses.join(","),
                &certs.join("ca.pem"),
                &certs,
                "user-alice",
            )
            .args(["submit", "--test-only", &good])
            .current_dir(dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for run in runs {
        let out = run.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // No agent runs here, so every node is down.
        assert!(stdout.contains("would not start now"), "{stdout}");
    }
    assert_eq!(cluster.jobs(), before, "--test-only submitted a job");
    let id = cluster.ok("user-alice", &["submit", "--parsable", &good]);
    let shown: serde_json::Value =
        serde_json::from_str(&cluster.ok("user-alice", &["--json", "show", "job", id.trim()]))
            .unwrap();
    let explanation = shown["explanation"].as_str().unwrap_or_default();
    assert!(
        !explanation.is_empty(),
        "a pending job is explained: {shown}"
    );
}

#[test]
fn a_queue_larger_than_one_reply_is_listed_whole_page_by_page() {
    let cluster = LocalCluster::start(3, 2);
    let dir = cluster.dir.path();
    // 2,000 pending jobs: about 8 MB of records, twice a reply's limit.
    let array = script(
        dir,
        "array.sh",
        "#!/bin/bash\n#SBATCH --array=0-999\n#SBATCH --gpus-per-node=1\ntrue\n",
    );
    for _ in 0..2 {
        cluster.ok("user-alice", &["submit", array.to_str().unwrap()]);
    }
    let listed: Vec<serde_json::Value> =
        serde_json::from_str(&cluster.ok("user-alice", &["--json", "queue"])).unwrap();
    let ids: std::collections::BTreeSet<u64> =
        listed.iter().map(|j| j["id"].as_u64().unwrap()).collect();
    assert_eq!(listed.len(), 2000, "every job, once");
    assert_eq!(ids.len(), 2000, "no job twice");
    assert_eq!(ids.first(), Some(&1));
    assert_eq!(ids.last(), Some(&2000));
    let table = cluster.ok("user-alice", &["queue", "-r"]);
    assert_eq!(table.lines().count(), 2001, "a header and a line per job");
    // Without -r, each array's pending tasks share a row, as squeue folds them.
    let folded = cluster.ok("user-alice", &["queue"]);
    assert_eq!(folded.lines().count(), 3, "{folded}");
    assert!(folded.contains("         1_[0-999] "), "{folded}");
    assert!(folded.contains("      1001_[0-999] "), "{folded}");
    // sacct's records come page by page too, each job once, usage with the first page.
    let acct: serde_json::Value =
        serde_json::from_str(&cluster.ok("user-alice", &["--json", "acct"])).unwrap();
    let acct_ids: std::collections::BTreeSet<u64> = acct["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_u64().unwrap())
        .collect();
    assert_eq!(
        acct["jobs"].as_array().unwrap().len(),
        2000,
        "every record, once"
    );
    assert_eq!(acct_ids.len(), 2000);
    assert_eq!(acct["usage"][0]["jobs"], 2000, "{}", acct["usage"]);
}
