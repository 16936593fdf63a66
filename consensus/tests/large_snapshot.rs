//! Snapshot transfer of a large state: a replica that missed everything catches
//! up by installing a snapshot sent in 4 MiB chunks. The state is built from job
//! submissions with 1 MiB scripts; `CORRAL_SNAPSHOT_TEST_MIB` sets its size
//! (16 MiB by default: four chunks, quick in a debug build; run
//! `CORRAL_SNAPSHOT_TEST_MIB=256 cargo test --release ...` for hundreds of MB).
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;
use std::time::Instant;

use corral_state::command::Command;
use corral_state::job::{BatchScript, JobSpec};
use corral_state::node::{GpuDefinition, NodeDefinition};
use corral_state::partition::{Partition, PreemptMode};
use corral_state::slurm::duration::TimeLimit;
use corral_state::{Actor, ClusterState, Role, Timestamp};
use support::*;

const MIB: usize = 1024 * 1024;

fn setup() -> Vec<Command> {
    let node = NodeDefinition {
        name: "n1".into(),
        cpus: 8,
        memory_mb: 1024,
        gpus: vec![GpuDefinition {
            index: 0,
            gpu_type: "h100".into(),
        }],
        features: BTreeSet::new(),
    };
    let partition = Partition {
        name: "gpu".into(),
        hostlist: "n1".into(),
        nodes: BTreeSet::new(),
        max_time: TimeLimit::Seconds(3600),
        default_time: None,
        priority_tier: 1,
        allowed_accounts: None,
        preempt_mode: PreemptMode::Off,
        is_default: true,
        up: true,
    };
    let mut config = ClusterState::default().config().clone();
    config.enforce_associations = false;
    vec![
        Command::SetConfig {
            config,
            by: admin(),
        },
        Command::DefineNodes {
            nodes: vec![node],
            by: admin(),
            at: Timestamp::from_secs(1),
        },
        Command::SetPartition {
            partition,
            by: admin(),
        },
    ]
}

fn big_submission(i: usize) -> Command {
    let spec = JobSpec::sbatch_defaults(&format!("big{i}"), "alice", "/tmp");
    let script = format!("#!/bin/bash\n# {i}\n{}\n", "x".repeat(MIB - 32));
    let batch = BatchScript {
        script,
        argv: Vec::new(),
        environment: Default::default(),
    };
    Command::Submit {
        spec,
        batch,
        by: Actor {
            user: "alice".into(),
            role: Role::User,
        },
        at: Timestamp::from_secs(2),
        key: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_large_state_reaches_a_new_replica_by_snapshot() {
    let mib: usize = std::env::var("CORRAL_SNAPSHOT_TEST_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let mut cluster = TestCluster::start(3).await;
    // Encoding and installing tens of MB is slow in debug builds.
    cluster.patience = std::time::Duration::from_secs(300);
    for command in setup() {
        cluster.propose(command).await.unwrap();
    }
    let leader = cluster.leader().await;
    let lagging = *cluster.replicas.keys().find(|id| **id != leader).unwrap();
    let lagging_end = cluster.replicas[&lagging]
        .metrics()
        .last_log_index
        .unwrap_or(0);
    cluster.stop(lagging).await;
    let started = Instant::now();
    for i in 0..mib {
        cluster.propose(big_submission(i)).await.unwrap();
    }
    let written = started.elapsed();
    cluster.replicas[&leader].snapshot().await.unwrap();
    // Enough further entries that the log the lagging replica needs is purged.
    for i in 0..60 {
        cluster.propose(mark(&format!("after{i}"))).await.unwrap();
    }
    // Purging runs after the snapshot is durable: wait until the entries the
    // lagging replica lacks are gone, so only a snapshot can bring it up to date.
    let deadline = Instant::now() + PATIENCE;
    while cluster.replicas[&leader]
        .metrics()
        .purged
        .is_none_or(|purged| purged <= lagging_end)
    {
        assert!(Instant::now() < deadline, "the leader never purged its log");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let started = Instant::now();
    cluster.launch(lagging).await;
    let digests = cluster.converged_digests().await;
    eprintln!(
        "{mib} MiB state: written in {written:?}, caught up by snapshot in {:?}",
        started.elapsed()
    );
    assert_eq!(digests.values().collect::<BTreeSet<_>>().len(), 1);
    let metrics = cluster.replicas[&lagging].metrics();
    assert!(
        metrics.snapshot.is_some(),
        "the replica caught up without a snapshot: {metrics:?}"
    );
    let jobs = cluster.replicas[&lagging]
        .read_local(|s| s.jobs().len())
        .unwrap();
    assert_eq!(jobs, mib);
    cluster.shutdown().await;
}
