//! The cluster every format test prints (tests only): four 8-GPU nodes at
//! 2026-11-21T08:00:00 UTC with a requeued-and-restarted job, a completed one,
//! waiting ones (resources, user hold, an array), a down node and a failed GPU.
#![allow(clippy::unwrap_used)]

use corral_state::job::{Job, PendingReason};
use corral_state::node::Node;
use corral_state::partition::Partition;
use corral_state::slurm::array::parse_array;
use corral_state::testkit::{admin, cluster, exit, ok, spec, start, submit, user};
use corral_state::{ClusterState, Command, JobId, Timestamp};

/// 2026-11-21T08:00:00 UTC.
pub const T0: u64 = 1_795_248_000;

/// `T0 + secs`.
pub fn t(secs: u64) -> Timestamp {
    Timestamp::from_secs(T0 + secs)
}

/// When the tables are printed: `t(4600)`.
pub fn now() -> Timestamp {
    t(4600)
}

/// Jobs 1-6:
/// 1. alice's 2x8-GPU `train`: ran on n[1-2], checkpointed at step 500, requeued
///    when n2 went down, running again on n[1,4] since t(1000);
/// 2. bob's 4-GPU `eval` on n3, completed with exit 0 after 20 minutes;
/// 3. alice's `long-name-job`, pending on Resources;
/// 4. bob's `train`, held by bob;
/// 5. alice's array `sweep`, tasks 1 and 2 (jobs 5 and 6), pending on Priority.
pub fn scenario() -> ClusterState {
    let mut state = cluster(4, 8);
    let train = submit(&mut state, spec("alice", 2, 8), t(0));
    start(&mut state, train, t(60));
    let mut eval_spec = spec("bob", 1, 4);
    eval_spec.name = "eval".into();
    let eval = submit(&mut state, eval_spec, t(100));
    start(&mut state, eval, t(120));
    ok(
        &mut state,
        Command::ReportCheckpoint {
            job: train,
            attempt: 1,
            node: "n1".into(),
            step: 500,
            path: "/ckpt/500".into(),
            at: t(600),
        },
    );
    ok(
        &mut state,
        Command::NodeDown {
            node: "n2".into(),
            reason: "agent lost".into(),
            by: admin(),
            at: t(900),
        },
    );
    release(&mut state, train, 1, "n1", t(910));
    start(&mut state, train, t(1000));

    let mut waiting = spec("alice", 1, 8);
    waiting.name = "long-name-job".into();
    let waiting = submit(&mut state, waiting, t(1050));
    let held = submit(&mut state, spec("bob", 1, 8), t(1060));
    ok(
        &mut state,
        Command::Hold {
            job: held,
            by: user("bob"),
        },
    );
    let mut sweep = spec("alice", 1, 1);
    sweep.name = "sweep".into();
    sweep.array = Some(parse_array("1-2", 100).unwrap());
    let first_task = submit(&mut state, sweep, t(1070));
    ok(
        &mut state,
        Command::ApplyPlan {
            allocations: vec![],
            preemptions: vec![],
            reasons: vec![
                (waiting, PendingReason::Resources),
                (first_task, PendingReason::Priority),
                (JobId(first_task.0 + 1), PendingReason::Priority),
            ],
            at: t(1100),
        },
    );

    ok(
        &mut state,
        Command::BatchExited {
            job: eval,
            attempt: 1,
            node: "n3".into(),
            status: exit(0),
            at: t(1320),
        },
    );
    ok(
        &mut state,
        Command::GpuFailed {
            node: "n3".into(),
            gpu: 5,
            xid: Some(79),
            reason: "fell off the bus".into(),
            at: t(1400),
        },
    );
    state
}

fn release(state: &mut ClusterState, job: JobId, attempt: u32, node: &str, at: Timestamp) {
    ok(
        state,
        Command::NodeReleased {
            job,
            attempt,
            node: node.into(),
            at,
        },
    );
}

/// Every job, by id.
pub fn jobs(state: &ClusterState) -> Vec<Job> {
    state.jobs().values().cloned().collect()
}

/// Every node, by name.
pub fn nodes(state: &ClusterState) -> Vec<Node> {
    state.nodes().values().cloned().collect()
}

/// Every partition, by name.
pub fn partitions(state: &ClusterState) -> Vec<Partition> {
    state.partitions().values().cloned().collect()
}
