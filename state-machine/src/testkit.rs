//! Test fixtures (feature `testkit`): a small GPU cluster built through
//! commands, and helpers that drive jobs through their life the way the leader
//! and agents would. For tests only: the helpers panic on refusals.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};

use crate::account::{Account, User};
use crate::command::{Command, Outcome, PlannedAllocation};
use crate::job::{BatchScript, ExitStatus, JobSpec, NodeAllocation};
use crate::node::{GpuDefinition, NodeDefinition};
use crate::partition::{Partition, PreemptMode};
use crate::reservation::Reservation;
use crate::slurm::duration::TimeLimit;
use crate::slurm::gres::GpuRequest;
use crate::{Actor, ClusterState, JobId, Role, Timestamp};

pub fn admin() -> Actor {
    Actor {
        user: "root".into(),
        role: Role::Admin,
    }
}

pub fn user(name: &str) -> Actor {
    Actor {
        user: name.into(),
        role: Role::User,
    }
}

pub fn at(secs: u64) -> Timestamp {
    Timestamp::from_secs(secs)
}

/// `nodes` nodes `n1..` with `gpus` h100 GPUs, 64 CPUs and 512 GiB each, in
/// partition `gpu` (default, requeue preemption, 1 day max), accounts `root > ml`,
/// users alice and bob in `ml`, all nodes registered.
pub fn cluster(nodes: u32, gpus: u32) -> ClusterState {
    let mut state = ClusterState::default();
    let defs = (1..=nodes)
        .map(|i| node_definition(&format!("n{i}"), gpus))
        .collect();
    ok(
        &mut state,
        Command::DefineNodes {
            nodes: defs,
            by: admin(),
            at: at(0),
        },
    );
    let hostlist = if nodes == 1 {
        "n1".to_string()
    } else {
        format!("n[1-{nodes}]")
    };
    ok(
        &mut state,
        Command::SetPartition {
            partition: Partition {
                name: "gpu".into(),
                hostlist,
                nodes: BTreeSet::new(),
                max_time: TimeLimit::Seconds(24 * 3600),
                default_time: Some(TimeLimit::Seconds(3600)),
                priority_tier: 1,
                allowed_accounts: None,
                preempt_mode: PreemptMode::Requeue,
                is_default: true,
                up: true,
            },
            by: admin(),
        },
    );
    ok(
        &mut state,
        Command::SetAccount {
            account: Account {
                name: "ml".into(),
                parent: Some("root".into()),
                shares: 10,
                default_qos: None,
                description: String::new(),
                limits: Default::default(),
            },
            by: admin(),
        },
    );
    for name in ["alice", "bob"] {
        ok(
            &mut state,
            Command::SetUser {
                user: User {
                    name: name.into(),
                    default_account: "ml".into(),
                    accounts: BTreeSet::from(["ml".to_string()]),
                    role: Role::User,
                    limits: Default::default(),
                },
                by: admin(),
            },
        );
    }
    for i in 1..=nodes {
        register(&mut state, &format!("n{i}"), gpus, &[], at(0));
    }
    state
}

/// A node like the fixture's: 64 CPUs, 512 GiB, `gpus` h100 GPUs, feature `ib`.
pub fn node_definition(name: &str, gpus: u32) -> NodeDefinition {
    NodeDefinition {
        name: name.into(),
        cpus: 64,
        memory_mb: 512 * 1024,
        gpus: (0..gpus)
            .map(|index| GpuDefinition {
                index,
                gpu_type: "h100".into(),
            })
            .collect(),
        features: BTreeSet::from(["ib".to_string()]),
    }
}

/// Reservation `name` of one node for `users` over `[start, end)`.
pub fn reservation(
    name: &str,
    node: &str,
    start: Timestamp,
    end: Timestamp,
    users: &[&str],
) -> Reservation {
    Reservation {
        name: name.into(),
        nodes: BTreeSet::from([node.to_string()]),
        start,
        end,
        users: users.iter().map(|u| u.to_string()).collect(),
        accounts: BTreeSet::new(),
        maintenance: false,
    }
}

/// Adds partition `urgent`: the same nodes as `gpu`, a higher priority tier (its
/// jobs may preempt `gpu` jobs), and preemption off for its own jobs.
pub fn add_urgent_partition(state: &mut ClusterState) {
    let mut urgent = state.partitions()["gpu"].clone();
    urgent.name = "urgent".into();
    urgent.priority_tier = 10;
    urgent.is_default = false;
    urgent.preempt_mode = PreemptMode::Off;
    ok(
        state,
        Command::SetPartition {
            partition: urgent,
            by: admin(),
        },
    );
}

