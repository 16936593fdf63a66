//! `srun` steps recorded from their agents' reports: a record per step of the
//! live attempt, ended with its status; resent reports change nothing; stale
//! attempts and foreign nodes are refused without a change.

mod support;

use corral_state::command::Command;
use corral_state::job::{ExitStatus, MAX_STEP_RECORDS};
use corral_state::{ClusterState, JobId, Rejection};
use support::*;

fn started(job: JobId, attempt: u32, node: &str, step: u32, nodes: &[String]) -> Command {
    Command::StepStarted {
        job,
        attempt,
        node: node.to_string(),
        step,
        name: "python".into(),
        nodes: nodes.to_vec(),
        ntasks: 4,
        cpus: 4,
        at: at(30),
    }
}

fn ended(job: JobId, attempt: u32, node: &str, step: u32, code: i32) -> Command {
    Command::StepEnded {
        job,
        attempt,
        node: node.to_string(),
        step,
        status: ExitStatus { code, signal: None },
        at: at(40),
    }
}

fn running_job() -> (ClusterState, JobId, Vec<String>) {
    let mut state = cluster(2, 8);
    let id = submit(&mut state, spec("alice", 2, 8), at(1));
    let nodes = start(&mut state, id, at(2));
    (state, id, nodes)
}

#[test]
fn a_step_is_recorded_when_it_starts_and_closed_when_it_ends() {
    let (mut state, id, nodes) = running_job();
    ok(&mut state, started(id, 1, &nodes[0], 0, &nodes));
    ok(&mut state, started(id, 1, &nodes[0], 0, &nodes));
    let steps = &state.job(id).unwrap().steps;
    assert_eq!(steps.len(), 1, "a resent report adds nothing");
    assert_eq!(steps[0].name, "python");
    assert_eq!(steps[0].started_at, at(30));
    assert_eq!(steps[0].ended_at, None);
    ok(&mut state, ended(id, 1, &nodes[0], 0, 3));
    ok(&mut state, ended(id, 1, &nodes[0], 0, 0));
    let step = &state.job(id).unwrap().steps[0];
    assert_eq!(step.ended_at, Some(at(40)));
    assert_eq!(step.exit.map(|e| e.code), Some(3), "the first end stands");
    // An end for a step never recorded changes nothing.
    let before = state.digest();
    ok(&mut state, ended(id, 1, &nodes[0], 7, 0));
    assert_eq!(state.digest(), before);
    check_invariants(&state);
}

#[test]
fn stale_attempts_and_foreign_nodes_are_refused_unchanged() {
    let (mut state, id, nodes) = running_job();
    let before = state.digest();
    let stale = state.apply(started(id, 2, &nodes[0], 0, &nodes));
    assert!(
        matches!(stale, Err(Rejection::StaleAttempt { .. })),
        "{stale:?}"
    );
    let foreign = vec!["n9".to_string()];
    let outside = state.apply(started(id, 1, &nodes[0], 0, &foreign));
    assert!(
        matches!(outside, Err(Rejection::NotInAllocation { .. })),
        "{outside:?}"
    );
    assert_eq!(state.digest(), before);
}

#[test]
fn a_job_keeps_at_most_its_first_steps() {
    let (mut state, id, nodes) = running_job();
    let count = u32::try_from(MAX_STEP_RECORDS).unwrap() + 3;
    for step in 0..count {
        ok(&mut state, started(id, 1, &nodes[0], step, &nodes));
    }
    let steps = &state.job(id).unwrap().steps;
    assert_eq!(steps.len(), MAX_STEP_RECORDS, "per attempt");
    assert_eq!(steps.last().map(|s| s.step), Some(count - 4));
    check_invariants(&state);
}

#[test]
fn steps_numbered_by_two_nodes_are_two_records_each_ended_by_its_own_node() {
    let (mut state, id, nodes) = running_job();
    ok(&mut state, started(id, 1, &nodes[0], 0, &nodes));
    ok(&mut state, started(id, 1, &nodes[1], 0, &nodes));
    assert_eq!(state.job(id).unwrap().steps.len(), 2);
    // The second node's end closes the second node's step only.
    ok(&mut state, ended(id, 1, &nodes[1], 0, 4));
    let steps = &state.job(id).unwrap().steps;
    assert_eq!(steps[0].exit, None);
    assert_eq!(steps[1].exit.map(|e| e.code), Some(4));
    check_invariants(&state);
}
