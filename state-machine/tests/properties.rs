//! Property tests over random command sequences: invariants hold after every
//! command, refused commands change nothing, replicas agree byte for byte,
//! snapshots round-trip, and stale attempts are refused.
//!
//! Operations are generated abstractly and turned into concrete commands against
//! the current state (so most name real jobs, nodes and attempts), with some
//! deliberately wrong ones (random GPUs, stale attempts, foreign users) mixed in.

mod support;

use corral_state::command::{CancelTarget, Command, PlannedAllocation, PlannedPreemption};
use corral_state::job::{ExitStatus, JobState, NodeAllocation};
use corral_state::job_table::JobChanges;
use corral_state::partition::PreemptMode;
use corral_state::slurm::array::ArraySpec;
use corral_state::slurm::signal::Signal;
use corral_state::{ClusterState, JobId, Rejection, Timestamp, snapshot};
use proptest::prelude::*;
use support::*;

const NODES: u32 = 4;
const GPUS: u32 = 4;

#[derive(Debug, Clone)]
enum Op {
    Submit {
        user: u8,
        nodes: u32,
        gpus: u32,
        array: u8,
        requeue: bool,
        exclusive: bool,
        urgent: bool,
    },
    PlanFirstFit {
        job: u16,
    },
    PlanRandom {
        job: u16,
        node: u8,
        gpus: Vec<u32>,
        attempt_skew: i8,
    },
    Preempt {
        job: u16,
        for_job: u16,
        grace: u8,
    },
    Started {
        job: u16,
        node: u8,
    },
    BatchExit {
        job: u16,
        code: i8,
    },
    Release {
        job: u16,
        node: u8,
    },
    StaleReport {
        job: u16,
    },
    Checkpoint {
        job: u16,
        step: u16,
    },
    Cancel {
        job: u16,
        user: u8,
    },
    Requeue {
        job: u16,
    },
    Update {
        job: u16,
        nodes: Option<u8>,
        limit_s: Option<u16>,
        operator: bool,
    },
    NodeDown {
        node: u8,
    },
    Register {
        node: u8,
        keep_running: bool,
    },
    GpuFail {
        node: u8,
        gpu: u8,
    },
    /// An application XID, mostly on a GPU a running attempt holds, sometimes
    /// for another attempt or GPU.
    AppXid {
        job: u16,
        node: u8,
        gpu: u8,
        attempt_skew: i8,
    },
    /// An agent lost an attempt's processes (fenced, restarted, stopped),
    /// mostly the live attempt on one of its nodes.
    Lost {
        job: u16,
        node: u8,
        attempt_skew: i8,
    },
    Drain {
        node: u8,
    },
    Resume {
        node: u8,
    },
    Hold {
        job: u16,
    },
    ReleaseHold {
        job: u16,
    },
    Tick {
        advance_s: u16,
        backwards: bool,
    },
    // Administration mixed into the lifecycle.
    RedefineNode {
        node: u8,
        gpus: u8,
    },
    RemoveNode {
        node: u8,
    },
    ReshapePartition {
        include_extra_node: bool,
        up: bool,
        mode: u8,
    },
    Reserve {
        node: u8,
        window_s: u16,
    },
    Unreserve,
    ResumeGpu {
        node: u8,
        gpu: u8,
    },
    SubmitIntoReservation {
        user: u8,
    },
    /// A submission with an idempotency key from a small set, so retries and
    /// expiry both happen.
    KeyedSubmit {
        user: u8,
        key: u8,
    },
    /// New liveness settings, valid or not (a short margin or lease is
    /// refused and must change nothing).
    SetLiveness {
        heartbeat_ms: u16,
        lease_ms: u16,
        down_margin_ms: u16,
        admin: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
                4 => (0..3u8, 1..=2u32, 0..=GPUS + 1, 0..4u8, any::<bool>(), prop::bool::weighted(0.1), prop::bool::weighted(0.2))
            .prop_map(|(user, nodes, gpus, array, requeue, exclusive, urgent)| Op::Submit { user, nodes, gpus, array, requeue, exclusive, urgent }),
        4 => any::<u16>().prop_map(|job| Op::PlanFirstFit { job }),
        1 => (any::<u16>(), any::<u8>(), prop::collection::vec(0..GPUS + 1, 0..3), -1..=1i8)
            .prop_map(|(job, node, gpus, attempt_skew)| Op::PlanRandom { job, node, gpus, attempt_skew }),
                2 => (any::<u16>(), any::<u16>(), 0..3u8).prop_map(|(job, for_job, grace)| Op::Preempt { job, for_job, grace }),
        3 => (any::<u16>(), any::<u8>()).prop_map(|(job, node)| Op::Started { job, node }),
        3 => (any::<u16>(), -1..3i8).prop_map(|(job, code)| Op::BatchExit { job, code }),
        3 => (any::<u16>(), any::<u8>()).prop_map(|(job, node)| Op::Release { job, node }),
        1 => any::<u16>().prop_map(|job| Op::StaleReport { job }),
        2 => (any::<u16>(), any::<u16>()).prop_map(|(job, step)| Op::Checkpoint { job, step }),
        1 => (any::<u16>(), 0..3u8).prop_map(|(job, user)| Op::Cancel { job, user }),
        1 => any::<u16>().prop_map(|job| Op::Requeue { job }),
        1 => (any::<u16>(), proptest::option::of(0..4u8), proptest::option::of(0..7200u16), any::<bool>())
            .prop_map(|(job, nodes, limit_s, operator)| Op::Update { job, nodes, limit_s, operator }),
        1 => any::<u8>().prop_map(|node| Op::NodeDown { node }),
        2 => (any::<u8>(), any::<bool>()).prop_map(|(node, keep_running)| Op::Register { node, keep_running }),
        1 => (any::<u8>(), 0..GPUS as u8).prop_map(|(node, gpu)| Op::GpuFail { node, gpu }),
        2 => (any::<u16>(), any::<u8>(), any::<u8>(), prop_oneof![3 => Just(0i8), 1 => -1..=1i8])
            .prop_map(|(job, node, gpu, attempt_skew)| Op::AppXid { job, node, gpu, attempt_skew }),
        2 => (any::<u16>(), any::<u8>(), prop_oneof![3 => Just(0i8), 1 => -1..=1i8])
            .prop_map(|(job, node, attempt_skew)| Op::Lost { job, node, attempt_skew }),
        1 => any::<u8>().prop_map(|node| Op::Drain { node }),
        1 => any::<u8>().prop_map(|node| Op::Resume { node }),
        1 => any::<u16>().prop_map(|job| Op::Hold { job }),
        1 => any::<u16>().prop_map(|job| Op::ReleaseHold { job }),
        3 => (0..600u16, prop::bool::weighted(0.1)).prop_map(|(advance_s, backwards)| Op::Tick { advance_s, backwards }),
        1 => (any::<u8>(), 0..=GPUS as u8 + 1).prop_map(|(node, gpus)| Op::RedefineNode { node, gpus }),
        1 => any::<u8>().prop_map(|node| Op::RemoveNode { node }),
        1 => (any::<bool>(), prop::bool::weighted(0.8), 0..3u8)
            .prop_map(|(include_extra_node, up, mode)| Op::ReshapePartition { include_extra_node, up, mode }),
        1 => (any::<u8>(), 1..2000u16).prop_map(|(node, window_s)| Op::Reserve { node, window_s }),
        1 => Just(Op::Unreserve),
        1 => (any::<u8>(), 0..GPUS as u8).prop_map(|(node, gpu)| Op::ResumeGpu { node, gpu }),
        1 => (0..3u8).prop_map(|user| Op::SubmitIntoReservation { user }),
        2 => (0..3u8, 0..4u8).prop_map(|(user, key)| Op::KeyedSubmit { user, key }),
        1 => (0..1000u16, 0..20_000u16, 0..8_000u16, prop::bool::weighted(0.9))
            .prop_map(|(heartbeat_ms, lease_ms, down_margin_ms, admin)| Op::SetLiveness { heartbeat_ms, lease_ms, down_margin_ms, admin }),
    ]
}

