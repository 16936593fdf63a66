//! Regressions from the scheduler review (each failed on the code as it was): each test asserts the intended policy and fails on a bug.
#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::BTreeSet;

use corral_scheduler::pass::{self, Verdict};
use corral_state::command::{Command, Outcome};
use corral_state::job::PendingReason;
use corral_state::slurm::dependency::{DependencyCondition, DependencyKind, DependencySpec};
use corral_state::slurm::duration::TimeLimit;
use corral_state::slurm::sbatch::SwitchesSpec;
use corral_state::testkit::*;
use corral_state::topology::{Switch, Topology};
use corral_state::{ClusterState, JobId, Timestamp};

fn submit_with(
    state: &mut ClusterState,
    nodes: u32,
    gpus: u32,
    limit_s: u64,
    when: Timestamp,
    f: impl FnOnce(&mut corral_state::job::JobSpec),
) -> JobId {
    let mut sp = spec("alice", nodes, gpus);
    sp.time_limit = Some(TimeLimit::Seconds(limit_s));
    f(&mut sp);
    submit(state, sp, when)
}

/// Applies a plan the way the leader would, starting every planned attempt.
fn apply(state: &mut ClusterState, plan: &corral_scheduler::Plan, now: Timestamp) {
    if let Some(command) = plan.to_command(now) {
        match state.apply(command) {
            Ok(Outcome::Plan(o)) => assert!(o.rejected.is_empty(), "rejected: {:?}", o.rejected),
            other => panic!("{other:?}"),
        }
    }
    for a in &plan.allocations {
        for part in &a.nodes {
            ok(
                state,
                Command::AttemptStarted {
                    job: a.job,
                    attempt: a.attempt,
                    node: part.node.clone(),
                    at: now,
                },
            );
        }
    }
}

fn set_config(state: &mut ClusterState, f: impl FnOnce(&mut corral_state::config::ClusterConfig)) {
    let mut config = state.config().clone();
    f(&mut config);
    ok(
        state,
        Command::SetConfig {
            config,
            by: admin(),
        },
    );
}

fn started(plan: &corral_scheduler::Plan, id: JobId) -> Option<Vec<String>> {
    plan.allocations
        .iter()
        .find(|a| a.job == id)
        .map(|a| a.nodes.iter().map(|n| n.node.clone()).collect())
}

/// A blocked preemptor whose victim is still in its grace period must not preempt
/// a second job in the next pass.
#[test]
fn probe_preemption_cascades_across_passes() {
    let mut state = cluster(3, 4);
    add_urgent_partition(&mut state);
    set_config(&mut state, |c| {
        c.preempt_exempt_seconds = 0;
        c.preempt_grace_seconds = 60;
    });
    let lows: Vec<JobId> = (0..3)
        .map(|_| submit_with(&mut state, 1, 4, 3600, at(0), |_| {}))
        .collect();
    for id in &lows {
        start(&mut state, *id, at(0));
    }
    let urgent = submit_with(&mut state, 1, 4, 3600, at(100), |s| {
        s.partition = Some("urgent".into());
    });
    let p1 = corral_scheduler::plan(&state, at(100));
    assert_eq!(p1.preemptions.len(), 1, "first pass preempts one victim");
    apply(&mut state, &p1, at(100));
    let p2 = corral_scheduler::plan(&state, at(110));
    assert!(
        p2.preemptions.is_empty(),
        "job {urgent} already preempted {:?}; second pass preempts {:?} too",
        p1.preemptions.iter().map(|p| p.job).collect::<Vec<_>>(),
        p2.preemptions.iter().map(|p| p.job).collect::<Vec<_>>()
    );
}

/// Jobs started earlier in the same pass must release (in the backfill
/// simulation) at their time limit; otherwise the top blocked job gets no
/// reservation and a long low-priority job takes a node it needs.
#[test]
fn probe_planned_jobs_never_release_in_backfill() {
    let mut state = cluster(3, 4);
    let r = submit_with(&mut state, 1, 4, 2 * 3600, at(0), |_| {});
    // Put R on n2 by starting a filler on n1 first and finishing it.
    let filler = submit_with(&mut state, 1, 4, 3600, at(0), |_| {});
    start(&mut state, filler, at(0)); // n1
    start(&mut state, r, at(0)); // n2
    ok(
        &mut state,
        Command::Cancel {
            target: corral_state::CancelTarget::Job(filler),
            by: admin(),
            at: at(1),
        },
    );
    ok(
        &mut state,
        Command::NodeReleased {
            job: filler,
            attempt: 1,
            node: "n1".into(),
            at: at(1),
        },
    );
    let a = submit_with(&mut state, 1, 4, 3600, at(2), |_| {});
    let b = submit_with(&mut state, 3, 4, 3600, at(2), |_| {});
    let c = submit_with(&mut state, 1, 4, 20 * 3600, at(2), |_| {});
    let (plan, verdicts) = pass::run(&state, at(10));
    assert!(started(&plan, a).is_some(), "A starts");
    assert!(started(&plan, b).is_none());
    let held = matches!(
        &verdicts[&b],
        Verdict::Blocked {
            reservation: Some(_),
            ..
        }
    );
    assert!(
        started(&plan, c).is_none(),
        "C (20 h) started although B (3 nodes) can start at 2 h when A and R end; B held: {held}"
    );
}

