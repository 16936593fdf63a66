//! Submission: resolution of defaults, arrays, and refusal of requests that can
//! never run. A refused submission changes nothing.

mod support;

use corral_state::command::{Command, Outcome};
use corral_state::job::{JobState, PendingReason};
use corral_state::slurm::array::ArraySpec;
use corral_state::slurm::dependency::{DependencyCondition, DependencyKind, DependencySpec};
use corral_state::slurm::duration::TimeLimit;
use corral_state::slurm::gres::GpuRequest;
use corral_state::{ClusterState, JobId, Rejection};
use support::*;

/// Applies a submission that must be refused, checks the state did not change, and
/// returns the error text.
fn refused(state: &mut ClusterState, spec: corral_state::job::JobSpec) -> String {
    let before = state.digest();
    let by = user(&spec.user);
    let result = state.apply(Command::Submit {
        spec,
        batch: script(),
        by,
        at: at(1),
        key: None,
    });
    assert_eq!(
        state.digest(),
        before,
        "a refused command changed the state"
    );
    match result {
        Err(e) => e.to_string(),
        Ok(o) => panic!("accepted: {o:?}"),
    }
}

#[test]
fn defaults_come_from_the_user_and_partition() {
    let mut s = cluster(2, 8);
    let id = submit(&mut s, spec("alice", 1, 2), at(1));
    let job = s.job(id).unwrap();
    assert_eq!(job.account, "ml");
    assert_eq!(job.partition, "gpu");
    assert_eq!(job.time_limit, TimeLimit::Seconds(3600));
    assert_eq!(job.resources.gpus_per_node, 2);
    assert_eq!(job.resources.ntasks, 1);
}

#[test]
fn a_nul_byte_no_process_could_be_given_is_refused_at_submission() {
    let mut s = cluster(2, 8);
    let mut named = spec("alice", 1, 2);
    named.name = "train\0x".into();
    let msg = refused(&mut s, named);
    assert!(msg.contains("job name") && msg.contains("NUL"), "{msg}");
    let mut commented = spec("alice", 1, 2);
    commented.comment = Some("\0".into());
    assert!(refused(&mut s, commented).contains("comment"));
    // Other control characters are the user's business (they are escaped
    // when printed to other users' terminals).
    let mut odd = spec("alice", 1, 2);
    odd.name = "train\u{1b}[2J".into();
    submit(&mut s, odd, at(2));
}

#[test]
fn nine_gpus_on_eight_gpu_nodes_is_refused_with_the_reason() {
    let mut s = cluster(2, 8);
    let msg = refused(&mut s, spec("alice", 1, 9));
    assert!(
        msg.contains("not available") && msg.contains("largest node has 8"),
        "{msg}"
    );
}

#[test]
fn more_nodes_than_the_partition_has_is_refused() {
    let mut s = cluster(2, 8);
    let msg = refused(&mut s, spec("alice", 3, 1));
    assert!(msg.contains("needs 3 node(s)"), "{msg}");
}

#[test]
fn a_gpu_type_the_partition_lacks_is_refused() {
    let mut s = cluster(2, 8);
    let mut sp = spec("alice", 1, 0);
    sp.gpus_per_node = Some(GpuRequest {
        gpu_type: Some("a100_3g.20gb".into()),
        count: 1,
    });
    let msg = refused(&mut s, sp);
    assert!(msg.contains("a100_3g.20gb"), "{msg}");
}

#[test]
fn unknown_names_are_refused() {
    let mut s = cluster(1, 8);
    let mut sp = spec("alice", 1, 1);
    sp.partition = Some("cpu".into());
    assert!(refused(&mut s, sp).contains("unknown partition 'cpu'"));
    let mut sp = spec("alice", 1, 1);
    sp.account = Some("vision".into());
    assert!(refused(&mut s, sp).contains("unknown account 'vision'"));
    let mut sp = spec("alice", 1, 1);
    sp.qos = Some("turbo".into());
    assert!(refused(&mut s, sp).contains("unknown QOS 'turbo'"));
    assert!(refused(&mut s, spec("mallory", 1, 1)).contains("unknown user 'mallory'"));
}

