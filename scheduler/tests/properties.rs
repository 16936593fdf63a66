//! Property tests of the scheduler: random clusters driven through many passes the
//! way the leader drives them (submit, plan, apply, jobs finish, nodes fail), with
//! every pass checked: plans are deterministic, apply without a single rejection
//! (no GPU over-allocated, gangs whole), never start an ineligible job, never let a
//! backfilled job delay a reservation, and respect priority among equal requests.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};

use corral_scheduler::pass::{self, Verdict};
use corral_scheduler::priority::PriorityContext;
use corral_state::command::{Command, Outcome};
use corral_state::job::JobState;
use corral_state::slurm::dependency::{DependencyCondition, DependencyKind, DependencySpec};
use corral_state::slurm::duration::TimeLimit;
use corral_state::testkit::*;
use corral_state::{ClusterState, JobId, Timestamp};
use proptest::prelude::*;

const NODES: u32 = 6;
const GPUS: u32 = 4;

#[derive(Debug, Clone)]
enum Step {
    Submit {
        user: u8,
        nodes: u32,
        gpus: u32,
        minutes: u16,
        exclusive: bool,
        urgent: bool,
        hold: bool,
        after: Option<u8>,
    },
    Schedule,
    Finish {
        pick: u16,
        code: i8,
    },
    Advance {
        minutes: u16,
    },
    NodeDown {
        node: u8,
    },
    Register {
        node: u8,
    },
    Release {
        pick: u16,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (0..2u8, 1..=3u32, 0..=GPUS, 1..600u16, prop::bool::weighted(0.1), prop::bool::weighted(0.15), prop::bool::weighted(0.1), prop::option::weighted(0.15, any::<u8>()))
            .prop_map(|(user, nodes, gpus, minutes, exclusive, urgent, hold, after)| Step::Submit { user, nodes, gpus, minutes, exclusive, urgent, hold, after }),
        4 => Just(Step::Schedule),
        3 => (any::<u16>(), -1..2i8).prop_map(|(pick, code)| Step::Finish { pick, code }),
        2 => (1..240u16).prop_map(|minutes| Step::Advance { minutes }),
        1 => any::<u8>().prop_map(|node| Step::NodeDown { node }),
        1 => any::<u8>().prop_map(|node| Step::Register { node }),
        1 => any::<u16>().prop_map(|pick| Step::Release { pick }),
    ]
}

/// The fixture cluster plus a higher-tier partition whose jobs may preempt, and
/// a short exempt time so preemption happens within a run.
fn base() -> ClusterState {
    let mut state = cluster(NODES, GPUS);
    add_urgent_partition(&mut state);
    let mut config = state.config().clone();
    config.preempt_exempt_seconds = 600;
    config.preempt_grace_seconds = 60;
    config.backfill_reservations = 3;
    ok(
        &mut state,
        Command::SetConfig {
            config,
            by: admin(),
        },
    );
    state
}

fn nth<'s>(ids: impl Iterator<Item = &'s corral_state::job::Job>, pick: u16) -> Option<JobId> {
    let ids: Vec<JobId> = ids.map(|j| j.id).collect();
    (!ids.is_empty()).then(|| ids[pick as usize % ids.len()])
}

