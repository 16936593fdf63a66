//! Scenario tests: a job's path from submission through attempts, failures,
//! requeues and checkpoints, as the leader and agents drive it.

mod support;

use corral_state::command::{CancelTarget, Command, Outcome, PlannedPreemption};
use corral_state::job::{EndCause, ExitStatus, JobState, PendingReason};
use corral_state::node::NodeStateView;
use corral_state::slurm::signal::Signal;
use corral_state::{Actor, Rejection, Role};
use support::*;

#[test]
fn a_job_runs_to_completion_and_is_charged() {
    let mut s = cluster(2, 8);
    let id = submit(&mut s, spec("alice", 2, 4), at(10));
    assert_eq!(s.job(id).unwrap().state, JobState::Pending);
    let nodes = start(&mut s, id, at(20));
    assert_eq!(s.job(id).unwrap().state, JobState::Running);
    ok(
        &mut s,
        Command::BatchExited {
            job: id,
            attempt: 1,
            node: nodes[0].clone(),
            status: exit(0),
            at: at(120),
        },
    );
    // The batch host released itself; the second node must confirm.
    assert_eq!(s.job(id).unwrap().state, JobState::Completing);
    ok(
        &mut s,
        Command::NodeReleased {
            job: id,
            attempt: 1,
            node: nodes[1].clone(),
            at: at(121),
        },
    );
    let job = s.job(id).unwrap();
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.ended_at, Some(at(120)));
    // 8 GPUs for 100 s.
    assert_eq!(s.accounting().by_user["alice"].gpu_ms, 8 * 100_000);
    assert_eq!(s.accounting().by_account["ml"].gpu_ms, 8 * 100_000);
    assert!(
        s.nodes()
            .values()
            .all(|n| n.state_view() == NodeStateView::Idle)
    );
    check_invariants(&s);
}

#[test]
fn non_zero_exit_fails_the_job() {
    let mut s = cluster(1, 8);
    let id = submit(&mut s, spec("alice", 1, 1), at(1));
    let nodes = start(&mut s, id, at(2));
    ok(
        &mut s,
        Command::BatchExited {
            job: id,
            attempt: 1,
            node: nodes[0].clone(),
            status: exit(3),
            at: at(5),
        },
    );
    assert_eq!(s.job(id).unwrap().state, JobState::Failed);
    check_invariants(&s);
}

#[test]
fn node_failure_requeues_the_gang_as_a_new_attempt_that_resumes_from_its_checkpoint() {
    let mut s = cluster(3, 8);
    let id = submit(&mut s, spec("alice", 2, 8), at(0));
    let nodes = start(&mut s, id, at(10));
    ok(
        &mut s,
        Command::ReportCheckpoint {
            job: id,
            attempt: 1,
            node: "n1".into(),
            step: 500,
            path: "/ckpt/500".into(),
            at: at(50),
        },
    );
    let down = ok(
        &mut s,
        Command::NodeDown {
            node: nodes[1].clone(),
            reason: "lease expired".into(),
            by: admin(),
            at: at(60),
        },
    );
    assert_eq!(down, Outcome::Jobs(vec![id]));
    // The surviving rank must be killed and confirm before the GPUs are reused.
    let job = s.job(id).unwrap();
    assert_eq!(job.state, JobState::Completing);
    ok(
        &mut s,
        Command::NodeReleased {
            job: id,
            attempt: 1,
            node: nodes[0].clone(),
            at: at(61),
        },
    );
    let job = s.job(id).unwrap();
    assert_eq!(job.state, JobState::Pending);
    assert_eq!(job.requeue_count, 1);
    let first = &job.attempts[0];
    assert_eq!(first.end.as_ref().unwrap().state, JobState::Requeued);
    assert!(matches!(
        first.end.as_ref().unwrap().cause,
        EndCause::NodeFailure { .. }
    ));
    assert_eq!(job.last_checkpoint.as_ref().unwrap().path, "/ckpt/500");
    // The second attempt avoids the down node.
    let nodes2 = start(&mut s, id, at(70));
    assert!(!nodes2.contains(&nodes[1]));
    assert_eq!(s.job(id).unwrap().current_attempt().unwrap().number, 2);
    // Reports from the first attempt are now stale.
    let stale = s.apply(Command::BatchExited {
        job: id,
        attempt: 1,
        node: nodes[0].clone(),
        status: exit(0),
        at: at(80),
    });
    assert!(
        matches!(
            stale,
            Err(Rejection::StaleAttempt {
                got: 1,
                live: Some(2),
                ..
            })
        ),
        "{stale:?}"
    );
    check_invariants(&s);
}

