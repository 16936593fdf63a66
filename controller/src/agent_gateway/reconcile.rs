//! What one node's agent should be told, from committed state alone: launch the
//! attempts placed on it, signal those under a preemption notice or nearing their
//! time limit (`--signal`), and kill those that are ending or that the state no
//! longer knows. Pure: the session remembers what it already sent, so each
//! instruction goes out once per connection.
//!
//! The other direction too ([`lost_attempts`]): an attempt the state has running
//! on the node that the agent's heartbeats no longer hold is gone there, and is
//! failed over even if the agent never said so.

use std::collections::{BTreeMap, BTreeSet};

use corral_proto::agent::SignalScope;
use corral_state::ClusterState;
use corral_state::ids::{AttemptNumber, JobId};
use corral_state::job::{Attempt, Job};
use corral_state::slurm::duration::TimeLimit;
use corral_state::slurm::signal::Signal;
use corral_state::time::Timestamp;

/// An attempt on a node.
pub type AttemptKey = (JobId, AttemptNumber);

/// One instruction for an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instruction {
    /// Start the attempt.
    Launch(AttemptKey),
    /// Send it a signal (it keeps running).
    Signal(AttemptKey, Signal, SignalScope),
    /// End it: `signal`, then SIGKILL after the grace period.
    Kill(AttemptKey, Signal),
}

/// What a session has told its agent, and what the agent says it runs.
#[derive(Debug, Clone, Default)]
pub struct SessionMemory {
    /// From the agent's last hello or heartbeat.
    pub running: BTreeSet<AttemptKey>,
    /// Launches sent.
    pub launched: BTreeSet<AttemptKey>,
    /// Signals sent (attempt, signal number).
    pub signalled: BTreeSet<(AttemptKey, u8)>,
    /// Kills sent.
    pub killed: BTreeSet<AttemptKey>,
    /// Hellos and heartbeats received so far (each replaces `running`).
    pub heartbeats: u64,
    /// Attempts found missing from `running` while the state had them started
    /// here, with `heartbeats` at that moment.
    pub suspects: BTreeMap<AttemptKey, u64>,
    /// Attempts already declared lost.
    pub declared_lost: BTreeSet<AttemptKey>,
}

impl SessionMemory {
    /// A hello or heartbeat said the agent holds `running`.
    pub fn heard(&mut self, running: impl IntoIterator<Item = AttemptKey>) {
        self.running = running.into_iter().collect();
        self.heartbeats += 1;
    }

    /// Records that `instruction` was sent.
    pub fn sent(&mut self, instruction: &Instruction) {
        match instruction {
            Instruction::Launch(key) => {
                self.launched.insert(*key);
            }
            Instruction::Signal(key, signal, _) => {
                self.signalled.insert((*key, signal.0));
            }
            Instruction::Kill(key, _) => {
                self.killed.insert(*key);
            }
        }
    }
}

/// The instructions `node`'s agent needs now.
pub fn reconcile(
    state: &ClusterState,
    node: &str,
    memory: &SessionMemory,
    now: Timestamp,
) -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut expected: BTreeSet<AttemptKey> = BTreeSet::new();
    let Some(this) = state.nodes().get(node) else {
        return out;
    };
    for job_id in this.allocations.keys() {
        let Some(job) = state.job(*job_id) else {
            continue;
        };
        let Some(attempt) = job.live_attempt() else {
            continue;
        };
        if !attempt.allocation.iter().any(|a| a.node == node) {
            continue;
        }
        let key = (job.id, attempt.number);
        expected.insert(key);
        match &attempt.ending {
            Some(ending) => {
                if ending.unreleased.contains(node) && !memory.killed.contains(&key) {
                    out.push(Instruction::Kill(key, Signal::TERM));
                }
            }
            None => {
                let known = attempt.started_on.contains(node)
                    || memory.running.contains(&key)
                    || memory.launched.contains(&key);
                if !known {
                    out.push(Instruction::Launch(key));
                }
                for (signal, scope) in signals_due(job, attempt, node, now) {
                    if !memory.signalled.contains(&(key, signal.0)) {
                        out.push(Instruction::Signal(key, signal, scope));
                    }
                }
            }
        }
    }
    // Attempts the agent runs that the state no longer places here (requeued,
    // cancelled before the node heard, or from before a restart): kill them.
    for key in &memory.running {
        if !expected.contains(key) && !memory.killed.contains(key) {
            out.push(Instruction::Kill(*key, Signal::TERM));
        }
    }
    out
}

