//! Data written by earlier builds is still read: the Raft log's commands and the
//! snapshots that formats 1 and 2 stored (`tests/fixtures/format1-*.bin` and
//! `format2-*.bin`, each written by the last build of its format and never
//! rewritten) decode with this build and give the same state as the same
//! history applied now.
//!
//! The fixtures are `postcard::to_stdvec(&history())` and
//! `snapshot::encode(&applied_now())` as the format-1 build wrote them, and the
//! same of `history_format2()` as the format-2 build did; `format4-snapshot.bin`
//! is `snapshot::encode(&applied_format2_now())` as the format-4 build wrote it
//! (commit af607ce). When a
//! stored shape changes again, freeze its old shape (as `corral_state::format_v1`
//! does), write the current format's fixtures with the build before the change,
//! and test them here.

mod support;

use corral_state::command::Command;
use corral_state::job::JobState;
use corral_state::slurm::array::ArraySpec;
use corral_state::slurm::dependency::{DependencyCondition, DependencyKind, DependencySpec};
use corral_state::slurm::duration::TimeLimit;
use corral_state::{ClusterState, JobId, snapshot};
use support::*;

const FORMAT1_COMMANDS: &[u8] = include_bytes!("fixtures/format1-commands.bin");
const FORMAT1_SNAPSHOT: &[u8] = include_bytes!("fixtures/format1-snapshot.bin");
const FORMAT2_COMMANDS: &[u8] = include_bytes!("fixtures/format2-commands.bin");
const FORMAT2_SNAPSHOT: &[u8] = include_bytes!("fixtures/format2-snapshot.bin");
const FORMAT4_SNAPSHOT: &[u8] = include_bytes!("fixtures/format4-snapshot.bin");
/// Format 2's `SetAccount`, `SetUser`, `Submit` and a fully set `UpdateJob`,
/// written by the format-2 build (commit 5d73a48).
const FORMAT2_ADMIN_COMMANDS: &[u8] = include_bytes!("fixtures/format2-admin-commands.bin");

/// A history touching every stored table a job lives in: plain, array, dependent
/// and held submissions, a plan, starts, an exit, a tick and a cancel.
fn history() -> Vec<Command> {
    let mut base = cluster(2, 8);
    let mut commands = Vec::new();
    let mut run = |state: &mut ClusterState, command: Command| {
        ok(state, command.clone());
        commands.push(command);
    };
    let submit = |spec: corral_state::job::JobSpec, secs| Command::Submit {
        by: user(&spec.user),
        spec,
        batch: script(),
        key: Some(format!("key-{secs}")),
        at: at(secs),
    };

    let mut first = spec("alice", 1, 4);
    first.comment = Some("first".into());
    first.time_limit = Some(TimeLimit::Seconds(90 * 60));
    run(&mut base, submit(first, 10));

    let mut array = spec("bob", 1, 1);
    array.array = Some(ArraySpec {
        indices: vec![0, 2, 4],
        throttle: Some(2),
    });
    run(&mut base, submit(array, 11));

    let mut dependent = spec("alice", 1, 2);
    dependent.dependency = Some(DependencySpec {
        any_of: false,
        conditions: vec![DependencyCondition {
            kind: DependencyKind::AfterOk,
            job_id: 1,
            array_task: None,
            delay_minutes: 0,
        }],
        singleton: false,
    });
    run(&mut base, submit(dependent, 12));

    let mut held = spec("bob", 2, 8);
    held.hold = true;
    run(&mut base, submit(held, 13));

    let planned = first_fit(&base, JobId(1)).expect("job 1 fits");
    let node = planned.nodes[0].node.clone();
    run(
        &mut base,
        Command::ApplyPlan {
            allocations: vec![planned],
            preemptions: vec![],
            reasons: vec![],
            at: at(20),
        },
    );
    run(
        &mut base,
        Command::AttemptStarted {
            job: JobId(1),
            attempt: 1,
            node: node.clone(),
            at: at(21),
        },
    );
    run(&mut base, Command::Tick { at: at(60) });
    run(
        &mut base,
        Command::BatchExited {
            job: JobId(1),
            attempt: 1,
            node,
            status: exit(0),
            at: at(80),
        },
    );
    run(
        &mut base,
        Command::Cancel {
            target: corral_state::command::CancelTarget::Job(JobId(5)),
            by: admin(),
            at: at(90),
        },
    );
    commands
}

