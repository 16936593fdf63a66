//! Regressions from the first review of `apply`: each test failed on the code as it
//! was, and pins the behaviour chosen instead.

mod support;

use corral_state::command::{CancelTarget, Command, Outcome, PlannedPreemption};
use corral_state::job::{JobState, PendingReason};
use corral_state::partition::PreemptMode;
use corral_state::slurm::array::ArraySpec;
use corral_state::slurm::duration::TimeLimit;
use corral_state::slurm::gres::GpuRequest;
use corral_state::slurm::signal::Signal;
use corral_state::{Actor, Role, Timestamp};
use support::*;

fn operator() -> Actor {
    Actor {
        user: "ops".into(),
        role: Role::Operator,
    }
}

/// P1: a user overwrites an operator's hold with their own and then releases it.
#[test]
fn p1_user_cannot_escape_admin_hold() {
    let mut s = cluster(1, 8);
    let id = submit(&mut s, spec("alice", 1, 1), at(1));
    ok(
        &mut s,
        Command::Hold {
            job: id,
            by: operator(),
        },
    );
    let r1 = s.apply(Command::Hold {
        job: id,
        by: user("alice"),
    });
    let r2 = s.apply(Command::Release {
        job: id,
        by: user("alice"),
        at: at(3),
    });
    assert!(
        r1.is_err() || r2.is_err(),
        "user released an operator hold: hold={r1:?} release={r2:?}, job hold now {:?}",
        s.job(id).unwrap().hold
    );
}

/// P2: the plan applier preempts a job whose partition says it is never preempted,
/// and the job ends PREEMPTED (terminal) although it asked to be requeued.
#[test]
fn p2_preempting_a_non_preemptible_job_is_refused() {
    let mut s = cluster(1, 8);
    let mut part = s.partitions()["gpu"].clone();
    part.preempt_mode = PreemptMode::Off;
    ok(
        &mut s,
        Command::SetPartition {
            partition: part,
            by: admin(),
        },
    );
    let victim = submit(&mut s, spec("alice", 1, 8), at(1));
    start(&mut s, victim, at(2));
    let out = ok(
        &mut s,
        Command::ApplyPlan {
            allocations: vec![],
            preemptions: vec![PlannedPreemption {
                job: victim,
                attempt: 1,
                signal: Signal::USR1,
                grace_seconds: 0,
                for_job: victim, // even "for itself"
            }],
            reasons: vec![],
            at: at(3),
        },
    );
    assert!(
        matches!(&out, Outcome::Plan(p) if p.rejected.len() == 1),
        "{out:?}"
    );
    assert_eq!(
        s.job(victim).unwrap().state,
        JobState::Running,
        "plan outcome {out:?}; job killed for good"
    );
}

/// P3: one far-future leader timestamp: usage saturates and accounting no longer
/// equals runtime x GPUs (the invariant checker itself overflows); the clock never
/// comes back.
#[test]
fn p3_far_future_timestamp_breaks_accounting() {
    let mut s = cluster(1, 8);
    let id = submit(&mut s, spec("alice", 1, 8), at(1));
    start(&mut s, id, at(2));
    // Past year 2500 the command is refused; just before it, accounting still adds up.
    let refused = s.apply(Command::Tick {
        at: Timestamp(Timestamp::LATEST_ACCEPTED.as_ms() + 1),
    });
    assert!(refused.is_err());
    ok(
        &mut s,
        Command::Tick {
            at: Timestamp::LATEST_ACCEPTED,
        },
    );
    let r = std::panic::catch_unwind(|| corral_state::invariants::check(&s));
    assert!(
        matches!(r, Ok(Ok(()))),
        "invariants after far-future tick: {r:?}"
    );
}

/// P4: a job submitted into a reservation can never start once the reservation's
/// window passes (Tick deletes it); nothing but cancel gets it out.
#[test]
fn p4_reservation_expiry_strands_job() {
    let mut s = cluster(1, 8);
    ok(
        &mut s,
        Command::SetReservation {
            reservation: reservation("r", "n1", at(100), at(200), &["alice"]),
            by: admin(),
        },
    );
    let mut sp = spec("alice", 1, 1);
    sp.reservation = Some("r".into());
    let id = submit(&mut s, sp, at(1));
    // The window passes: the job is held, not stranded.
    ok(&mut s, Command::Tick { at: at(300) });
    let job = s.job(id).unwrap();
    assert_eq!(
        (job.hold.is_some(), job.reason),
        (true, PendingReason::ReservationDeleted)
    );
    // Its user releases it to run outside any reservation.
    ok(
        &mut s,
        Command::Release {
            job: id,
            by: user("alice"),
            at: at(301),
        },
    );
    let planned = first_fit(&s, id).unwrap();
    let out = ok(
        &mut s,
        Command::ApplyPlan {
            allocations: vec![planned],
            preemptions: vec![],
            reasons: vec![],
            at: at(302),
        },
    );
    assert_eq!(s.job(id).unwrap().state, JobState::Running, "{out:?}");
}

