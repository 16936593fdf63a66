//! A controller outage is not a node failure, end to end on real processes
//! (three `corrald`, three agents with simulated GPUs): every controller
//! SIGKILLed for twice the lease and margin kills no job (the agents keep
//! their jobs on each other's word that no leader reaches them), and once
//! the controllers are back every job completes with its first attempt.
//! (`agent_e2e` has the other half: an agent cut off from the controllers
//! alone still fences its job and it is requeued.)

#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use support::{
    LocalCluster, alive, completed_once, job_pid, logs, pid_of, signal, submit_and_start,
    waiting_job,
};

const PATIENCE: Duration = Duration::from_secs(90);

/// Twice the lease and margin (10 s + 5 s): long enough that today's agents
/// would have fenced and a leader declared every node down.
const OUTAGE: Duration = Duration::from_secs(30);

#[test]
fn every_controller_down_for_twice_the_lease_kills_no_job() {
    let cluster = LocalCluster::start_with_agents(3, 3);
    let dir = cluster.dir.path();
    let mut jobs = Vec::new();
    for n in 0..3 {
        let name = format!("held{n}");
        let (id, _) = submit_and_start(&cluster, &waiting_job(dir, &name, "go", 600));
        jobs.push((id, name.clone(), job_pid(dir, &name, PATIENCE)));
    }
    // Every agent holds the roster, with every member's step address,
    // before the controllers go (seen in CI: the controllers were killed
    // 60 ms after the first rosters, built before the last agent registered,
    // and no agent could ask another).
    support::wait_whole_roster(&cluster, 3);
    for c in 1..=3 {
        signal(pid_of(dir, &format!("controller-{c}")), "-KILL");
    }
    let down = Instant::now();
    while down.elapsed() < OUTAGE {
        for (id, name, pid) in &jobs {
            assert!(
                alive(*pid),
                "job {id} ({name}) died {:.1} s into the controllers' outage\n{}",
                down.elapsed().as_secs_f64(),
                logs(dir)
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    for c in 1..=3 {
        cluster.restart(&format!("controller-{c}"));
    }
    cluster.leader();
    std::fs::write(dir.join("go"), "").unwrap();
    for (id, name, _) in &jobs {
        completed_once(&cluster, id, &format!("{name}-{id}.out"));
    }
    let kept = cluster.agent_log_lines("the controllers are away, not this node");
    assert!(
        kept.len() >= 3,
        "every agent says why it kept its job: {kept:?}"
    );
    let declared = cluster.controller_log_lines("declaring node down");
    assert!(declared.is_empty(), "nodes declared down: {declared:?}");
}