#[test]
fn charging_an_account_the_user_is_not_in_is_refused() {
    let mut s = cluster(1, 8);
    let mut sp = spec("alice", 1, 1);
    sp.account = Some("root".into());
    let msg = refused(&mut s, sp);
    assert!(
        msg.contains("may not charge account 'root'") && msg.contains("ml"),
        "{msg}"
    );
}

#[test]
fn a_time_limit_over_the_partition_maximum_is_refused() {
    let mut s = cluster(1, 8);
    let mut sp = spec("alice", 1, 1);
    sp.time_limit = Some(TimeLimit::Seconds(2 * 24 * 3600));
    let msg = refused(&mut s, sp);
    assert!(msg.contains("exceeds partition 'gpu' MaxTime"), "{msg}");
    let mut sp = spec("alice", 1, 1);
    sp.time_limit = Some(TimeLimit::Unlimited);
    assert!(refused(&mut s, sp).contains("MaxTime"));
}

#[test]
fn submitting_as_someone_else_is_refused() {
    let mut s = cluster(1, 8);
    let before = s.digest();
    let result = s.apply(Command::Submit {
        spec: spec("alice", 1, 1),
        batch: script(),
        by: user("bob"),
        at: at(1),
        key: None,
    });
    assert!(matches!(result, Err(Rejection::PermissionDenied(_))));
    assert_eq!(s.digest(), before);
}

#[test]
fn a_script_without_an_interpreter_line_is_refused() {
    let mut s = cluster(1, 8);
    let mut batch = script();
    batch.script = "echo hi\n".into();
    let before = s.digest();
    let result = s.apply(Command::Submit {
        spec: spec("alice", 1, 1),
        batch,
        by: user("alice"),
        at: at(1),
        key: None,
    });
    assert!(result.unwrap_err().to_string().contains("#!/bin/bash"));
    assert_eq!(s.digest(), before);
}

#[test]
fn gpus_for_the_job_must_divide_over_its_nodes() {
    let mut s = cluster(2, 8);
    let mut sp = spec("alice", 2, 0);
    sp.gpus_total = Some(GpuRequest {
        gpu_type: None,
        count: 3,
    });
    assert!(refused(&mut s, sp).contains("does not divide evenly"));
    let mut sp = spec("alice", 2, 0);
    sp.gpus_total = Some(GpuRequest {
        gpu_type: None,
        count: 16,
    });
    let id = submit(&mut s, sp, at(2));
    assert_eq!(s.job(id).unwrap().resources.gpus_per_node, 8);
}

#[test]
fn an_array_becomes_one_job_per_task_sharing_one_script() {
    let mut s = cluster(1, 8);
    let mut sp = spec("alice", 1, 1);
    sp.array = Some(ArraySpec {
        indices: vec![0, 4, 8],
        throttle: Some(2),
    });
    let out = ok(
        &mut s,
        Command::Submit {
            spec: sp,
            batch: script(),
            by: user("alice"),
            at: at(1),
            key: None,
        },
    );
    assert_eq!(
        out,
        Outcome::Submitted {
            first: JobId(1),
            count: 3
        }
    );
    let tasks: Vec<u32> = (1..=3)
        .map(|i| s.job(JobId(i)).unwrap().array.unwrap().task_id)
        .collect();
    assert_eq!(tasks, vec![0, 4, 8]);
    assert!((1..=3).all(|i| s.job(JobId(i)).unwrap().script_id == JobId(1)));
    assert_eq!(s.next_job_id(), JobId(4));
    // Cancelling the array's id cancels every task.
    ok(
        &mut s,
        Command::Cancel {
            target: corral_state::CancelTarget::Job(JobId(1)),
            by: user("alice"),
            at: at(2),
        },
    );
    assert!((1..=3).all(|i| s.job(JobId(i)).unwrap().state == JobState::Cancelled));
    check_invariants(&s);
}

#[test]
fn an_oversized_array_is_refused() {
    let mut s = cluster(1, 8);
    let mut sp = spec("alice", 1, 1);
    sp.array = Some(ArraySpec {
        indices: (0..20_000).collect(),
        throttle: None,
    });
    assert!(refused(&mut s, sp).contains("MaxArraySize"));
}