/// P5: Submit trusts client-parsed values it could check.
#[test]
fn p5_submit_trusts_client_values() {
    let mut s = cluster(1, 8);
    let mut problems = Vec::new();
    // duplicate array indices -> two tasks with the same task id
    let mut sp = spec("alice", 1, 1);
    sp.array = Some(ArraySpec {
        indices: vec![5, 5],
        throttle: Some(0),
    });
    if s.apply(Command::Submit {
        spec: sp,
        batch: script(),
        by: user("alice"),
        at: at(1),
        key: None,
    })
    .is_ok()
    {
        problems.push("array [5,5] throttle 0 accepted");
    }
    // A negative nice from an unprivileged user. (A claimed uid cannot be checked
    // here: the node agent resolves the user name and refuses a mismatch.)
    let mut sp = spec("alice", 1, 1);
    sp.nice = i32::MIN;
    if s.apply(Command::Submit {
        spec: sp,
        batch: script(),
        by: user("alice"),
        at: at(1),
        key: None,
    })
    .is_ok()
    {
        problems.push("nice=i32::MIN accepted from user alice");
    }
    // TimeLimit::Seconds(0) documented as impossible
    let mut sp = spec("alice", 1, 1);
    sp.time_limit = Some(TimeLimit::Seconds(0));
    if s.apply(Command::Submit {
        spec: sp,
        batch: script(),
        by: user("alice"),
        at: at(1),
        key: None,
    })
    .is_ok()
    {
        problems.push("TimeLimit::Seconds(0) accepted");
    }
    // --gpus-per-task=4 --ntasks=2 --ntasks-per-node=0 resolves to 0 GPUs
    let mut sp = spec("alice", 1, 0);
    sp.gpus_per_task = Some(GpuRequest {
        gpu_type: None,
        count: 4,
    });
    sp.ntasks = Some(2);
    sp.ntasks_per_node = Some(0);
    if let Ok(Outcome::Submitted { first, .. }) = s.apply(Command::Submit {
        spec: sp,
        batch: script(),
        by: user("alice"),
        at: at(1),
        key: None,
    }) && s.job(first).unwrap().resources.gpus_per_node == 0
    {
        problems.push("gpus-per-task=4 resolved to 0 GPUs/node");
    }
    // 64 MiB environment with a 1 KiB script limit
    let mut cfg = s.config().clone();
    cfg.max_batch_bytes = 1024;
    ok(
        &mut s,
        Command::SetConfig {
            config: cfg,
            by: admin(),
        },
    );
    let mut batch = script();
    batch.environment.insert("X".into(), "x".repeat(64 << 20));
    if s.apply(Command::Submit {
        spec: spec("alice", 1, 1),
        batch,
        by: user("alice"),
        at: at(1),
        key: None,
    })
    .is_ok()
    {
        problems.push("64 MiB environment accepted (max_batch_bytes=1024)");
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// P5b: duplicate array task ids would make two jobs answer to one `123_5`.
#[test]
fn p5b_duplicate_task_ids_are_refused() {
    let mut s = cluster(1, 8);
    let mut sp = spec("alice", 1, 1);
    sp.array = Some(ArraySpec {
        indices: vec![5, 5],
        throttle: None,
    });
    let before = s.digest();
    let r = s.apply(Command::Submit {
        spec: sp,
        batch: script(),
        by: user("alice"),
        at: at(1),
        key: None,
    });
    assert!(r.unwrap_err().to_string().contains("distinct"));
    assert_eq!(s.digest(), before);
}

/// P6: a checkpoint is recorded on a COMPLETED job (its newest attempt is over).
#[test]
fn p6_checkpoint_after_job_finished() {
    let mut s = cluster(1, 8);
    let id = submit(&mut s, spec("alice", 1, 1), at(1));
    start(&mut s, id, at(2));
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
    assert_eq!(s.job(id).unwrap().state, JobState::Completed);
    let r = s.apply(Command::ReportCheckpoint {
        job: id,
        attempt: 1,
        node: "n1".into(),
        step: 9,
        path: "/x".into(),
        at: at(4),
    });
    assert!(
        r.is_err(),
        "checkpoint on a finished attempt accepted; last_checkpoint={:?}",
        s.job(id).unwrap().last_checkpoint
    );
}

/// P7: an ending job whose node never reported AttemptStarted is not released when
/// that node's agent re-registers without the attempt; it stays COMPLETING.
#[test]
fn p7_reregistration_does_not_release_unstarted_node() {
    let mut s = cluster(2, 8);
    let id = submit(&mut s, spec("alice", 2, 8), at(1));
    let planned = first_fit(&s, id).unwrap();
    ok(
        &mut s,
        Command::ApplyPlan {
            allocations: vec![planned],
            preemptions: vec![],
            reasons: vec![],
            at: at(2),
        },
    );
    // only n1 (batch host) started; cancel; n1 confirms
    ok(
        &mut s,
        Command::AttemptStarted {
            job: id,
            attempt: 1,
            node: "n1".into(),
            at: at(3),
        },
    );
    ok(
        &mut s,
        Command::Cancel {
            target: CancelTarget::Job(id),
            by: user("alice"),
            at: at(4),
        },
    );
    ok(
        &mut s,
        Command::NodeReleased {
            job: id,
            attempt: 1,
            node: "n1".into(),
            at: at(5),
        },
    );
    // n2's agent restarts: it runs nothing
    register(&mut s, "n2", 8, &[], at(6));
    assert_eq!(
        s.job(id).unwrap().state,
        JobState::Cancelled,
        "n2 still holds 8 GPUs"
    );
}

/// P8: DefineNodes (e.g. to add a feature) silently returns a faulted, drained GPU
/// to service.
#[test]
fn p8_define_nodes_clears_gpu_fault() {
    let mut s = cluster(1, 2);
    ok(
        &mut s,
        Command::GpuFailed {
            node: "n1".into(),
            gpu: 1,
            xid: Some(79),
            reason: "off the bus".into(),
            at: at(1),
        },
    );
    ok(
        &mut s,
        Command::DefineNodes {
            nodes: vec![{
                let mut def = node_definition("n1", 2);
                def.features.insert("new".to_string());
                def
            }],
            by: admin(),
            at: at(2),
        },
    );
    assert!(
        !s.nodes()["n1"].gpus[1].is_free_and_usable(),
        "XID-79 GPU back in service"
    );
}

/// P9: a reservation turned into maintenance after submission still admits its job.
#[test]
fn p9_maintenance_reservation_not_rechecked() {
    let mut s = cluster(1, 8);
    let mut r = reservation("r", "n1", at(0), at(10_000), &["alice"]);
    ok(
        &mut s,
        Command::SetReservation {
            reservation: r.clone(),
            by: admin(),
        },
    );
    let mut sp = spec("alice", 1, 1);
    sp.reservation = Some("r".into());
    let id = submit(&mut s, sp, at(1));
    r.maintenance = true;
    r.users.clear();
    ok(
        &mut s,
        Command::SetReservation {
            reservation: r,
            by: admin(),
        },
    );
    let planned = first_fit(&s, id).unwrap();
    ok(
        &mut s,
        Command::ApplyPlan {
            allocations: vec![planned],
            preemptions: vec![],
            reasons: vec![],
            at: at(2),
        },
    );
    assert_eq!(
        s.job(id).unwrap().state,
        JobState::Pending,
        "job started inside a maintenance window"
    );
}

/// P10: a plan may set any pending reason, e.g. one that claims an admin hold.
#[test]
fn p10_plan_sets_hold_reason() {
    let mut s = cluster(1, 8);
    let id = submit(&mut s, spec("alice", 1, 1), at(1));
    ok(
        &mut s,
        Command::ApplyPlan {
            allocations: vec![],
            preemptions: vec![],
            reasons: vec![(id, PendingReason::JobHeldAdmin)],
            at: at(2),
        },
    );
    assert_ne!(s.job(id).unwrap().reason, PendingReason::JobHeldAdmin);
}

/// P11: a job whose --nodelist node can never fit is accepted (other nodes fit), and
/// can never start.
#[test]
fn p11_required_node_that_cannot_fit_is_accepted() {
    let mut s = cluster(2, 8);
    ok(
        &mut s,
        Command::DefineNodes {
            nodes: vec![node_definition("n2", 2)],
            by: admin(),
            at: at(1),
        },
    );
    let mut sp = spec("alice", 1, 8);
    sp.required_nodes = vec!["n2".into()];
    let r = s.apply(Command::Submit {
        spec: sp,
        batch: script(),
        by: user("alice"),
        at: at(2),
        key: None,
    });
    assert!(r.is_err(), "impossible --nodelist job accepted: {r:?}");
}
