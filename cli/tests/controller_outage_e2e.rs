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
    LocalCluster, alive, job_pid, logs, pid_of, script, signal, submit_and_start, wait_job,
    wait_until,
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
        let path = script(
            dir,
            &format!("{name}.sh"),
            &format!(
                "#!/bin/bash\n#SBATCH --gpus-per-node=8\n#SBATCH --output={name}-%j.out\n\
                 echo \"start attempt=$CORRAL_ATTEMPT node=$SLURMD_NODENAME\"\n\
                 echo $$ > \"$SLURM_SUBMIT_DIR/{name}.pid\"\n\
                 while [ ! -e \"$SLURM_SUBMIT_DIR/go\" ]; do sleep 0.2; done\n\
                 echo done\n"
            ),
        );
        let (id, _) = submit_and_start(&cluster, &path);
        jobs.push((id, name.clone(), job_pid(dir, &name, PATIENCE)));
    }
    // Every agent holds the roster before the controllers go.
    wait_until(PATIENCE, "every agent to hold the roster", || {
        cluster.agent_log_lines("holds the cluster's roster").len() >= 3
    });
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
        let job = wait_job(&cluster, id, PATIENCE, "completion", |j| {
            j["state"] != "Running" && j["state"] != "Pending" && j["state"] != "Completing"
        });
        let text =
            std::fs::read_to_string(dir.join(format!("{name}-{id}.out"))).unwrap_or_default();
        assert_eq!(job["state"], "Completed", "{job}\n{text}");
        assert_eq!(job["attempts"].as_array().map(Vec::len), Some(1), "{job}");
        assert_eq!(
            text.matches("start attempt=").count(),
            1,
            "ran twice: {text}"
        );
    }
    let kept = cluster.agent_log_lines("the controllers are away, not this node");
    assert!(
        kept.len() >= 3,
        "every agent says why it kept its job: {kept:?}"
    );
    let fenced = cluster.agent_log_lines("lease lapsed");
    assert!(fenced.is_empty(), "agents fenced their jobs: {fenced:?}");
    let declared = cluster.controller_log_lines("declaring node down");
    assert!(declared.is_empty(), "nodes declared down: {declared:?}");
}