#[test]
fn a_job_that_may_not_be_requeued_ends_in_node_fail() {
    let mut s = cluster(1, 8);
    let mut sp = spec("alice", 1, 8);
    sp.requeue = false;
    let id = submit(&mut s, sp, at(0));
    start(&mut s, id, at(1));
    ok(
        &mut s,
        Command::NodeDown {
            node: "n1".into(),
            reason: "lease expired".into(),
            by: admin(),
            at: at(9),
        },
    );
    assert_eq!(s.job(id).unwrap().state, JobState::NodeFail);
    check_invariants(&s);
}

#[test]
fn an_xid_error_drains_the_gpu_and_requeues_the_job() {
    let mut s = cluster(1, 8);
    let id = submit(&mut s, spec("alice", 1, 8), at(0));
    start(&mut s, id, at(1));
    let out = ok(
        &mut s,
        Command::GpuFailed {
            node: "n1".into(),
            gpu: 3,
            xid: Some(79),
            reason: "GPU has fallen off the bus".into(),
            at: at(30),
        },
    );
    assert_eq!(out, Outcome::Jobs(vec![id]));
    ok(
        &mut s,
        Command::NodeReleased {
            job: id,
            attempt: 1,
            node: "n1".into(),
            at: at(31),
        },
    );
    let job = s.job(id).unwrap();
    assert_eq!(job.state, JobState::Pending);
    assert!(matches!(
        job.attempts[0].end.as_ref().unwrap().cause,
        EndCause::GpuFailure {
            xid: Some(79),
            gpu: 3,
            ..
        }
    ));
    let gpu = &s.nodes()["n1"].gpus[3];
    assert!(gpu.drain.as_ref().unwrap().reason.contains("XID 79"));
    // Only 7 healthy GPUs remain: the 8-GPU job no longer fits, a 7-GPU one does.
    assert!(first_fit(&s, id).is_none());
    let small = submit(&mut s, spec("bob", 1, 7), at(40));
    start(&mut s, small, at(41));
    check_invariants(&s);
}

fn lost(job: corral_state::JobId, attempt: u32, node: &str, at_s: u64) -> Command {
    Command::AttemptLost {
        job,
        attempt,
        node: node.into(),
        reason: "the node's agent restarted".into(),
        at: at(at_s),
    }
}

#[test]
fn an_attempt_its_agent_lost_fails_over_and_is_requeued_once() {
    let mut s = cluster(2, 8);
    let id = submit(&mut s, spec("alice", 2, 8), at(0));
    let nodes = start(&mut s, id, at(1));
    // A stale or foreign report changes nothing.
    assert!(s.apply(lost(id, 2, &nodes[0], 5)).is_err());
    assert!(s.apply(lost(id, 1, "n9", 5)).is_err());
    ok(&mut s, lost(id, 1, &nodes[1], 5));
    let job = s.job(id).unwrap();
    assert_eq!(job.state, JobState::Completing);
    assert!(matches!(
        &job.attempts[0].ending.as_ref().unwrap().cause,
        EndCause::NodeFailure { node, reason } if node == &nodes[1] && reason.contains("restarted")
    ));
    assert!(!s.nodes()[&nodes[1]].allocations.contains_key(&id));
    // The other node's agent loses it too (it was killed there): requeued once.
    ok(&mut s, lost(id, 1, &nodes[0], 6));
    let job = s.job(id).unwrap();
    assert_eq!(job.state, JobState::Pending);
    assert_eq!(job.requeue_count, 1);
    assert!(s.apply(lost(id, 1, &nodes[0], 7)).is_err(), "lost twice");
    check_invariants(&s);
}