/// Applies one step the way the leader and agents would.
fn drive(state: &mut ClusterState, step: &Step) {
    let now = Timestamp(state.clock().as_ms() + 1000);
    match step.clone() {
        Step::Submit {
            user: u,
            nodes,
            gpus,
            minutes,
            exclusive,
            urgent,
            hold,
            after,
        } => {
            let mut sp = spec(["alice", "bob"][u as usize % 2], nodes, gpus);
            sp.time_limit = Some(TimeLimit::Seconds(u64::from(minutes) * 60));
            sp.exclusive = exclusive;
            sp.hold = hold;
            if urgent {
                sp.partition = Some("urgent".into());
            }
            if let Some(after) = after.filter(|_| state.next_job_id().0 > 1) {
                let job_id = 1 + u64::from(after) % (state.next_job_id().0 - 1);
                let condition = DependencyCondition {
                    kind: DependencyKind::AfterOk,
                    job_id,
                    array_task: None,
                    delay_minutes: 0,
                };
                sp.dependency = Some(DependencySpec {
                    any_of: false,
                    conditions: vec![condition],
                    singleton: false,
                });
            }
            let by = user(&sp.user.clone());
            // Some random requests do not fit the partition: refusals are fine here.
            let _ = state.apply(Command::Submit {
                spec: sp,
                batch: script(),
                by,
                at: now,
                key: None,
            });
        }
        Step::Schedule => schedule_and_check(state, now),
        Step::Finish { pick, code } => {
            let Some(id) = nth(
                state.active_jobs().filter(|j| j.state == JobState::Running),
                pick,
            ) else {
                return;
            };
            let job = state.job(id).unwrap();
            let attempt = job.live_attempt().unwrap();
            let (number, nodes) = (
                attempt.number,
                attempt
                    .allocation
                    .iter()
                    .map(|a| a.node.clone())
                    .collect::<Vec<_>>(),
            );
            if code < 0 {
                ok(
                    state,
                    Command::Cancel {
                        target: corral_state::CancelTarget::Job(id),
                        by: admin(),
                        at: now,
                    },
                );
            } else {
                ok(
                    state,
                    Command::BatchExited {
                        job: id,
                        attempt: number,
                        node: nodes[0].clone(),
                        status: exit(i32::from(code)),
                        at: now,
                    },
                );
            }
            for node in &nodes[1..] {
                ok(
                    state,
                    Command::NodeReleased {
                        job: id,
                        attempt: number,
                        node: node.clone(),
                        at: now,
                    },
                );
            }
        }
        Step::Advance { minutes } => {
            ok(
                state,
                Command::Tick {
                    at: now.plus_secs(u64::from(minutes) * 60),
                },
            );
            // Agents confirm whatever the tick ended (time limits, preemptions).
            let ending: Vec<(JobId, u32, Vec<String>)> = state
                .active_jobs()
                .filter_map(|j| {
                    j.live_attempt().and_then(|a| {
                        a.ending
                            .as_ref()
                            .map(|e| (j.id, a.number, e.unreleased.iter().cloned().collect()))
                    })
                })
                .collect();
            for (job, attempt, nodes) in ending {
                for node in nodes {
                    ok(
                        state,
                        Command::NodeReleased {
                            job,
                            attempt,
                            node,
                            at: state.clock(),
                        },
                    );
                }
            }
        }
        Step::NodeDown { node } => {
            let name = format!("n{}", u32::from(node) % NODES + 1);
            ok(
                state,
                Command::NodeDown {
                    node: name,
                    reason: "lease expired".into(),
                    by: admin(),
                    at: now,
                },
            );
        }
        Step::Register { node } => {
            let name = format!("n{}", u32::from(node) % NODES + 1);
            let running: Vec<(JobId, u32)> = state.nodes()[&name]
                .allocations
                .iter()
                .map(|(j, u)| (*j, u.attempt))
                .collect();
            register(state, &name, GPUS, &running, now);
        }
        Step::Release { pick } => {
            let held = state
                .queued_jobs()
                .filter(|j| j.hold.is_some() || j.state == JobState::RequeueHold);
            if let Some(id) = nth(held, pick) {
                let owner = state.job(id).unwrap().spec.user.clone();
                ok(
                    state,
                    Command::Release {
                        job: id,
                        by: user(&owner),
                        at: now,
                    },
                );
            }
        }
    }
}