/// The fixture cluster plus partition `urgent` (same nodes, higher tier, never
/// preempted itself), so preemptions can be legitimate, and a node `n5` outside
/// every partition until a `ReshapePartition` takes it in.
fn base_cluster() -> ClusterState {
    let mut state = cluster(NODES, GPUS);
    let extra = NODES + 1;
    ok(
        &mut state,
        Command::DefineNodes {
            nodes: vec![node_definition(&format!("n{extra}"), GPUS)],
            by: admin(),
            at: at(0),
        },
    );
    register(&mut state, &format!("n{extra}"), GPUS, &[], at(0));
    add_urgent_partition(&mut state);
    // A submit limit no run reaches: every submission consults the derived
    // count of unfinished jobs, which the invariants then recount after every
    // command.
    let mut root = state.accounts()["root"].clone();
    root.limits.grp_submit_jobs = Some(u32::MAX);
    ok(
        &mut state,
        Command::SetAccount {
            account: root,
            by: admin(),
        },
    );
    state
}

const USERS: [&str; 3] = ["alice", "bob", "mallory"];

fn pick_job(state: &ClusterState, index: u16) -> Option<JobId> {
    let count = state.jobs().len();
    (count > 0).then(|| {
        *state
            .jobs()
            .keys()
            .nth(index as usize % count)
            .unwrap_or(&JobId(1))
    })
}