/// A rank's agent dies as the job starts; `srun` fails and the batch script
/// exits 143 before the node is declared down. The node's loss, not the job,
/// ended the attempt: it is requeued (Slurm: NODE_FAIL, requeued). A script
/// that succeeded, or a node that had confirmed its processes gone, keeps the
/// script's own verdict.
#[test]
fn a_failed_script_whose_unreleased_node_is_then_lost_is_requeued_as_a_node_failure() {
    let node_down = |node: &str, at_s| Command::NodeDown {
        node: node.into(),
        reason: "no heartbeat from its agent".into(),
        by: admin(),
        at: at(at_s),
    };
    let batch_exit = |id, node: &str, code, at_s| Command::BatchExited {
        job: id,
        attempt: 1,
        node: node.into(),
        status: exit(code),
        at: at(at_s),
    };
    // The script failed while the second node was silent: requeued.
    let mut s = cluster(2, 8);
    let id = submit(&mut s, spec("alice", 2, 8), at(0));
    let nodes = start(&mut s, id, at(1));
    ok(&mut s, batch_exit(id, &nodes[0], 143, 6));
    assert_eq!(s.job(id).unwrap().state, JobState::Completing);
    ok(&mut s, node_down(&nodes[1], 16));
    let job = s.job(id).unwrap();
    assert_eq!(job.state, JobState::Pending);
    assert_eq!(job.requeue_count, 1);
    assert!(matches!(
        &job.attempts[0].end.as_ref().unwrap().cause,
        EndCause::NodeFailure { node, .. } if node == &nodes[1]
    ));
    check_invariants(&s);
    // The same through the restarted agent's report that it lost the rank.
    let mut s = cluster(2, 8);
    let id = submit(&mut s, spec("alice", 2, 8), at(0));
    let nodes = start(&mut s, id, at(1));
    ok(&mut s, batch_exit(id, &nodes[0], 143, 6));
    ok(&mut s, lost(id, 1, &nodes[1], 20));
    assert_eq!(s.job(id).unwrap().state, JobState::Pending);
    // A script that succeeded keeps its success.
    let mut s = cluster(2, 8);
    let id = submit(&mut s, spec("alice", 2, 8), at(0));
    let nodes = start(&mut s, id, at(1));
    ok(&mut s, batch_exit(id, &nodes[0], 0, 6));
    ok(&mut s, node_down(&nodes[1], 16));
    assert_eq!(s.job(id).unwrap().state, JobState::Completed);
    // A node that had released before it was lost is not to blame.
    let mut s = cluster(3, 8);
    let id = submit(&mut s, spec("alice", 3, 8), at(0));
    let nodes = start(&mut s, id, at(1));
    ok(&mut s, batch_exit(id, &nodes[0], 1, 6));
    ok(
        &mut s,
        Command::NodeReleased {
            job: id,
            attempt: 1,
            node: nodes[1].clone(),
            at: at(7),
        },
    );
    ok(&mut s, node_down(&nodes[1], 16));
    ok(
        &mut s,
        Command::NodeReleased {
            job: id,
            attempt: 1,
            node: nodes[2].clone(),
            at: at(17),
        },
    );
    assert_eq!(s.job(id).unwrap().state, JobState::Failed);
    check_invariants(&s);
}

fn application_xid(job: corral_state::JobId, attempt: u32, node: &str, gpu: u32) -> Command {
    Command::ApplicationXid {
        job,
        attempt,
        node: node.into(),
        gpu,
        xid: 31,
        at: at(30),
    }
}

#[test]
fn an_application_xid_requeues_the_gang_and_keeps_the_gpu_in_service() {
    let mut s = cluster(2, 8);
    let id = submit(&mut s, spec("alice", 2, 8), at(0));
    let nodes = start(&mut s, id, at(1));
    let out = ok(&mut s, application_xid(id, 1, &nodes[1], 2));
    assert_eq!(out, Outcome::Jobs(vec![id]));
    assert_eq!(s.job(id).unwrap().state, JobState::Completing);
    // The batch host reports the killed script; the other node confirms the kill.
    ok(
        &mut s,
        Command::BatchExited {
            job: id,
            attempt: 1,
            node: nodes[0].clone(),
            status: corral_state::job::ExitStatus {
                code: 0,
                signal: Some(Signal::KILL),
            },
            at: at(31),
        },
    );
    ok(
        &mut s,
        Command::NodeReleased {
            job: id,
            attempt: 1,
            node: nodes[1].clone(),
            at: at(32),
        },
    );
    let job = s.job(id).unwrap();
    assert_eq!(job.state, JobState::Pending);
    assert_eq!(job.requeue_count, 1);
    let end = job.attempts[0].end.as_ref().unwrap();
    assert_eq!(end.state, JobState::Requeued);
    assert_eq!(
        end.cause,
        EndCause::ApplicationXid {
            node: nodes[1].clone(),
            gpu: 2,
            xid: 31
        }
    );
    // The GPU stays in service: the whole gang fits again, on the same GPUs.
    let gpu = &s.nodes()[&nodes[1]].gpus[2];
    assert!(gpu.drain.is_none(), "{gpu:?}");
    assert_eq!(start(&mut s, id, at(40)), nodes);
    assert_eq!(s.job(id).unwrap().attempts[1].number, 2);
    check_invariants(&s);
}

