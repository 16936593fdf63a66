//! A node lost under a running step is the controllers' to judge, end to end
//! on real processes: `srun` that cannot reach one of its allocation's agents
//! waits (it does not give up after a few seconds and fail the job), the
//! leader declares the node down, and the attempt is requeued as a node
//! failure, then completes once the node is back.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::{LocalCluster, logs, pid_of, script, signal, submit_and_start, wait_job};

const PATIENCE: Duration = Duration::from_secs(90);

#[test]
fn a_step_whose_node_is_lost_waits_for_the_verdict_and_the_job_is_requeued() {
    let cluster = LocalCluster::start_with_agents(3, 3);
    let dir = cluster.dir.path();
    let path = script(
        dir,
        "lost.sh",
        &format!(
            "#!/bin/bash\n#SBATCH -N 2 -w gpu01,gpu02 --gpus-per-node=8\n#SBATCH --output=lost-%j.out\n\
             export PATH={}:$PATH\necho \"start attempt=$CORRAL_ATTEMPT\"\n\
             while [ ! -e \"$SLURM_SUBMIT_DIR/go\" ]; do sleep 0.2; done\n\
             srun -N 2 true 2>>\"$SLURM_SUBMIT_DIR/srun.err\" \\\n  || {{ echo \"attempt $CORRAL_ATTEMPT: srun failed: $?\" >>\"$SLURM_SUBMIT_DIR/srun.err\"; exit 1; }}\necho done\n",
            dir.join("bin").display()
        ),
    );
    let (id, batch_host) = submit_and_start(&cluster, &path);
    let other = if batch_host == "gpu01" {
        "gpu02"
    } else {
        "gpu01"
    };
    // The other node's agent dies (its watchdog ends its processes when its
    // lease runs out); then the script runs its step across both nodes.
    signal(pid_of(dir, &format!("agent-{other}")), "-KILL");
    std::fs::write(dir.join("go"), "").unwrap();
    let requeued = wait_job(&cluster, &id, PATIENCE, "requeue", |j| {
        j["requeue_count"].as_u64().unwrap_or(0) >= 1
    });
    cluster.restart(&format!("agent-{other}"));
    let job = wait_job(&cluster, &id, PATIENCE, "completion", |j| {
        j["state"] != "Running" && j["state"] != "Pending" && j["state"] != "Completing"
    });
    let text = std::fs::read_to_string(dir.join(format!("lost-{id}.out"))).unwrap_or_default();
    assert_eq!(job["state"], "Completed", "{job}\n{text}\n{}", logs(dir));
    assert_eq!(job["requeue_count"], 1, "{job}");
    // Appended by every attempt (the output file starts afresh with each).
    let srun = std::fs::read_to_string(dir.join("srun.err")).unwrap_or_default();
    assert!(
        !srun.contains("did not answer") && !srun.contains("srun failed"),
        "srun gave up on the lost node instead of waiting for the controllers' verdict:\n{srun}\n{requeued}"
    );
    assert!(text.contains("start attempt=2"), "{text}");
}
