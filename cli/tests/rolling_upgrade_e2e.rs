//! A rolling upgrade from the previous release to this build, one process
//! at a time, with a job running through it, as the runbook has it: the
//! cluster starts on the previous release's `corrald` and `corral-agent`;
//! one idle node's agent is upgraded first (against old controllers it must
//! fall back to agent protocol 1); then the controllers, followers first and
//! the leader last, while a job runs on an old agent that stays attached;
//! then the last agent. The job completes once and no agent's lease lapses.
//!
//! Needs the previous release's binaries: build them from its tag and name
//! their directory, e.g.
//! `git worktree add /tmp/prev <tag> && (cd /tmp/prev && cargo build --bins)`,
//! then `CORRAL_PREVIOUS_BIN_DIR=/tmp/prev/target/debug cargo test -p corral
//! --test rolling_upgrade_e2e -- --ignored`. (CI checks the same
//! compatibility from the frozen frames of `proto/tests/fixtures`.)

#![allow(clippy::unwrap_used)]

mod support;

use std::path::PathBuf;
use std::time::Duration;

use support::{
    LocalCluster, alive, corrald_bin, script, sibling, signal, submit, wait_job, wait_until,
};

fn previous_release() -> PathBuf {
    let dir = std::env::var_os("CORRAL_PREVIOUS_BIN_DIR").expect(
        "CORRAL_PREVIOUS_BIN_DIR names the directory of the previous release's corrald and corral-agent",
    );
    PathBuf::from(dir)
}

/// The pid `corral local` recorded for process `name`.
fn pid(cluster: &LocalCluster, name: &str) -> i32 {
    std::fs::read_to_string(cluster.dir.path().join(format!("pids/{name}.pid")))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Stops process `name` as systemd would (SIGTERM) and starts `program` in
/// its place.
fn upgrade(cluster: &LocalCluster, name: &str, program: &std::path::Path) {
    let old = pid(cluster, name);
    signal(old, "-TERM");
    wait_until(Duration::from_secs(60), &format!("{name} to stop"), || {
        !alive(old)
    });
    cluster.restart_as(name, program);
}

/// Waits until every member is at most a few entries behind the leader.
fn caught_up(cluster: &LocalCluster) {
    wait_until(
        Duration::from_secs(60),
        "every controller to catch up",
        || {
            let out = cluster.corral("user-corral-admin", &["--json", "cluster"]);
            let Ok(status) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
                return false;
            };
            status["members"].as_array().is_some_and(|members| {
                members.len() == 3
                    && members
                        .iter()
                        .all(|m| m["lag"].as_u64().is_some_and(|lag| lag <= 5))
            })
        },
    );
}

#[test]
#[ignore = "needs the previous release's binaries: CORRAL_PREVIOUS_BIN_DIR"]
fn a_cluster_is_upgraded_one_process_at_a_time_with_a_job_running() {
    let previous = previous_release();
    let (old_corrald, old_agent) = (previous.join("corrald"), previous.join("corral-agent"));
    let (new_corrald, new_agent) = (corrald_bin(), sibling("corral-agent"));
    let cluster =
        LocalCluster::start_with_daemons(3, (&old_corrald, &old_agent), &["--nodes", "2"], &[]);

    // An idle node's agent first: old controllers cannot read its hello.
    upgrade(&cluster, "agent-gpu02", &new_agent);
    wait_until(
        Duration::from_secs(60),
        "the new agent to attach in protocol 1",
        || {
            cluster
                .agent_log_lines("welcomed it in protocol 1")
                .iter()
                .any(|l| l.starts_with("agent-gpu02"))
        },
    );

    let dir = cluster.dir.path();
    let release = dir.join("release");
    let job = script(
        dir,
        "through-upgrade.sh",
        &format!(
            "#!/bin/sh\n#SBATCH -w gpu01\n#SBATCH -o {out}\necho \"start attempt=$SLURM_RESTART_COUNT\"\n\
             while [ ! -e {release} ]; do sleep 0.1; done\necho done\n",
            out = dir.join("through-upgrade.out").display(),
            release = release.display(),
        ),
    );
    let id = submit(&cluster, &job);
    wait_job(&cluster, &id, Duration::from_secs(60), "start", |j| {
        j["state"] == "Running"
    });

    // The controllers: followers first, the leader last.
    let leader = cluster.leader();
    let mut order: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    order.push(leader);
    for controller in order {
        upgrade(&cluster, &format!("controller-{controller}"), &new_corrald);
        caught_up(&cluster);
    }
    wait_until(
        Duration::from_secs(60),
        "the old agent to attach to an upgraded leader",
        || {
            cluster
                .controller_log_lines("agent registered")
                .iter()
                .any(|l| l.contains("gpu01") && l.contains("protocol=1"))
        },
    );
    let running = wait_job(&cluster, &id, Duration::from_secs(5), "running", |j| {
        j["state"] == "Running"
    });
    assert_eq!(running["requeue_count"], 0, "{running}");

    std::fs::write(&release, "").unwrap();
    support::completed_once(&cluster, &id, "through-upgrade.out");

    // The last agent, now idle; then a job over both upgraded nodes.
    upgrade(&cluster, "agent-gpu01", &new_agent);
    let both = script(
        dir,
        "after-upgrade.sh",
        &format!(
            "#!/bin/sh\n#SBATCH -N 2\n#SBATCH -o {out}\nexport PATH={bin}:$PATH\necho \"start attempt=$SLURM_RESTART_COUNT\"\nsrun hostname\n",
            out = dir.join("after-upgrade.out").display(),
            bin = dir.join("bin").display(),
        ),
    );
    let after = submit(&cluster, &both);
    support::completed_once(&cluster, &after, "after-upgrade.out");
    let sessions = cluster.controller_log_lines("agent registered");
    for node in ["gpu01", "gpu02"] {
        assert!(
            sessions
                .iter()
                .any(|l| l.contains(node) && l.contains("protocol=2")),
            "{node}'s upgraded agent speaks protocol 2 with an upgraded leader: {sessions:?}"
        );
    }
}