#[test]
fn an_application_xid_fails_a_job_that_may_not_be_requeued() {
    let mut s = cluster(1, 8);
    let mut request = spec("alice", 1, 8);
    request.requeue = false;
    let id = submit(&mut s, request, at(0));
    start(&mut s, id, at(1));
    ok(&mut s, application_xid(id, 1, "n1", 5));
    ok(
        &mut s,
        Command::NodeReleased {
            job: id,
            attempt: 1,
            node: "n1".into(),
            at: at(31),
        },
    );
    let job = s.job(id).unwrap();
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.requeue_count, 0);
    assert!(matches!(
        job.attempts[0].end.as_ref().unwrap().cause,
        EndCause::ApplicationXid { gpu: 5, .. }
    ));
    check_invariants(&s);
}

#[test]
fn an_application_xid_must_name_the_running_attempt_its_node_and_gpu() {
    let mut s = cluster(2, 8);
    let id = submit(&mut s, spec("alice", 1, 4), at(0));
    let nodes = start(&mut s, id, at(1));
    let other = if nodes[0] == "n1" { "n2" } else { "n1" };
    let before = s.clone();
    let refusals = [
        (application_xid(id, 2, &nodes[0], 0), "a newer attempt"),
        (application_xid(id, 0, &nodes[0], 0), "an older attempt"),
        (application_xid(id, 1, other, 0), "another node"),
        (application_xid(id, 1, &nodes[0], 6), "an unallocated GPU"),
        (
            application_xid(corral_state::JobId(99), 1, &nodes[0], 0),
            "an unknown job",
        ),
    ];
    for (command, what) in refusals {
        let refused = s.apply(command);
        assert!(refused.is_err(), "{what} was accepted");
        assert_eq!(s, before, "refusing {what} changed the state");
    }
    assert!(matches!(
        s.apply(application_xid(id, 0, &nodes[0], 0)),
        Err(Rejection::StaleAttempt { .. })
    ));
    assert!(matches!(
        s.apply(application_xid(id, 1, other, 0)),
        Err(Rejection::NotInAllocation { .. })
    ));
    // An attempt already ending (cancelled) is not ended again.
    ok(
        &mut s,
        Command::Cancel {
            target: CancelTarget::Job(id),
            by: user("alice"),
            at: at(20),
        },
    );
    assert!(matches!(
        s.apply(application_xid(id, 1, &nodes[0], 0)),
        Err(Rejection::WrongJobState { .. })
    ));
    ok(
        &mut s,
        Command::NodeReleased {
            job: id,
            attempt: 1,
            node: nodes[0].clone(),
            at: at(31),
        },
    );
    // Once the attempt is over, a late report for it is stale.
    assert!(matches!(
        s.apply(application_xid(id, 1, &nodes[0], 0)),
        Err(Rejection::StaleAttempt { .. })
    ));
    assert_eq!(s.job(id).unwrap().state, JobState::Cancelled);
}