/// `history` and what format 2 added: a submission with its new fields (a
/// minimum time, mail, the command) started with two `srun` steps, one ended.
fn history_format2() -> Vec<Command> {
    let mut state = cluster(2, 8);
    let mut commands = history();
    for command in &commands {
        ok(&mut state, command.clone());
    }
    let mut run = |state: &mut ClusterState, command: Command| {
        ok(state, command.clone());
        commands.push(command);
    };
    let mut asked = spec("alice", 1, 2);
    asked.time_min = Some(TimeLimit::Seconds(600));
    asked.mail_type = corral_state::slurm::mail::MailTypes::parse("END,FAIL").expect("parses");
    asked.mail_user = Some("alice@example.org".into());
    asked.command = Some("/home/alice/train.sh".into());
    asked.cpus_per_task_given = true;
    run(
        &mut state,
        Command::Submit {
            by: user("alice"),
            spec: asked,
            batch: script(),
            key: Some("key-100".into()),
            at: at(100),
        },
    );
    let id = JobId(state.jobs().keys().map(|j| j.0).max().expect("jobs"));
    let planned = first_fit(&state, id).expect("it fits");
    let node = planned.nodes[0].node.clone();
    run(
        &mut state,
        Command::ApplyPlan {
            allocations: vec![planned],
            preemptions: vec![],
            reasons: vec![],
            at: at(101),
        },
    );
    run(
        &mut state,
        Command::AttemptStarted {
            job: id,
            attempt: 1,
            node: node.clone(),
            at: at(102),
        },
    );
    for step in 0..2 {
        run(
            &mut state,
            Command::StepStarted {
                job: id,
                attempt: 1,
                node: node.clone(),
                step,
                name: "python".into(),
                nodes: vec![node.clone()],
                ntasks: 2,
                cpus: 2,
                at: at(103 + u64::from(step)),
            },
        );
    }
    run(
        &mut state,
        Command::StepEnded {
            job: id,
            attempt: 1,
            node,
            step: 0,
            status: exit(0),
            at: at(110),
        },
    );
    commands
}

/// The state `history` leaves, applied by this build.
fn applied_now() -> ClusterState {
    let mut state = cluster(2, 8);
    for command in history() {
        ok(&mut state, command);
    }
    state
}

#[test]
fn format1_log_commands_decode_and_apply_to_the_same_state() {
    let commands: Vec<Command> =
        postcard::from_bytes(FORMAT1_COMMANDS).expect("format-1 commands decode");
    assert_eq!(commands.len(), history().len());
    let mut state = cluster(2, 8);
    for command in commands {
        ok(&mut state, command);
    }
    check_invariants(&state);
    assert_eq!(state, applied_now());
}

#[test]
fn a_format1_snapshot_decodes_to_the_same_state() {
    let state = snapshot::decode(FORMAT1_SNAPSHOT).expect("format-1 snapshot decodes");
    check_invariants(&state);
    let now = applied_now();
    assert_eq!(state, now);
    assert_eq!(state.digest(), now.digest());
    assert_eq!(
        state.job(JobId(1)).map(|j| j.state),
        Some(JobState::Completed)
    );
}

#[test]
fn a_current_snapshot_keeps_what_older_formats_could_not_hold() {
    let mut state = cluster(2, 8);
    let mut asked = spec("alice", 1, 1);
    asked.time_min = Some(TimeLimit::Seconds(600));
    asked.mail_type = corral_state::slurm::mail::MailTypes::parse("END,FAIL").expect("parses");
    asked.mail_user = Some("alice@example.org".into());
    asked.command = Some("/home/alice/train.sh".into());
    asked.cpus_per_task_given = true;
    asked.begin_time = Some(at(3600));
    asked.min_cpus_per_node = Some(4);
    let id = submit(&mut state, asked.clone(), at(5));
    let mut alice = state.users()["alice"].clone();
    alice.limits.max_jobs = Some(4);
    alice.limits.grp_gpus = Some(8);
    ok(
        &mut state,
        Command::SetUser {
            user: alice.clone(),
            by: admin(),
        },
    );
    let bytes = snapshot::encode(&state).expect("encodes");
    assert_eq!(bytes[8..12], snapshot::FORMAT_VERSION.to_le_bytes());
    let back = snapshot::decode(&bytes).expect("decodes");
    assert_eq!(back, state);
    assert_eq!(back.job(id).map(|j| &j.spec), Some(&asked));
    assert_eq!(back.users()["alice"], alice);
}

/// Format 4 changed a rule (an exit during a preemption's grace is the
/// preemption's), not a shape: a snapshot a format-3 build wrote is read as
/// format 4's; a format newer than this build's is refused.
#[test]
fn a_format3_snapshot_reads_as_format_4_and_a_newer_one_is_refused() {
    let mut bytes = FORMAT4_SNAPSHOT.to_vec();
    bytes[8..12].copy_from_slice(&3u32.to_le_bytes());
    let back = snapshot::decode(&bytes).expect("a format-3 snapshot decodes");
    assert_eq!(back, applied_format2_now());
    let mut newer = snapshot::encode(&back).expect("encodes");
    newer[8..12].copy_from_slice(&(snapshot::FORMAT_VERSION + 1).to_le_bytes());
    assert!(matches!(
        snapshot::decode(&newer),
        Err(snapshot::SnapshotError::UnsupportedVersion { .. })
    ));
}