pub fn register(
    state: &mut ClusterState,
    node: &str,
    gpus: u32,
    running: &[(JobId, u32)],
    when: Timestamp,
) -> Outcome {
    ok(
        state,
        Command::RegisterNode {
            node: node.into(),
            cpus: 64,
            memory_mb: 512 * 1024,
            gpus: (0..gpus).map(|i| (i, "h100".to_string())).collect(),
            running: running.to_vec(),
            agent_version: "test".into(),
            boot_id: format!("boot-{}", when.as_ms()),
            step_address: None,
            at: when,
        },
    )
}

pub fn ok(state: &mut ClusterState, command: Command) -> Outcome {
    match state.apply(command.clone()) {
        Ok(outcome) => outcome,
        Err(e) => panic!("{command:?} was refused: {e}"),
    }
}

pub fn spec(user: &str, nodes: u32, gpus_per_node: u32) -> JobSpec {
    let mut spec = JobSpec::sbatch_defaults("train", user, "/home/user");
    spec.uid = 1000;
    spec.gid = 1000;
    spec.submit_host = "login1".into();
    spec.nodes = nodes;
    spec.gpus_per_node = (gpus_per_node > 0).then_some(GpuRequest {
        gpu_type: None,
        count: gpus_per_node,
    });
    spec
}

pub fn script() -> BatchScript {
    BatchScript {
        script: "#!/bin/bash\nsrun python train.py\n".into(),
        argv: Vec::new(),
        environment: BTreeMap::new(),
    }
}

pub fn submit(state: &mut ClusterState, spec: JobSpec, when: Timestamp) -> JobId {
    let by = user(&spec.user);
    match ok(
        state,
        Command::Submit {
            spec,
            batch: script(),
            by,
            at: when,
            key: None,
        },
    ) {
        Outcome::Submitted { first, .. } => first,
        other => panic!("unexpected outcome {other:?}"),
    }
}

/// A first-fit allocation of the job's next attempt on free GPUs of up nodes, the
/// way a trivial scheduler would plan it; `None` when it does not fit.
pub fn first_fit(state: &ClusterState, id: JobId) -> Option<PlannedAllocation> {
    let job = state.job(id)?;
    let want = &job.resources;
    let mut nodes = Vec::new();
    for node in state.nodes().values() {
        if nodes.len() == want.nodes as usize {
            break;
        }
        if !node.accepts_work()
            || node.is_held_exclusively()
            || (want.exclusive && !node.allocations.is_empty())
        {
            continue;
        }
        let free: Vec<u32> = node
            .gpus
            .iter()
            .filter(|g| g.is_free_and_usable())
            .map(|g| g.index)
            .take(want.gpus_per_node as usize)
            .collect();
        if free.len() == want.gpus_per_node as usize
            && node.free_cpus() >= want.cpus_per_node
            && node.free_memory_mb() >= want.memory_per_node_mb
        {
            nodes.push(NodeAllocation {
                node: node.name.clone(),
                gpus: free,
                cpus: want.cpus_per_node,
                memory_mb: want.memory_per_node_mb,
            });
        }
    }
    (nodes.len() == want.nodes as usize).then(|| PlannedAllocation {
        job: id,
        attempt: job.next_attempt_number(),
        nodes,
    })
}

/// Plans and starts the job on a first-fit allocation; panics if it does not fit.
pub fn start(state: &mut ClusterState, id: JobId, when: Timestamp) -> Vec<String> {
    let planned = first_fit(state, id).expect("job fits");
    let nodes: Vec<String> = planned.nodes.iter().map(|n| n.node.clone()).collect();
    let attempt = planned.attempt;
    match ok(
        state,
        Command::ApplyPlan {
            allocations: vec![planned],
            preemptions: vec![],
            reasons: vec![],
            at: when,
        },
    ) {
        Outcome::Plan(p) => assert_eq!(p.started, vec![id], "plan rejected: {:?}", p.rejected),
        other => panic!("unexpected outcome {other:?}"),
    }
    for node in &nodes {
        ok(
            state,
            Command::AttemptStarted {
                job: id,
                attempt,
                node: node.clone(),
                at: when,
            },
        );
    }
    nodes
}

pub fn exit(code: i32) -> ExitStatus {
    ExitStatus { code, signal: None }
}

pub fn check_invariants(state: &ClusterState) {
    if let Err(violation) = crate::invariants::check(state) {
        panic!("invariant violated: {violation}");
    }
}