#[test]
fn cancel_pending_and_running_jobs() {
    let mut s = cluster(1, 8);
    let pending = submit(&mut s, spec("alice", 1, 8), at(0));
    let running = submit(&mut s, spec("alice", 1, 8), at(0));
    // Start the second job first so the first stays pending.
    let planned = first_fit(&s, running).unwrap();
    ok(
        &mut s,
        Command::ApplyPlan {
            allocations: vec![planned],
            preemptions: vec![],
            reasons: vec![(pending, PendingReason::Resources)],
            at: at(1),
        },
    );
    assert_eq!(s.job(pending).unwrap().reason, PendingReason::Resources);

    let denied = s.apply(Command::Cancel {
        target: CancelTarget::Job(running),
        by: user("bob"),
        at: at(2),
    });
    assert!(
        matches!(denied, Err(Rejection::PermissionDenied(_))),
        "{denied:?}"
    );

    ok(
        &mut s,
        Command::Cancel {
            target: CancelTarget::User("alice".into()),
            by: user("alice"),
            at: at(3),
        },
    );
    assert_eq!(s.job(pending).unwrap().state, JobState::Cancelled);
    assert_eq!(s.job(running).unwrap().state, JobState::Completing);
    // The script dies of the kill; its exit confirms the batch host.
    ok(
        &mut s,
        Command::BatchExited {
            job: running,
            attempt: 1,
            node: "n1".into(),
            status: corral_state::job::ExitStatus {
                code: 0,
                signal: Some(Signal::TERM),
            },
            at: at(4),
        },
    );
    assert_eq!(s.job(running).unwrap().state, JobState::Cancelled);
    let again = s.apply(Command::Cancel {
        target: CancelTarget::Job(running),
        by: user("alice"),
        at: at(5),
    });
    assert!(
        matches!(again, Err(Rejection::WrongJobState { .. })),
        "{again:?}"
    );
    check_invariants(&s);
}

#[test]
fn time_limit_ends_the_job_on_tick() {
    let mut s = cluster(1, 8);
    let mut sp = spec("alice", 1, 1);
    sp.time_limit = Some(corral_state::slurm::duration::TimeLimit::Seconds(60));
    let id = submit(&mut s, sp, at(0));
    start(&mut s, id, at(10));
    ok(&mut s, Command::Tick { at: at(69) });
    assert_eq!(s.job(id).unwrap().state, JobState::Running);
    ok(&mut s, Command::Tick { at: at(70) });
    assert_eq!(s.job(id).unwrap().state, JobState::Completing);
    ok(
        &mut s,
        Command::NodeReleased {
            job: id,
            attempt: 1,
            node: "n1".into(),
            at: at(75),
        },
    );
    assert_eq!(s.job(id).unwrap().state, JobState::Timeout);
    // Charged for exactly the 60 s it was allowed, not the cleanup.
    assert_eq!(s.accounting().by_user["alice"].gpu_ms, 60_000);
    check_invariants(&s);
}

fn plan_preemption(
    s: &mut corral_state::ClusterState,
    preemption: PlannedPreemption,
    when: corral_state::Timestamp,
) -> corral_state::PlanOutcome {
    match ok(
        s,
        Command::ApplyPlan {
            allocations: vec![],
            preemptions: vec![preemption],
            reasons: vec![],
            at: when,
        },
    ) {
        Outcome::Plan(p) => p,
        other => panic!("{other:?}"),
    }
}

#[test]
fn preemption_signals_waits_the_grace_then_requeues() {
    let mut s = cluster(1, 8);
    add_urgent_partition(&mut s);
    let victim = submit(&mut s, spec("alice", 1, 8), at(0));
    let mut urgent_spec = spec("bob", 1, 8);
    urgent_spec.partition = Some("urgent".into());
    let urgent = submit(&mut s, urgent_spec, at(5));
    start(&mut s, victim, at(1));
    let preemption = PlannedPreemption {
        job: victim,
        attempt: 1,
        signal: Signal::USR1,
        grace_seconds: 120,
        for_job: urgent,
    };

    // Inside the exempt time after its start the victim may not be preempted.
    let exempt = s.config().preempt_exempt_seconds;
    let early = plan_preemption(&mut s, preemption.clone(), at(10));
    assert!(
        early.rejected[0].1.contains("preempt_exempt_seconds"),
        "{early:?}"
    );
    let t0 = exempt + 10;
    let p = plan_preemption(&mut s, preemption.clone(), at(t0));
    assert_eq!(p.preempting, vec![victim], "{p:?}");
    // Still running during the grace period, and a checkpoint written now counts.
    ok(
        &mut s,
        Command::ReportCheckpoint {
            job: victim,
            attempt: 1,
            node: "n1".into(),
            step: 7,
            path: "/ckpt/7".into(),
            at: at(t0 + 60),
        },
    );
    ok(&mut s, Command::Tick { at: at(t0 + 119) });
    assert_eq!(s.job(victim).unwrap().state, JobState::Running);
    ok(&mut s, Command::Tick { at: at(t0 + 120) });
    assert_eq!(s.job(victim).unwrap().state, JobState::Completing);
    ok(
        &mut s,
        Command::NodeReleased {
            job: victim,
            attempt: 1,
            node: "n1".into(),
            at: at(t0 + 121),
        },
    );
    let job = s.job(victim).unwrap();
    assert_eq!(job.state, JobState::Pending);
    assert_eq!(job.last_checkpoint.as_ref().unwrap().step, 7);
    start(&mut s, urgent, at(t0 + 122));
    // A preemption of an attempt that is no longer live is rejected in the plan.
    assert_eq!(
        plan_preemption(&mut s, preemption, at(t0 + 130))
            .rejected
            .len(),
        1
    );
    check_invariants(&s);
}