/// Attempts the state has running on `node` (started there, not ending) that
/// the agent no longer holds. Missing once, an attempt is only suspected (the
/// heartbeat may have left before the agent's report that started it was
/// committed); missing again from a heartbeat received after that (which the
/// agent sent after the report, on the same stream), it is gone: returned
/// once, to be declared lost.
pub fn lost_attempts(
    state: &ClusterState,
    node: &str,
    memory: &mut SessionMemory,
) -> Vec<AttemptKey> {
    let Some(this) = state.nodes().get(node) else {
        return Vec::new();
    };
    let missing: BTreeSet<AttemptKey> = this
        .allocations
        .keys()
        .filter_map(|id| state.job(*id))
        .filter_map(|job| {
            let attempt = job.live_attempt()?;
            let started_here = attempt.ending.is_none() && attempt.started_on.contains(node);
            let key = (job.id, attempt.number);
            (started_here && !memory.running.contains(&key)).then_some(key)
        })
        .collect();
    memory.suspects.retain(|key, _| missing.contains(key));
    let mut lost = Vec::new();
    for key in missing {
        match memory.suspects.get(&key) {
            Some(since) if memory.heartbeats > *since => {
                if memory.declared_lost.insert(key) {
                    lost.push(key);
                }
            }
            Some(_) => {}
            None => {
                memory.suspects.insert(key, memory.heartbeats);
            }
        }
    }
    lost
}

/// Signals the attempt should have received by `now` on `node`, in order, and
/// which of its processes each reaches. A preemption notice is Slurm 22.05's:
/// SIGCONT, then SIGTERM, to the steps' tasks only (slurmctld signals with
/// `KILL_STEPS_ONLY`: the batch shell hears nothing until the grace is over);
/// where the leader sent the job's own `--signal` instead of SIGTERM
/// (`preempt_send_user_signal`), SIGCONT and that signal reach what
/// `--signal` names. `--signal=SIG` near the time limit reaches the steps'
/// tasks, `--signal=B:SIG` only the batch shell (as in Slurm).
fn signals_due(
    job: &Job,
    attempt: &Attempt,
    node: &str,
    now: Timestamp,
) -> Vec<(Signal, SignalScope)> {
    let mut due = Vec::new();
    if let Some(notice) = &attempt.preemption {
        let scope = notice_scope(job, notice.signal);
        if node_is_reached(attempt, node, scope) {
            due.push((Signal::CONT, scope));
            due.push((notice.signal, scope));
        }
    }
    if let (Some(spec), TimeLimit::Seconds(limit)) = (&job.spec.signal, job.time_limit) {
        let batch_host = attempt.batch_host() == Some(node);
        let at = attempt
            .started_at
            .as_ms()
            .saturating_add(limit.saturating_mul(1000))
            .saturating_sub(u64::from(spec.seconds_before) * 1000);
        if now.as_ms() >= at && (batch_host || !spec.batch_only) {
            let scope = if spec.batch_only {
                SignalScope::Batch
            } else {
                SignalScope::Steps
            };
            due.push((spec.signal, scope));
        }
    }
    due
}

/// Which processes a preemption notice of `signal` reaches: the steps' tasks,
/// as Slurm's SIGTERM notice; the job's own `--signal=B:SIG`, sent in its
/// place, the batch shell.
fn notice_scope(job: &Job, signal: Signal) -> SignalScope {
    match &job.spec.signal {
        Some(spec) if spec.batch_only && spec.signal == signal => SignalScope::Batch,
        _ => SignalScope::Steps,
    }
}