#[test]
fn dependencies_must_name_existing_jobs() {
    let mut s = cluster(1, 8);
    let first = submit(&mut s, spec("alice", 1, 1), at(1));
    let dependency = |job_id| DependencySpec {
        any_of: false,
        conditions: vec![DependencyCondition {
            kind: DependencyKind::AfterOk,
            job_id,
            array_task: None,
            delay_minutes: 0,
        }],
        singleton: false,
    };
    let mut sp = spec("alice", 1, 1);
    sp.dependency = Some(dependency(99));
    assert!(refused(&mut s, sp).contains("job 99 which does not exist"));
    let mut sp = spec("alice", 1, 1);
    sp.dependency = Some(dependency(first.0));
    let id = submit(&mut s, sp, at(2));
    assert_eq!(s.job(id).unwrap().reason, PendingReason::Dependency);
}

#[test]
fn one_submission_cannot_flood_the_state() {
    let mut s = cluster(1, 8);
    // A large comment is fine once, but not copied into ten thousand tasks.
    let mut sp = spec("alice", 1, 1);
    sp.comment = Some("x".repeat(40 * 1024));
    let single = sp.clone();
    sp.array = Some(ArraySpec {
        indices: (0..10_000).collect(),
        throttle: None,
    });
    assert!(refused(&mut s, sp).contains("one submission may add at most"));
    submit(&mut s, single, at(2));
    // Past the per-spec bound even one job is refused.
    let mut sp = spec("alice", 1, 1);
    sp.comment = Some("x".repeat(70 * 1024));
    assert!(refused(&mut s, sp).contains("options take"));
}

#[test]
fn fields_format_2_added_do_not_count_against_the_limit_format_1_measured() {
    // The longest comment a plain submission may carry, found by asking.
    let accepts = |comment_len: usize, extended: bool| {
        let mut s = cluster(1, 8);
        let mut sp = spec("alice", 1, 1);
        sp.comment = Some("c".repeat(comment_len));
        if extended {
            sp.mail_user = Some("m".repeat(1000));
            sp.command = Some(format!("/{}", "p".repeat(3000)));
            sp.time_min = Some(TimeLimit::Seconds(600));
        }
        let by = user("alice");
        s.apply(Command::Submit {
            spec: sp,
            batch: script(),
            by,
            at: at(1),
            key: None,
        })
        .is_ok()
    };
    let (mut low, mut high) = (0usize, 70 * 1024);
    while low + 1 < high {
        let mid = (low + high) / 2;
        if accepts(mid, false) {
            low = mid;
        } else {
            high = mid;
        }
    }
    assert!(low > 60 * 1024, "the limit is about 64 KiB, found {low}");
    // A format-1 entry at the limit replays as the format-1 build applied it:
    // what format 2 added is bounded on its own.
    assert!(accepts(low, true));
    assert!(!accepts(low + 1, true));
}

#[test]
fn submit_limits_of_users_and_accounts_refuse_what_would_pass_them() {
    let mut s = cluster(1, 8);
    let mut alice = s.users()["alice"].clone();
    alice.limits.max_submit_jobs = Some(2);
    ok(
        &mut s,
        Command::SetUser {
            user: alice,
            by: admin(),
        },
    );
    submit(&mut s, spec("alice", 1, 1), at(1));
    let mut array = spec("alice", 1, 1);
    array.array = Some(ArraySpec {
        indices: vec![0, 1],
        throttle: None,
    });
    let why = refused(&mut s, array);
    assert!(
        why.contains(
            "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
        ),
        "{why}"
    );
    assert!(why.contains("MaxSubmitJobs=2"), "{why}");
    submit(&mut s, spec("alice", 1, 1), at(2));
    assert!(refused(&mut s, spec("alice", 1, 1)).contains("MaxSubmitJobs=2"));
    // bob is not limited; the account's group limit counts everyone in it.
    submit(&mut s, spec("bob", 1, 1), at(3));
    let mut ml = s.accounts()["ml"].clone();
    ml.limits.grp_submit_jobs = Some(3);
    ok(
        &mut s,
        Command::SetAccount {
            account: ml,
            by: admin(),
        },
    );
    assert!(refused(&mut s, spec("bob", 1, 1)).contains("GrpSubmitJobs=3"));
    check_invariants(&s);
}