/// However a victim's batch script ends while its preemption notice runs (it
/// exits on the notice, fails, or dies of the signal), the attempt ends as
/// preempted: requeued where the job and the mode allow it, PREEMPTED where
/// not; never FAILED, which would charge it to the job. A job that cannot be
/// requeued and exits 0 in the grace has finished: COMPLETED.
#[test]
fn a_script_that_ends_during_the_grace_ends_preempted_however_it_ends() {
    let killed_by = |signal: u8| ExitStatus {
        code: 128 + i32::from(signal),
        signal: Some(Signal(signal)),
    };
    let endings = [exit(0), exit(1), killed_by(15), killed_by(9)];
    for (requeue, status) in [true, false]
        .into_iter()
        .flat_map(|r| endings.iter().map(move |e| (r, *e)))
    {
        let mut s = cluster(1, 8);
        add_urgent_partition(&mut s);
        let mut victim_spec = spec("alice", 1, 8);
        victim_spec.requeue = requeue;
        let victim = submit(&mut s, victim_spec, at(0));
        let mut urgent_spec = spec("bob", 1, 8);
        urgent_spec.partition = Some("urgent".into());
        let urgent = submit(&mut s, urgent_spec, at(1));
        start(&mut s, victim, at(2));
        ok(
            &mut s,
            Command::ReportCheckpoint {
                job: victim,
                attempt: 1,
                node: "n1".into(),
                step: 15,
                path: "/ckpt/15".into(),
                at: at(100),
            },
        );
        let t0 = s.config().preempt_exempt_seconds + 10;
        let preemption = PlannedPreemption {
            job: victim,
            attempt: 1,
            signal: Signal::TERM,
            grace_seconds: 120,
            for_job: urgent,
        };
        assert_eq!(
            plan_preemption(&mut s, preemption, at(t0)).preempting,
            vec![victim]
        );
        ok(
            &mut s,
            Command::BatchExited {
                job: victim,
                attempt: 1,
                node: "n1".into(),
                status,
                at: at(t0 + 3),
            },
        );
        let job = s.job(victim).unwrap();
        let end = job.attempts[0].end.as_ref().unwrap();
        if !requeue && status.is_success() {
            // It cannot go back to the queue and finished its work: done.
            assert_eq!(job.state, JobState::Completed, "{status:?}");
            assert_eq!(end.cause, EndCause::Exited(status));
            continue;
        }
        assert_eq!(
            end.cause,
            EndCause::Preempted { for_job: urgent },
            "{status:?}"
        );
        assert_eq!(job.attempts[0].batch_exit, Some(status));
        if requeue {
            assert_eq!(job.state, JobState::Pending, "{status:?}");
            assert_eq!(job.requeue_count, 1);
            assert_eq!(end.state, JobState::Requeued);
            assert_eq!(job.last_checkpoint.as_ref().unwrap().step, 15);
        } else {
            assert_eq!(job.state, JobState::Preempted, "{status:?}");
        }
        check_invariants(&s);
    }
}