/// A blocked job's backfill hold must be on nodes it can really use at its
/// estimated start: an admin reservation that begins during its run excludes the
/// node then, so a low-priority job must not take the node it will need instead.
#[test]
fn probe_admin_reservation_misplaces_hold() {
    let mut state = cluster(3, 4);
    let r1 = submit_with(&mut state, 1, 4, 3600, at(0), |_| {});
    let r2 = submit_with(&mut state, 1, 4, 3600, at(0), |_| {});
    start(&mut state, r1, at(0)); // n1
    start(&mut state, r2, at(0)); // n2
    ok(
        &mut state,
        Command::SetReservation {
            reservation: reservation("maint", "n1", at(2 * 3600), at(12 * 3600), &["carol"]),
            by: admin(),
        },
    );
    let j = submit_with(&mut state, 2, 4, 5400, at(5), |_| {});
    let k = submit_with(&mut state, 1, 4, 10 * 3600, at(5), |_| {});
    let (plan, verdicts) = pass::run(&state, at(10));
    let hold = match &verdicts[&j] {
        Verdict::Blocked {
            reservation: Some(r),
            ..
        } => r.clone(),
        other => panic!("J not held: {other:?}"),
    };
    // At 1 h J runs 1 h..2.5 h, overlapping the reservation on n1 from 2 h.
    assert!(
        !(hold.nodes.contains(&"n1".to_string()) && started(&plan, k).is_some()),
        "J is held on {:?} from {:?} but cannot use n1 then; K (10 h) took {:?}, delaying J to 10 h",
        hold.nodes,
        hold.start,
        started(&plan, k)
    );
}

fn two_leaf_tree(state: &mut ClusterState, leaf1: &[&str], leaf2: &[&str]) {
    let mut topology = Topology::default();
    topology.switches.insert(
        "leaf1".into(),
        Switch {
            nodes: leaf1.iter().map(|s| s.to_string()).collect(),
            children: vec![],
        },
    );
    topology.switches.insert(
        "leaf2".into(),
        Switch {
            nodes: leaf2.iter().map(|s| s.to_string()).collect(),
            children: vec![],
        },
    );
    topology.switches.insert(
        "top".into(),
        Switch {
            nodes: vec![],
            children: vec!["leaf1".into(), "leaf2".into()],
        },
    );
    ok(
        state,
        Command::SetTopology {
            topology,
            by: admin(),
        },
    );
}

/// The failure cache must not turn a Topology failure into a Resources one for
/// the next identical job (which then also holds a backfill reservation that the
/// first one, correctly, did not).
#[test]
fn probe_shape_cache_loses_topology_reason() {
    let mut state = cluster(4, 4);
    two_leaf_tree(&mut state, &["n1", "n2"], &["n3", "n4"]);
    let sw = |s: &mut corral_state::job::JobSpec| {
        s.switches = Some(SwitchesSpec {
            count: 1,
            max_wait_seconds: None,
        });
    };
    let a = submit_with(&mut state, 3, 4, 3600, at(0), sw);
    let b = submit_with(&mut state, 3, 4, 3600, at(0), sw);
    let (_, verdicts) = pass::run(&state, at(10));
    let reason = |id| match &verdicts[&id] {
        Verdict::Blocked {
            reason,
            reservation,
            ..
        } => (*reason, reservation.is_some()),
        other => panic!("{other:?}"),
    };
    assert_eq!(reason(a), (PendingReason::Topology, false));
    assert_eq!(
        reason(b),
        (PendingReason::Topology, false),
        "identical job B"
    );
}