/// Format 5 added the nodes' liveness settings to the state: a format-4
/// snapshot decodes to the same state with none set, and a current one keeps
/// them.
#[test]
fn a_format4_snapshot_decodes_without_liveness_settings_and_a_current_one_keeps_them() {
    assert_eq!(FORMAT4_SNAPSHOT[8..12], 4u32.to_le_bytes());
    let state = snapshot::decode(FORMAT4_SNAPSHOT).expect("format-4 snapshot decodes");
    check_invariants(&state);
    let now = applied_format2_now();
    assert_eq!(state, now);
    assert_eq!(state.digest(), now.digest());
    assert_eq!(state.liveness(), None);

    let mut state = state;
    let liveness = corral_state::node_liveness::NodeLiveness {
        heartbeat_ms: 250,
        lease_ms: 4_000,
        down_margin_ms: 3_000,
    };
    ok(
        &mut state,
        Command::SetLiveness {
            liveness,
            by: admin(),
            at: at(100),
        },
    );
    let back = snapshot::decode(&snapshot::encode(&state).expect("encodes")).expect("decodes");
    assert_eq!(back.liveness().map(|l| l.current), Some(liveness));
    assert_eq!(back, state);
}

/// The state `history_format2` leaves, applied by this build.
fn applied_format2_now() -> ClusterState {
    let mut state = cluster(2, 8);
    for command in history_format2() {
        ok(&mut state, command);
    }
    state
}

#[test]
fn format2_log_commands_decode_and_apply_to_the_same_state() {
    let commands: Vec<Command> =
        postcard::from_bytes(FORMAT2_COMMANDS).expect("format-2 commands decode");
    assert_eq!(commands.len(), history_format2().len());
    let mut state = cluster(2, 8);
    for command in commands {
        ok(&mut state, command);
    }
    check_invariants(&state);
    assert_eq!(state, applied_format2_now());
}

#[test]
fn a_format2_snapshot_decodes_to_the_same_state() {
    let state = snapshot::decode(FORMAT2_SNAPSHOT).expect("format-2 snapshot decodes");
    check_invariants(&state);
    let now = applied_format2_now();
    assert_eq!(state, now);
    assert_eq!(state.digest(), now.digest());
    let later = state
        .jobs()
        .values()
        .find(|j| j.spec.mail_user.is_some())
        .expect("the job");
    assert_eq!(later.steps.len(), 2);
    assert_eq!(later.spec.time_min, Some(TimeLimit::Seconds(600)));
}

/// What `format2-admin-commands.bin` holds, in this build's commands.
fn admin_history() -> Vec<Command> {
    use corral_state::account::{Account, User};
    use corral_state::ids::Role;
    use corral_state::job_update::JobUpdate;
    vec![
        Command::SetAccount {
            account: Account {
                name: "vision".into(),
                parent: Some("root".into()),
                shares: 3,
                default_qos: None,
                description: "Vision".into(),
                limits: Default::default(),
            },
            by: admin(),
        },
        Command::SetUser {
            user: User {
                name: "carol".into(),
                default_account: "vision".into(),
                accounts: ["vision".to_string()].into(),
                role: Role::User,
                limits: Default::default(),
            },
            by: admin(),
        },
        Command::Submit {
            by: user("carol"),
            spec: spec("carol", 1, 1),
            batch: script(),
            key: None,
            at: at(20),
        },
        Command::UpdateJob {
            job: JobId(1),
            update: JobUpdate {
                name: Some("renamed".into()),
                comment: Some("moved".into()),
                time_limit: Some(TimeLimit::Seconds(1800)),
                partition: Some("gpu".into()),
                account: Some("vision".into()),
                qos: None,
                nice: Some(10),
                dependency: Some(None),
                nodes: Some(1),
                features: Some(Vec::new()),
                excluded_nodes: Some(vec!["n2".into()]),
                begin_time: None,
            },
            by: admin(),
            at: at(30),
        },
    ]
}

#[test]
fn format2_admin_and_update_commands_decode_into_their_frozen_variants_and_apply_the_same() {
    let commands: Vec<Command> =
        postcard::from_bytes(FORMAT2_ADMIN_COMMANDS).expect("format-2 admin commands decode");
    let kinds: Vec<&str> = commands
        .iter()
        .map(|c| match c {
            Command::SetAccountFormat2 { .. } => "SetAccountFormat2",
            Command::SetUserFormat2 { .. } => "SetUserFormat2",
            Command::SubmitFormat2 { .. } => "SubmitFormat2",
            Command::UpdateJobFormat2 { .. } => "UpdateJobFormat2",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "SetAccountFormat2",
            "SetUserFormat2",
            "SubmitFormat2",
            "UpdateJobFormat2"
        ]
    );
    // Re-encoded, they are the bytes the format-2 build wrote.
    assert_eq!(
        postcard::to_stdvec(&commands).expect("encodes"),
        FORMAT2_ADMIN_COMMANDS
    );
    let mut old = cluster(2, 8);
    for command in commands {
        ok(&mut old, command);
    }
    let mut now = cluster(2, 8);
    for command in admin_history() {
        ok(&mut now, command);
    }
    check_invariants(&old);
    assert_eq!(old, now);
    assert_eq!(old.digest(), now.digest());
    let job = old.job(JobId(1)).expect("the job");
    assert_eq!(
        (job.spec.name.as_str(), job.account.as_str()),
        ("renamed", "vision")
    );
}