#[test]
fn the_plan_applier_refuses_preemptions_policy_forbids() {
    let mut s = cluster(2, 8);
    add_urgent_partition(&mut s);
    let victim = submit(&mut s, spec("alice", 1, 8), at(0));
    let peer = submit(&mut s, spec("bob", 1, 8), at(0));
    let mut protected_spec = spec("alice", 1, 8);
    protected_spec.partition = Some("urgent".into());
    let protected = submit(&mut s, protected_spec, at(0));
    start(&mut s, victim, at(1));
    start(&mut s, protected, at(1));
    let late = at(10_000);
    let preempt = |job, for_job| PlannedPreemption {
        job,
        attempt: 1,
        signal: Signal::USR1,
        grace_seconds: 0,
        for_job,
    };
    let why =
        |p: corral_state::PlanOutcome| p.rejected.first().map(|r| r.1.clone()).unwrap_or_default();
    // Same tier, no QOS relation: a peer may not preempt.
    assert!(
        why(plan_preemption(&mut s, preempt(victim, peer), late))
            .contains("neither has a higher partition tier")
    );
    // Nobody preempts itself.
    assert!(why(plan_preemption(&mut s, preempt(victim, victim), late)).contains("itself"));
    // A partition with preemption off is never preempted, even by a higher tier job.
    let mut urgent2 = spec("bob", 1, 8);
    urgent2.partition = Some("urgent".into());
    let urgent2 = submit(&mut s, urgent2, at(2));
    assert!(
        why(plan_preemption(&mut s, preempt(protected, urgent2), late))
            .contains("do not allow preemption")
    );
    assert_eq!(s.job(victim).unwrap().state, JobState::Running);
    assert_eq!(s.job(protected).unwrap().state, JobState::Running);
    check_invariants(&s);
}

#[test]
fn too_many_requeues_hold_the_job_until_released() {
    let mut s = cluster(1, 8);
    let id = submit(&mut s, spec("alice", 1, 1), at(0));
    let max = s.config().max_requeue;
    for round in 0..=max {
        let t = 10 * u64::from(round) + 1;
        start(&mut s, id, at(t));
        ok(
            &mut s,
            Command::Requeue {
                job: id,
                by: user("alice"),
                at: at(t + 1),
            },
        );
        ok(
            &mut s,
            Command::NodeReleased {
                job: id,
                attempt: round + 1,
                node: "n1".into(),
                at: at(t + 2),
            },
        );
    }
    let job = s.job(id).unwrap();
    assert_eq!(job.state, JobState::RequeueHold);
    assert_eq!(job.reason, PendingReason::JobHoldMaxRequeue);
    assert!(first_fit(&s, id).is_some_and(|p| {
        let mut probe = s.clone();
        let out = probe.apply(Command::ApplyPlan {
            allocations: vec![p],
            preemptions: vec![],
            reasons: vec![],
            at: at(500),
        });
        matches!(out, Ok(Outcome::Plan(ref p)) if p.started.is_empty())
    }));
    ok(
        &mut s,
        Command::Release {
            job: id,
            by: user("alice"),
            at: at(600),
        },
    );
    start(&mut s, id, at(601));
    check_invariants(&s);
}

#[test]
fn an_agent_restart_that_lost_a_rank_fails_the_job_over() {
    let mut s = cluster(2, 8);
    let id = submit(&mut s, spec("alice", 2, 8), at(0));
    let nodes = start(&mut s, id, at(1));
    // n2's agent restarts and no longer runs the attempt.
    let out = register(&mut s, &nodes[1], 8, &[], at(30));
    assert_eq!(out, Outcome::Jobs(vec![id]));
    assert_eq!(s.job(id).unwrap().state, JobState::Completing);
    // n1's agent re-registers still running it: nothing changes for n1.
    let out = register(&mut s, &nodes[0], 8, &[(id, 1)], at(31));
    assert_eq!(out, Outcome::Jobs(vec![]));
    check_invariants(&s);
}

#[test]
fn hold_and_release() {
    let mut s = cluster(1, 8);
    let id = submit(&mut s, spec("alice", 1, 1), at(0));
    ok(
        &mut s,
        Command::Hold {
            job: id,
            by: Actor {
                user: "ops".into(),
                role: Role::Operator,
            },
        },
    );
    assert_eq!(s.job(id).unwrap().reason, PendingReason::JobHeldAdmin);
    let denied = s.apply(Command::Release {
        job: id,
        by: user("alice"),
        at: at(1),
    });
    assert!(matches!(denied, Err(Rejection::PermissionDenied(_))));
    ok(
        &mut s,
        Command::Release {
            job: id,
            by: Actor {
                user: "ops".into(),
                role: Role::Operator,
            },
            at: at(2),
        },
    );
    assert_eq!(s.job(id).unwrap().eligible_since, at(2));
    start(&mut s, id, at(3));
}