/// Preemption keeps a victim whose resources the preemptor does not need.
#[test]
fn probe_preemption_keeps_unneeded_victim() {
    let mut state = cluster(3, 4);
    add_urgent_partition(&mut state);
    set_config(&mut state, |c| c.preempt_exempt_seconds = 0);
    // A: 2 GPUs on n1 (2 stay free), cheap. B: 4 GPUs on n2, dearer. n3: unpreemptable.
    let a = submit_with(&mut state, 1, 2, 3600, at(0), |_| {});
    start(&mut state, a, at(100)); // n1, lost work 2 GPUs x (t-100)
    let b = submit_with(&mut state, 1, 4, 3600, at(0), |_| {});
    start(&mut state, b, at(0)); // n2, lost work 4 GPUs x t
    let guard = submit_with(&mut state, 1, 4, 3600, at(0), |s| {
        s.partition = Some("urgent".into())
    });
    start(&mut state, guard, at(0)); // n3
    let u = submit_with(&mut state, 2, 2, 3600, at(200), |s| {
        s.partition = Some("urgent".into())
    });
    let plan = corral_scheduler::plan(&state, at(300));
    let victims: BTreeSet<JobId> = plan.preemptions.iter().map(|p| p.job).collect();
    assert!(victims.contains(&b), "{u} needs B's node: {victims:?}");
    assert_eq!(
        victims,
        BTreeSet::from([b]),
        "n1 already has the 2 free GPUs the gang needs; preempting A is lost work for nothing"
    );
}

/// Least lost work: a single dearer victim can beat a prefix of cheap ones.
#[test]
fn probe_preemption_not_least_lost_work() {
    let mut state = cluster(2, 4);
    add_urgent_partition(&mut state);
    set_config(&mut state, |c| c.preempt_exempt_seconds = 0);
    // Starts in time order (the state clock never runs backwards):
    // n1: A (2 GPUs from 850: 2 x 150 = 300 GPU-s lost) + C (2 GPUs from 860: 280)
    // n2: B (4 GPUs from 900: 4 x 100 = 400), cheaper than A + C (580).
    let a = submit_with(&mut state, 1, 2, 3600, at(0), |_| {});
    start(&mut state, a, at(850)); // n1
    let c = submit_with(&mut state, 1, 2, 3600, at(0), |_| {});
    start(&mut state, c, at(860)); // n1
    let b = submit_with(&mut state, 1, 4, 3600, at(0), |_| {});
    start(&mut state, b, at(900)); // n2
    let u = submit_with(&mut state, 1, 4, 3600, at(950), |s| {
        s.partition = Some("urgent".into())
    });
    let plan = corral_scheduler::plan(&state, at(1000));
    let victims: BTreeSet<JobId> = plan.preemptions.iter().map(|p| p.job).collect();
    // A + C lose 300 + 280 = 580 GPU-s; B loses 400.
    assert_eq!(
        victims,
        BTreeSet::from([b]),
        "{u}: least lost work is B alone, got {victims:?}"
    );
}

/// Nodes directly under an inner switch were never used by gangs; such a topology
/// is now refused (a switch holds nodes or switches, as in Slurm's topology.conf).
#[test]
fn probe_nodes_under_inner_switch_unusable() {
    let mut state = cluster(4, 4);
    let mut topology = Topology::default();
    topology.switches.insert(
        "leaf1".into(),
        Switch {
            nodes: vec!["n1".into(), "n2".into()],
            children: vec![],
        },
    );
    topology.switches.insert(
        "top".into(),
        Switch {
            nodes: vec!["n3".into(), "n4".into()],
            children: vec!["leaf1".into()],
        },
    );
    let refused = state.apply(Command::SetTopology {
        topology,
        by: admin(),
    });
    assert!(
        refused
            .unwrap_err()
            .to_string()
            .contains("both nodes and switches")
    );
}

/// `--switches=1@10min`: the max wait counts from when the job became eligible,
/// not from submission while it waited for a dependency.
#[test]
fn probe_switches_wait_consumed_by_dependency() {
    let mut state = cluster(4, 4);
    two_leaf_tree(&mut state, &["n1", "n2"], &["n3", "n4"]);
    let dep = submit_with(&mut state, 1, 4, 3600, at(0), |_| {});
    start(&mut state, dep, at(0)); // n1
    let busy = submit_with(&mut state, 1, 4, 20 * 3600, at(0), |_| {});
    start(&mut state, busy, at(0)); // n2
    let busy2 = submit_with(&mut state, 1, 4, 20 * 3600, at(0), |_| {});
    start(&mut state, busy2, at(0)); // n3
    let j = submit_with(&mut state, 2, 4, 3600, at(0), |s| {
        s.switches = Some(SwitchesSpec {
            count: 1,
            max_wait_seconds: Some(600),
        });
        s.dependency = Some(DependencySpec {
            any_of: false,
            conditions: vec![DependencyCondition {
                kind: DependencyKind::AfterOk,
                job_id: dep.0,
                array_task: None,
                delay_minutes: 0,
            }],
            singleton: false,
        });
    });
    ok(
        &mut state,
        Command::BatchExited {
            job: dep,
            attempt: 1,
            node: "n1".into(),
            status: exit(0),
            at: at(3600),
        },
    );
    // n1 (leaf1) and n4 (leaf2) are free: only a scattered placement exists.
    let plan = corral_scheduler::plan(&state, at(3601));
    assert!(
        started(&plan, j).is_none(),
        "J became eligible 1 s ago but scattered over two leaves: {:?}",
        started(&plan, j)
    );
}