/// The `index`-th job (modulo) among those matching `filter`.
fn pick_where(
    state: &ClusterState,
    index: u16,
    filter: impl Fn(&corral_state::job::Job) -> bool,
) -> Option<JobId> {
    let matching: Vec<JobId> = state
        .jobs()
        .values()
        .filter(|j| filter(j))
        .map(|j| j.id)
        .collect();
    (!matching.is_empty()).then(|| matching[index as usize % matching.len()])
}

/// One of the partition's nodes, or `n5`, which starts outside every partition.
fn node_name(index: u8) -> String {
    format!("n{}", u32::from(index) % (NODES + 1) + 1)
}

/// A node of the job's newest attempt, or any node.
fn attempt_node(state: &ClusterState, job: JobId, index: u8) -> String {
    let nodes: Vec<String> = state
        .job(job)
        .and_then(|j| j.current_attempt())
        .map(|a| a.allocation.iter().map(|n| n.node.clone()).collect())
        .unwrap_or_default();
    if nodes.is_empty() {
        node_name(index)
    } else {
        nodes[index as usize % nodes.len()].clone()
    }
}

fn newest_attempt(state: &ClusterState, job: JobId) -> u32 {
    state
        .job(job)
        .and_then(|j| j.current_attempt())
        .map_or(1, |a| a.number)
}