/// Whether a signal of `scope` has anything to reach on `node`: the batch
/// shell runs on the batch host only; steps' tasks may run on any node.
fn node_is_reached(attempt: &Attempt, node: &str, scope: SignalScope) -> bool {
    scope.includes_steps() || attempt.batch_host() == Some(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::command::{CancelTarget, Command};
    use corral_state::slurm::signal::SignalSpec;
    use corral_state::testkit::{at, cluster, first_fit, ok, spec, start, submit, user};

    #[test]
    fn a_placed_attempt_is_launched_once_on_every_node_of_its_gang() {
        let mut s = cluster(2, 8);
        let id = submit(&mut s, spec("alice", 2, 8), at(1));
        let planned = first_fit(&s, id).unwrap();
        let nodes: Vec<String> = planned.nodes.iter().map(|n| n.node.clone()).collect();
        ok(
            &mut s,
            Command::ApplyPlan {
                allocations: vec![planned],
                preemptions: vec![],
                reasons: vec![],
                at: at(2),
            },
        );
        for node in &nodes {
            let mut memory = SessionMemory::default();
            let first = reconcile(&s, node, &memory, at(3));
            assert_eq!(first, vec![Instruction::Launch((id, 1))]);
            memory.sent(&first[0]);
            assert!(reconcile(&s, node, &memory, at(3)).is_empty());
        }
    }

    #[test]
    fn an_ending_attempt_is_killed_and_a_stray_one_too() {
        let mut s = cluster(2, 8);
        let id = submit(&mut s, spec("alice", 1, 8), at(1));
        let nodes = start(&mut s, id, at(2));
        ok(
            &mut s,
            Command::Cancel {
                target: CancelTarget::Job(id),
                by: user("alice"),
                at: at(3),
            },
        );
        let memory = SessionMemory {
            running: BTreeSet::from([(id, 1), (JobId(99), 4)]),
            ..SessionMemory::default()
        };
        let got = reconcile(&s, &nodes[0], &memory, at(4));
        assert_eq!(
            got,
            vec![
                Instruction::Kill((id, 1), Signal::TERM),
                Instruction::Kill((JobId(99), 4), Signal::TERM)
            ]
        );
    }

    #[test]
    fn a_started_attempt_the_agent_no_longer_holds_is_lost_only_after_a_later_heartbeat() {
        let mut s = cluster(2, 8);
        let id = submit(&mut s, spec("alice", 1, 8), at(1));
        let nodes = start(&mut s, id, at(2));
        let node = &nodes[0];
        let mut memory = SessionMemory::default();
        // A heartbeat from before the start was reported: only suspected.
        memory.heard([]);
        assert!(lost_attempts(&s, node, &mut memory).is_empty());
        assert!(
            lost_attempts(&s, node, &mut memory).is_empty(),
            "no newer heartbeat yet"
        );
        // The next heartbeat holds it: all is well.
        memory.heard([(id, 1)]);
        assert!(lost_attempts(&s, node, &mut memory).is_empty());
        assert!(memory.suspects.is_empty());
        // Gone from two heartbeats in a row: lost, once.
        memory.heard([]);
        assert!(lost_attempts(&s, node, &mut memory).is_empty());
        memory.heard([]);
        assert_eq!(lost_attempts(&s, node, &mut memory), vec![(id, 1)]);
        memory.heard([]);
        assert!(lost_attempts(&s, node, &mut memory).is_empty());
    }

    #[test]
    fn signal_before_the_time_limit_goes_out_once_when_due_and_only_to_the_batch_host_with_b() {
        let mut s = cluster(2, 8);
        let mut request = spec("alice", 2, 8);
        request.time_limit = Some(TimeLimit::Seconds(600));
        request.signal = Some(SignalSpec {
            signal: Signal::USR1,
            seconds_before: 60,
            batch_only: true,
            on_reservation_end: false,
        });
        let id = submit(&mut s, request, at(1));
        let nodes = start(&mut s, id, at(10));
        let memory = SessionMemory::default();
        // Started at 10 s with a 600 s limit: the signal is due at 550 s.
        assert!(reconcile(&s, &nodes[0], &memory, at(549)).is_empty());
        let due = reconcile(&s, &nodes[0], &memory, at(550));
        assert_eq!(
            due,
            vec![Instruction::Signal(
                (id, 1),
                Signal::USR1,
                SignalScope::Batch
            )]
        );
        assert!(
            reconcile(&s, &nodes[1], &memory, at(550)).is_empty(),
            "B: signals only the batch host"
        );
        let mut memory = memory;
        memory.sent(&due[0]);
        assert!(reconcile(&s, &nodes[0], &memory, at(551)).is_empty());
    }

    /// A preemption notice is Slurm's: SIGCONT then SIGTERM to the steps'
    /// tasks (not the batch shell), once; with the job's own `--signal` as
    /// the notice (`preempt_send_user_signal`), SIGCONT then that signal to
    /// what `--signal` names.
    #[test]
    fn a_preemption_notice_is_sigcont_then_the_notice_signal_once() {
        use corral_state::command::PlannedPreemption;
        let notice = |signal: Signal, batch_only: bool| {
            let mut s = cluster(1, 8);
            corral_state::testkit::add_urgent_partition(&mut s);
            let mut request = spec("alice", 1, 8);
            request.signal = Some(SignalSpec {
                signal: Signal::USR2,
                seconds_before: 90,
                batch_only,
                on_reservation_end: false,
            });
            let id = submit(&mut s, request, at(1));
            let mut urgent = spec("bob", 1, 8);
            urgent.partition = Some("urgent".into());
            let urgent = submit(&mut s, urgent, at(2));
            let nodes = start(&mut s, id, at(3));
            let later = at(3 + s.config().preempt_exempt_seconds);
            ok(
                &mut s,
                Command::ApplyPlan {
                    allocations: vec![],
                    preemptions: vec![PlannedPreemption {
                        job: id,
                        attempt: 1,
                        signal,
                        grace_seconds: 60,
                        for_job: urgent,
                    }],
                    reasons: vec![],
                    at: later,
                },
            );
            let mut memory = SessionMemory::default();
            memory.heard([(id, 1)]);
            let due = reconcile(&s, &nodes[0], &memory, later);
            for instruction in &due {
                memory.sent(instruction);
            }
            assert!(reconcile(&s, &nodes[0], &memory, later).is_empty());
            (id, due)
        };
        let (id, due) = notice(Signal::TERM, true);
        assert_eq!(
            due,
            vec![
                Instruction::Signal((id, 1), Signal::CONT, SignalScope::Steps),
                Instruction::Signal((id, 1), Signal::TERM, SignalScope::Steps),
            ]
        );
        let (id, due) = notice(Signal::USR2, true);
        assert_eq!(
            due,
            vec![
                Instruction::Signal((id, 1), Signal::CONT, SignalScope::Batch),
                Instruction::Signal((id, 1), Signal::USR2, SignalScope::Batch),
            ]
        );
        let (id, due) = notice(Signal::USR2, false);
        assert_eq!(
            due,
            vec![
                Instruction::Signal((id, 1), Signal::CONT, SignalScope::Steps),
                Instruction::Signal((id, 1), Signal::USR2, SignalScope::Steps),
            ]
        );
    }
}