/// Runs a pass, checks it, applies it, and starts the new attempts on their nodes.
fn schedule_and_check(state: &mut ClusterState, now: Timestamp) {
    let plan = corral_scheduler::plan(state, now);
    // Deterministic: the same state and time give the same plan.
    assert_eq!(plan, corral_scheduler::plan(&state.clone(), now));
    let (with_verdicts, verdicts) = pass::run(state, now);
    assert_eq!(plan, with_verdicts, "recording verdicts changed the plan");
    // Nodes the leader has not heard from lately take no new work.
    let avoid: BTreeSet<String> = state.nodes().keys().step_by(2).cloned().collect();
    for allocation in &corral_scheduler::plan_avoiding(state, now, &avoid).allocations {
        for part in &allocation.nodes {
            assert!(
                !avoid.contains(&part.node),
                "job {} planned on {}, which does not respond",
                allocation.job,
                part.node
            );
        }
    }

    let order: BTreeMap<JobId, usize> = pass::queue_order(state, now, &PriorityContext::new(state))
        .iter()
        .enumerate()
        .map(|(i, (job, _))| (job.id, i))
        .collect();
    let mut seen_gpus = BTreeSet::new();
    for allocation in &plan.allocations {
        let job = state.job(allocation.job).unwrap();
        // Gangs whole: every node, every GPU, each node once.
        assert_eq!(
            allocation.nodes.len(),
            job.resources.nodes as usize,
            "partial gang for {}",
            job.id
        );
        let distinct: BTreeSet<&str> = allocation.nodes.iter().map(|n| n.node.as_str()).collect();
        assert_eq!(distinct.len(), allocation.nodes.len());
        for part in &allocation.nodes {
            // Exactly what it asks for; an exclusive job every free GPU too.
            assert!(
                job.resources.gpu_count_fits(part.gpus.len()),
                "{} GPUs for {}",
                part.gpus.len(),
                job.id
            );
            if job.resources.exclusive {
                let node = &state.nodes()[&part.node];
                let usable = node.gpus.iter().filter(|g| g.is_free_and_usable()).count();
                assert_eq!(
                    part.gpus.len(),
                    usable,
                    "exclusive {} on {}",
                    job.id,
                    part.node
                );
            }
            for gpu in &part.gpus {
                // No GPU twice, and none that is already held.
                assert!(
                    seen_gpus.insert((part.node.clone(), *gpu)),
                    "GPU {}:{gpu} planned twice",
                    part.node
                );
                assert!(
                    state.nodes()[&part.node].gpus[*gpu as usize].is_free_and_usable(),
                    "GPU {}:{gpu} is not free",
                    part.node
                );
            }
        }
        // Never an ineligible job.
        assert!(
            job.hold.is_none() && job.state == JobState::Pending,
            "started held or non-pending job {}",
            job.id
        );
        // Backfill never delays a reservation held for a job ahead of it.
        for reservation in &plan.reservations {
            if order[&reservation.job] >= order[&job.id] {
                continue;
            }
            let shares = allocation
                .nodes
                .iter()
                .any(|n| reservation.nodes.contains(&n.node));
            if shares {
                let TimeLimit::Seconds(limit) = job.time_limit else {
                    panic!("unlimited job {} backfilled onto held nodes", job.id)
                };
                assert!(
                    now.plus_secs(limit) <= reservation.start,
                    "job {} would delay the reservation of job {}",
                    job.id,
                    reservation.job
                );
            }
        }
    }
    // Priority among equal requests: a later job never starts while an earlier
    // identical one is blocked for resources.
    let blocked: Vec<&corral_state::job::Job> = verdicts
        .iter()
        .filter(|(_, v)| matches!(v, Verdict::Blocked { .. }))
        .filter_map(|(id, _)| state.job(*id))
        .collect();
    for allocation in &plan.allocations {
        let started = state.job(allocation.job).unwrap();
        for waiting in &blocked {
            let same = waiting.partition == started.partition
                && waiting.resources == started.resources
                && waiting.time_limit == started.time_limit;
            assert!(
                !(same && order[&waiting.id] < order[&started.id]),
                "job {} started ahead of identical job {}",
                started.id,
                waiting.id
            );
        }
    }

    if let Some(command) = plan.to_command(now) {
        match state.apply(command) {
            Ok(Outcome::Plan(outcome)) => assert!(
                outcome.rejected.is_empty(),
                "plan entries rejected: {:?}",
                outcome.rejected
            ),
            other => panic!("plan not applied: {other:?}"),
        }
    }
    check_invariants(state);
    for allocation in &plan.allocations {
        for part in &allocation.nodes {
            let started = Command::AttemptStarted {
                job: allocation.job,
                attempt: allocation.attempt,
                node: part.node.clone(),
                at: now,
            };
            ok(state, started);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, max_shrink_iters: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn every_pass_is_safe_and_fair(steps in prop::collection::vec(step(), 1..80)) {
        let mut state = base();
        for step in &steps {
            drive(&mut state, step);
        }
                let now = Timestamp(state.clock().as_ms() + 1000);
        schedule_and_check(&mut state, now);
    }
}