/// Turns an abstract operation into a command against the current state.
fn to_command(state: &ClusterState, op: &Op) -> Option<Command> {
    let now = Timestamp(state.clock().as_ms() + 1000);
    Some(match op.clone() {
        Op::Submit {
            user: u,
            nodes,
            gpus,
            array,
            requeue,
            exclusive,
            urgent,
        } => {
            let mut sp = spec(USERS[u as usize % 3], nodes, gpus);
            sp.requeue = requeue;
            sp.exclusive = exclusive;
            if urgent {
                sp.partition = Some("urgent".into());
            }
            if array > 1 {
                sp.array = Some(ArraySpec {
                    indices: (0..u32::from(array)).collect(),
                    throttle: None,
                });
            }
            let by = user(USERS[u as usize % 2]);
            // Some submissions carry a key drawn from a small set, so retries of
            // an earlier submission (answered without change) are exercised too.
            let key = (nodes % 2 == 0).then(|| format!("key-{}", gpus % 3));
            Command::Submit {
                spec: sp,
                batch: script(),
                by,
                at: now,
                key,
            }
        }
        Op::PlanFirstFit { job } => {
            let planned = first_fit(state, pick_job(state, job)?)?;
            Command::ApplyPlan {
                allocations: vec![planned],
                preemptions: vec![],
                reasons: vec![],
                at: now,
            }
        }
        Op::PlanRandom {
            job,
            node,
            gpus,
            attempt_skew,
        } => {
            let id = pick_job(state, job)?;
            let j = state.job(id)?;
            let attempt =
                (i64::from(j.next_attempt_number()) + i64::from(attempt_skew)).max(0) as u32;
            let nodes = (0..j.resources.nodes)
                .map(|k| NodeAllocation {
                    node: node_name(node.wrapping_add(k as u8)),
                    gpus: gpus.clone(),
                    cpus: j.resources.cpus_per_node,
                    memory_mb: 0,
                })
                .collect();
            Command::ApplyPlan {
                allocations: vec![PlannedAllocation {
                    job: id,
                    attempt,
                    nodes,
                }],
                preemptions: vec![],
                reasons: vec![],
                at: now,
            }
        }
        Op::Preempt {
            job,
            for_job,
            grace,
        } => {
            // Mostly a running victim and a pending preemptor, so policy decides.
            let id = pick_where(state, job, |j| {
                j.state == JobState::Running && j.partition == "gpu"
            })
            .or_else(|| pick_job(state, job))?;
            let urgent = |j: &corral_state::job::Job| {
                j.state == JobState::Pending && j.partition == "urgent"
            };
            let for_job =
                pick_where(state, for_job, urgent).or_else(|| pick_job(state, for_job))?;
            let preemption = PlannedPreemption {
                job: id,
                attempt: newest_attempt(state, id),
                signal: Signal::USR1,
                grace_seconds: u64::from(grace) * 60,
                for_job,
            };
            Command::ApplyPlan {
                allocations: vec![],
                preemptions: vec![preemption],
                reasons: vec![],
                at: now,
            }
        }
        Op::Started { job, node } => {
            let id = pick_job(state, job)?;
            Command::AttemptStarted {
                job: id,
                attempt: newest_attempt(state, id),
                node: attempt_node(state, id, node),
                at: now,
            }
        }
        Op::BatchExit { job, code } => {
            let id = pick_job(state, job)?;
            let status = if code < 0 {
                ExitStatus {
                    code: 0,
                    signal: Some(Signal::KILL),
                }
            } else {
                exit(i32::from(code))
            };
            Command::BatchExited {
                job: id,
                attempt: newest_attempt(state, id),
                node: attempt_node(state, id, 0),
                status,
                at: now,
            }
        }
        Op::Release { job, node } => {
            let id = pick_job(state, job)?;
            Command::NodeReleased {
                job: id,
                attempt: newest_attempt(state, id),
                node: attempt_node(state, id, node),
                at: now,
            }
        }
        Op::StaleReport { job } => {
            let id = pick_job(state, job)?;
            let stale = newest_attempt(state, id).saturating_sub(1);
            Command::BatchExited {
                job: id,
                attempt: stale,
                node: attempt_node(state, id, 0),
                status: exit(0),
                at: now,
            }
        }
        Op::Checkpoint { job, step } => {
            let id = pick_job(state, job)?;
            Command::ReportCheckpoint {
                job: id,
                attempt: newest_attempt(state, id),
                node: attempt_node(state, id, 0),
                step: u64::from(step),
                path: format!("/ckpt/{step}"),
                at: now,
            }
        }
        Op::Cancel { job, user: u } => Command::Cancel {
            target: CancelTarget::Job(pick_job(state, job)?),
            by: user(USERS[u as usize % 3]),
            at: now,
        },
        Op::Requeue { job } => {
            let id = pick_job(state, job)?;
            let owner = state.job(id)?.spec.user.clone();
            Command::Requeue {
                job: id,
                by: user(&owner),
                at: now,
            }
        }
        Op::Update {
            job,
            nodes,
            limit_s,
            operator,
        } => {
            let id = pick_job(state, job)?;
            let owner = state.job(id)?.spec.user.clone();
            Command::UpdateJob {
                job: id,
                update: corral_state::job_update::JobUpdate {
                    nodes: nodes.map(u32::from),
                    time_limit: limit_s
                        .map(|s| corral_state::slurm::duration::TimeLimit::Seconds(u64::from(s))),
                    ..Default::default()
                },
                by: if operator { admin() } else { user(&owner) },
                at: now,
            }
        }
        Op::NodeDown { node } => Command::NodeDown {
            node: node_name(node),
            reason: "lease expired".into(),
            by: admin(),
            at: now,
        },
        Op::Register { node, keep_running } => {
            let name = node_name(node);
            let running = if keep_running {
                state
                    .nodes()
                    .get(&name)?
                    .allocations
                    .iter()
                    .map(|(job, usage)| (*job, usage.attempt))
                    .collect()
            } else {
                Vec::new()
            };
            Command::RegisterNode {
                node: name,
                cpus: 64,
                memory_mb: 512 * 1024,
                gpus: (0..GPUS).map(|i| (i, "h100".to_string())).collect(),
                running,
                agent_version: "test".into(),
                boot_id: "b".into(),
                step_address: None,
                at: now,
            }
        }
        Op::GpuFail { node, gpu } => Command::GpuFailed {
            node: node_name(node),
            gpu: u32::from(gpu),
            xid: Some(79),
            reason: "fell off the bus".into(),
            at: now,
        },
        Op::AppXid {
            job,
            node,
            gpu,
            attempt_skew,
        } => {
            let id = pick_where(state, job, |j| j.state == JobState::Running)
                .or_else(|| pick_job(state, job))?;
            let node = attempt_node(state, id, node);
            let held: Vec<u32> = state
                .job(id)
                .and_then(|j| j.current_attempt())
                .and_then(|a| a.allocation.iter().find(|n| n.node == node))
                .map(|n| n.gpus.clone())
                .unwrap_or_default();
            let gpu = if held.is_empty() || gpu >= 224 {
                u32::from(gpu) % (GPUS + 1)
            } else {
                held[gpu as usize % held.len()]
            };
            let attempt = (i64::from(newest_attempt(state, id)) + i64::from(attempt_skew)).max(0);
            Command::ApplicationXid {
                job: id,
                attempt: attempt as u32,
                node,
                gpu,
                xid: 31,
                at: now,
            }
        }
        Op::Lost {
            job,
            node,
            attempt_skew,
        } => {
            let id = pick_where(state, job, |j| j.live_attempt().is_some())
                .or_else(|| pick_job(state, job))?;
            let node = attempt_node(state, id, node);
            let attempt = (i64::from(newest_attempt(state, id)) + i64::from(attempt_skew)).max(0);
            Command::AttemptLost {
                job: id,
                attempt: attempt as u32,
                node,
                reason: "the agent restarted".into(),
                at: now,
            }
        }
        Op::Drain { node } => Command::DrainNode {
            node: node_name(node),
            reason: "test".into(),
            by: admin(),
            at: now,
        },
        Op::Resume { node } => Command::ResumeNode {
            node: node_name(node),
            by: admin(),
        },
        Op::Hold { job } => {
            let id = pick_job(state, job)?;
            let owner = state.job(id)?.spec.user.clone();
            Command::Hold {
                job: id,
                by: user(&owner),
            }
        }
        Op::ReleaseHold { job } => {
            let id = pick_job(state, job)?;
            let owner = state.job(id)?.spec.user.clone();
            Command::Release {
                job: id,
                by: user(&owner),
                at: now,
            }
        }
        Op::Tick {
            advance_s,
            backwards,
        } => {
            let clock = state.clock().as_ms();
            let at = if backwards {
                Timestamp(clock.saturating_sub(5_000))
            } else {
                Timestamp(clock + u64::from(advance_s) * 1000)
            };
            Command::Tick { at }
        }
        Op::RedefineNode { node, gpus } => Command::DefineNodes {
            nodes: vec![node_definition(&node_name(node), u32::from(gpus))],
            by: admin(),
            at: now,
        },
        Op::RemoveNode { node } => Command::RemoveNode {
            node: node_name(node),
            by: admin(),
        },
        Op::ReshapePartition {
            include_extra_node,
            up,
            mode,
        } => {
            let mut partition = state.partitions()["gpu"].clone();
            partition.hostlist = if include_extra_node {
                format!("n[1-{}]", NODES + 1)
            } else {
                format!("n[1-{NODES}]")
            };
            partition.up = up;
            partition.preempt_mode =
                [PreemptMode::Off, PreemptMode::Requeue, PreemptMode::Cancel][mode as usize % 3];
            Command::SetPartition {
                partition,
                by: admin(),
            }
        }
        Op::Reserve { node, window_s } => {
            let end = Timestamp(state.clock().as_ms() + u64::from(window_s) * 1000);
            let reservation = reservation("r", &node_name(node), state.clock(), end, &["alice"]);
            Command::SetReservation {
                reservation,
                by: admin(),
            }
        }
        Op::SetLiveness {
            heartbeat_ms,
            lease_ms,
            down_margin_ms,
            admin: as_admin,
        } => Command::SetLiveness {
            liveness: corral_state::node_liveness::NodeLiveness {
                heartbeat_ms: u64::from(heartbeat_ms),
                lease_ms: u64::from(lease_ms),
                down_margin_ms: u64::from(down_margin_ms),
            },
            by: if as_admin { admin() } else { user("alice") },
            at: now,
        },
        Op::Unreserve => Command::DeleteReservation {
            name: "r".into(),
            by: admin(),
        },
        Op::ResumeGpu { node, gpu } => Command::ResumeGpu {
            node: node_name(node),
            gpu: u32::from(gpu),
            by: admin(),
        },
        Op::KeyedSubmit { user: u, key } => {
            let sp = spec(USERS[u as usize % 3], 1, 1);
            Command::Submit {
                by: user(&sp.user.clone()),
                spec: sp,
                batch: script(),
                at: now,
                key: Some(format!("key-{key}")),
            }
        }
        Op::SubmitIntoReservation { user: u } => {
            let mut sp = spec(USERS[u as usize % 3], 1, 1);
            sp.reservation = Some("r".into());
            Command::Submit {
                by: user(&sp.user.clone()),
                spec: sp,
                batch: script(),
                at: now,
                key: None,
            }
        }
    })
}