#[test]
fn drained_node_shows_draining_then_drained() {
    let mut s = cluster(1, 8);
    let id = submit(&mut s, spec("alice", 1, 1), at(0));
    start(&mut s, id, at(1));
    ok(
        &mut s,
        Command::DrainNode {
            node: "n1".into(),
            reason: "maintenance".into(),
            by: admin(),
            at: at(2),
        },
    );
    assert_eq!(s.nodes()["n1"].state_view(), NodeStateView::Draining);
    ok(
        &mut s,
        Command::BatchExited {
            job: id,
            attempt: 1,
            node: "n1".into(),
            status: exit(0),
            at: at(3),
        },
    );
    assert_eq!(s.nodes()["n1"].state_view(), NodeStateView::Drained);
    ok(
        &mut s,
        Command::ResumeNode {
            node: "n1".into(),
            by: admin(),
        },
    );
    assert_eq!(s.nodes()["n1"].state_view(), NodeStateView::Idle);
}

#[test]
fn checkpoints_must_move_forward_and_come_from_the_newest_attempt() {
    let mut s = cluster(1, 8);
    let id = submit(&mut s, spec("alice", 1, 1), at(0));
    start(&mut s, id, at(1));
    ok(
        &mut s,
        Command::ReportCheckpoint {
            job: id,
            attempt: 1,
            node: "n1".into(),
            step: 10,
            path: "/c/10".into(),
            at: at(2),
        },
    );
    let older = s.apply(Command::ReportCheckpoint {
        job: id,
        attempt: 1,
        node: "n1".into(),
        step: 9,
        path: "/c/9".into(),
        at: at(3),
    });
    assert!(matches!(older, Err(Rejection::InvalidRequest(_))));
    let future = s.apply(Command::ReportCheckpoint {
        job: id,
        attempt: 2,
        node: "n1".into(),
        step: 11,
        path: "/c/11".into(),
        at: at(3),
    });
    assert!(matches!(future, Err(Rejection::StaleAttempt { .. })));
}

#[test]
fn gpu_types_register_whatever_their_case_but_another_model_drains() {
    let mut s = cluster(2, 8);
    let found = |model: &str| Command::RegisterNode {
        node: "n1".into(),
        cpus: 64,
        memory_mb: 512 * 1024,
        gpus: (0..8).map(|i| (i, model.to_string())).collect(),
        running: Vec::new(),
        agent_version: "test".into(),
        boot_id: format!("boot-{model}"),
        step_address: None,
        at: at(5),
    };
    ok(&mut s, found("H100"));
    assert_eq!(s.nodes()["n1"].drain, None, "H100 is the configured h100");
    ok(&mut s, found("a100"));
    let drain = s.nodes()["n1"]
        .drain
        .clone()
        .expect("an A100 is not an H100");
    assert!(
        drain.reason.contains("GPU 0 is a a100, configured as h100"),
        "{drain:?}"
    );
}

#[test]
fn an_exclusive_job_may_hold_every_gpu_of_its_node_and_is_charged_for_them() {
    let mut s = cluster(1, 8);
    let mut exclusive = spec("alice", 1, 2);
    exclusive.exclusive = true;
    let id = submit(&mut s, exclusive, at(1));
    let mut planned = first_fit(&s, id).unwrap();
    // Fewer GPUs than asked for: refused.
    planned.nodes[0].gpus = vec![0];
    let short = planned.clone();
    planned.nodes[0].gpus = (0..8).collect();
    planned.nodes[0].cpus = s.nodes()["n1"].cpus;
    for (plan, started) in [(short, false), (planned, true)] {
        let Outcome::Plan(outcome) = ok(
            &mut s,
            Command::ApplyPlan {
                allocations: vec![plan],
                preemptions: vec![],
                reasons: vec![],
                at: at(2),
            },
        ) else {
            panic!("not a plan outcome");
        };
        assert_eq!(
            outcome.started.contains(&id),
            started,
            "{:?}",
            outcome.rejected
        );
    }
    check_invariants(&s);
    let node = &s.nodes()["n1"];
    assert!(node.gpus.iter().all(|g| g.allocated_to.is_some()));
    ok(
        &mut s,
        Command::AttemptStarted {
            job: id,
            attempt: 1,
            node: "n1".into(),
            at: at(2),
        },
    );
    ok(
        &mut s,
        Command::BatchExited {
            job: id,
            attempt: 1,
            node: "n1".into(),
            status: exit(0),
            at: at(12),
        },
    );
    // All 8 GPUs for 10 s, as Slurm charges an exclusive job for its node.
    assert_eq!(s.accounting().by_user["alice"].gpu_ms, 8 * 10_000);
    check_invariants(&s);
}