/// While victims are in their preemption grace, the preemptor's backfill hold must
/// start at the grace deadline; otherwise a lower-priority job takes the free part
/// of the node and delays the preemptor past the deadline.
#[test]
fn probe_backfill_ignores_preemption_deadline() {
    let mut state = cluster(1, 4);
    add_urgent_partition(&mut state);
    set_config(&mut state, |c| {
        c.preempt_exempt_seconds = 0;
        c.preempt_grace_seconds = 60;
    });
    let v = submit_with(&mut state, 1, 2, 10 * 3600, at(0), |_| {});
    start(&mut state, v, at(0)); // n1: 2 of 4 GPUs
    let u = submit_with(&mut state, 1, 4, 3600, at(100), |s| {
        s.partition = Some("urgent".into())
    });
    let p1 = corral_scheduler::plan(&state, at(100));
    assert_eq!(
        p1.preemptions.iter().map(|p| p.job).collect::<Vec<_>>(),
        vec![v]
    );
    apply(&mut state, &p1, at(100));
    let k = submit_with(&mut state, 1, 2, 3600, at(105), |_| {});
    let (p2, verdicts) = pass::run(&state, at(110));
    assert!(
        started(&p2, k).is_none(),
        "K (1 h) starts on n1 although {u} gets it at 160 s when {v}'s grace ends; {u}: {:?}",
        verdicts[&u]
    );
}

#[test]
fn sanity_array_throttle_and_singleton() {
    let mut state = cluster(4, 4);
    let mut sp = spec("alice", 1, 1);
    sp.time_limit = Some(TimeLimit::Seconds(3600));
    sp.array = Some(corral_state::slurm::array::ArraySpec {
        indices: vec![1, 2, 3],
        throttle: Some(1),
    });
    let first = submit(&mut state, sp, at(0));
    let mut s1 = spec("bob", 1, 1);
    s1.name = "single".into();
    s1.dependency = Some(DependencySpec {
        any_of: false,
        conditions: vec![],
        singleton: true,
    });
    let a = submit(&mut state, s1.clone(), at(0));
    let b = submit(&mut state, s1, at(0));
    let plan = corral_scheduler::plan(&state, at(10));
    let ids: Vec<JobId> = plan.allocations.iter().map(|a| a.job).collect();
    assert_eq!(
        ids.iter()
            .filter(|id| id.0 >= first.0 && id.0 < first.0 + 3)
            .count(),
        1,
        "{ids:?}"
    );
    assert_eq!(
        ids.iter().filter(|id| **id == a || **id == b).count(),
        1,
        "{ids:?}"
    );
}

/// Preemption must not depend on the backfill-reservation budget: with
/// `backfill_reservations = 0` (backfill holds disabled) urgent jobs never preempt.
#[test]
fn probe_preemption_disabled_by_zero_backfill_budget() {
    let mut state = cluster(1, 4);
    add_urgent_partition(&mut state);
    set_config(&mut state, |c| {
        c.preempt_exempt_seconds = 0;
        c.backfill_reservations = 0;
    });
    let v = submit_with(&mut state, 1, 4, 3600, at(0), |_| {});
    start(&mut state, v, at(0));
    let u = submit_with(&mut state, 1, 4, 3600, at(100), |s| {
        s.partition = Some("urgent".into())
    });
    let plan = corral_scheduler::plan(&state, at(100));
    assert_eq!(
        plan.preemptions.iter().map(|p| p.job).collect::<Vec<_>>(),
        vec![v],
        "{u} outranks {v} but does not preempt"
    );
}

/// A node whose agent the leader has not heard from lately takes no new job,
/// and takes one again once it answers.
#[test]
fn unresponsive_nodes_take_no_new_work() {
    let mut state = cluster(2, 8);
    let now = Timestamp(1_000_000);
    let job = submit_with(&mut state, 2, 8, 3600, now, |_| {});
    let names: Vec<String> = state.nodes().keys().cloned().collect();
    let quiet: BTreeSet<String> = [names[0].clone()].into();
    let plan = corral_scheduler::plan_avoiding(&state, now, &quiet);
    assert_eq!(
        started(&plan, job),
        None,
        "a two-node job started beside a silent node"
    );
    let plan = corral_scheduler::plan_avoiding(&state, now, &BTreeSet::new());
    assert_eq!(started(&plan, job), Some(names));
}