/// Runs the operations, checking per-command properties, and returns the commands
/// that were applied (accepted or not) in order.
fn run(ops: &[Op]) -> (ClusterState, Vec<Command>) {
    let mut state = base_cluster();
    let mut log = Vec::new();
    for op in ops {
        let Some(command) = to_command(&state, op) else {
            continue;
        };
        let before = state.clone();
        let position = state.job_journal_position();
        let result = state.apply(command.clone());
        // The journal of changed jobs names every job that changed (watches
        // read only those).
        if let JobChanges::Since(named) = state.jobs_changed_since(position) {
            for (id, job) in state.jobs() {
                if before.job(*id) != Some(job) {
                    assert!(
                        named.contains(id),
                        "job {id} changed by {command:?} but not in the journal"
                    );
                }
            }
        } else {
            panic!("the journal lost changes of one command");
        }
        match &result {
            Err(_) => assert_eq!(state, before, "refused {command:?} changed the state"),
            Ok(_) => check_invariants(&state),
        }
        if let Op::StaleReport { .. } = op
            && let Command::BatchExited { job, attempt, .. } = &command
        {
            let newest = newest_attempt(&before, *job);
            if *attempt < newest
                || before
                    .job(*job)
                    .is_some_and(|j| j.current_attempt().is_none())
            {
                assert!(
                    matches!(result, Err(Rejection::StaleAttempt { .. })),
                    "stale report for attempt {attempt} (newest {newest}) gave {result:?}"
                );
            }
        }
        // An attempt whose own batch exit ended it is never requeued,
        // whatever comes after, unless the script failed and what comes
        // after is the loss of a node that had not confirmed the attempt's
        // processes gone (the failure was the node's: requeued as a node
        // failure).
        let lost_node = match &command {
            Command::NodeDown { node, .. }
            | Command::AttemptLost { node, .. }
            | Command::RegisterNode { node, .. } => Some(node),
            _ => None,
        };
        for job in before.jobs().values() {
            let exited = job.live_attempt().is_some_and(|a| {
                a.batch_exit.is_some()
                    && a.ending.as_ref().is_some_and(|e| match &e.cause {
                        corral_state::job::EndCause::Exited(status) => {
                            status.is_success()
                                || lost_node.is_none_or(|n| !e.unreleased.contains(n))
                        }
                        _ => false,
                    })
            });
            if exited && let Some(after) = state.job(job.id) {
                assert_eq!(
                    after.requeue_count, job.requeue_count,
                    "job {} was requeued after its batch script exited ({command:?})",
                    job.id
                );
            }
        }
        if let Command::AttemptLost {
            job, attempt, node, ..
        } = &command
        {
            let live = before
                .job(*job)
                .and_then(|j| j.live_attempt())
                .filter(|a| a.allocation.iter().any(|n| &n.node == node))
                .map(|a| a.number);
            if live != Some(*attempt) {
                assert!(
                    result.is_err(),
                    "a lost report for attempt {attempt} (live here: {live:?}) was accepted"
                );
            }
            if result.is_ok() {
                let holds = state
                    .nodes()
                    .get(node)
                    .is_some_and(|n| n.allocations.contains_key(job));
                assert!(
                    !holds,
                    "node {node} still holds job {job} after its agent lost it"
                );
                let job = state.job(*job).expect("accepted for a known job");
                assert_ne!(job.state, JobState::Running, "a lost attempt kept running");
            }
        }
        if let Command::ApplicationXid {
            job, attempt, node, ..
        } = &command
        {
            let live = before
                .job(*job)
                .filter(|j| j.state == JobState::Running)
                .and_then(|j| j.live_attempt())
                .map(|a| a.number);
            if live != Some(*attempt) {
                assert!(
                    result.is_err(),
                    "an application XID for attempt {attempt} (running: {live:?}) was accepted"
                );
            }
            if result.is_ok() {
                // The GPU stays in service: no GPU's health or drain changes.
                let gpus = |s: &ClusterState| {
                    s.nodes()
                        .get(node)
                        .map(|n| {
                            n.gpus
                                .iter()
                                .map(|g| (g.health.clone(), g.drain.clone()))
                                .collect::<Vec<_>>()
                        })
                        .unwrap_or_default()
                };
                assert_eq!(
                    gpus(&state),
                    gpus(&before),
                    "an application XID drained a GPU"
                );
                let job = state.job(*job).expect("accepted for a known job");
                assert!(
                    job.state != JobState::Running,
                    "an application XID left job {} running",
                    job.id
                );
            }
        }
        assert!(state.clock() >= before.clock(), "clock ran backwards");
        log.push(command);
    }
    (state, log)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, max_shrink_iters: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_and_replicas_agree(ops in prop::collection::vec(op(), 1..120)) {
        let (state, log) = run(&ops);
        // A second replica fed the same commands holds the same bytes.
        let mut replica = base_cluster();
        for command in log {
            let _ = replica.apply(command);
        }
        prop_assert_eq!(replica.digest(), state.digest());
        // A snapshot round-trips to the same digest.
        let bytes = snapshot::encode(&state).expect("encodes");
        let restored = snapshot::decode(&bytes).expect("decodes");
        prop_assert_eq!(restored.digest(), state.digest());
    }

    #[test]
    fn every_job_is_in_exactly_one_state_and_usage_never_negative(ops in prop::collection::vec(op(), 1..150)) {
        let (state, _) = run(&ops);
        let queued = state.queued_jobs().count();
        let active = state.active_jobs().count();
        let finished = state.jobs().values().filter(|j| j.state.is_terminal()).count();
        prop_assert_eq!(queued + active + finished, state.jobs().len());
        prop_assert!(state.jobs().values().all(|j| j.state != JobState::Requeued));
    }

    #[test]
    fn pages_of_unfinished_jobs_are_the_unfinished_jobs_in_id_order(
        ops in prop::collection::vec(op(), 1..150),
        cut in 0u64..40,
    ) {
        let (state, _) = run(&ops);
        let expected: Vec<JobId> = state
            .jobs()
            .values()
            .filter(|j| !j.state.is_terminal() && j.id.0 > cut)
            .map(|j| j.id)
            .collect();
        let paged: Vec<JobId> = state.unfinished_jobs_after(JobId(cut)).map(|j| j.id).collect();
        prop_assert_eq!(paged, expected);
    }
}

/// Where and how to damage an encoded command: flip bits of a byte, cut the
/// encoding short, or splice in bytes.
#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, mask: u8 },
    Cut { at: usize },
    Splice { at: usize, bytes: Vec<u8> },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), 1u8..=255).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        1 => any::<usize>().prop_map(|at| Mutation::Cut { at }),
        1 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..9))
            .prop_map(|(at, bytes)| Mutation::Splice { at, bytes }),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutation: &Mutation) -> Vec<u8> {
    if bytes.is_empty() {
        return bytes;
    }
    match mutation {
        Mutation::Flip { at, mask } => {
            let at = at % bytes.len();
            bytes[at] ^= mask;
        }
        Mutation::Cut { at } => bytes.truncate(at % bytes.len()),
        Mutation::Splice { at, bytes: more } => {
            let at = at % bytes.len();
            bytes.splice(at..at, more.iter().copied());
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Apply is total: whatever a command decodes to, from the bytes of a real
    /// history's commands damaged anywhere (what a newer build, a bug or a
    /// corrupted peer could put in the log), applying it never panics, a
    /// refusal changes nothing, an acceptance keeps every invariant, and two
    /// replicas agree.
    #[test]
    fn damaged_commands_decode_or_not_but_apply_never_panics(
        ops in prop::collection::vec(op(), 1..60),
        mutations in prop::collection::vec((any::<prop::sample::Index>(), mutation()), 1..40),
    ) {
        let (mut state, log) = run(&ops);
        prop_assume!(!log.is_empty());
        let mut replica = state.clone();
        for (which, mutation) in &mutations {
            let original = which.get(&log);
            let encoded = postcard::to_stdvec(original).expect("encodes");
            let Ok(command) = postcard::from_bytes::<Command>(&mutate(encoded, mutation)) else {
                continue;
            };
            let before = state.clone();
            match state.apply(command.clone()) {
                Err(_) => prop_assert_eq!(&state, &before, "refused {:?} changed the state", command),
                Ok(_) => check_invariants(&state),
            }
            let _ = replica.apply(command);
        }
        prop_assert_eq!(replica.digest(), state.digest());
    }
}

#[test]
fn corrupted_snapshots_are_refused() {
    let state = cluster(2, 2);
    let bytes = snapshot::encode(&state).unwrap();
    assert_eq!(snapshot::decode(&bytes).unwrap(), state);
    let mut flipped = bytes.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x40;
    assert_eq!(
        snapshot::decode(&flipped),
        Err(snapshot::SnapshotError::BadChecksum)
    );
    assert!(matches!(
        snapshot::decode(&bytes[..bytes.len() - 1]),
        Err(snapshot::SnapshotError::BadLength { .. })
    ));
    assert_eq!(
        snapshot::decode(b"not a snapshot at all"),
        Err(snapshot::SnapshotError::BadMagic)
    );
    let mut newer = bytes;
    newer[8] = 9;
    assert_eq!(
        snapshot::decode(&newer),
        Err(snapshot::SnapshotError::UnsupportedVersion { found: 9 })
    );
}
