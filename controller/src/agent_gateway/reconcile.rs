//! What one node's agent should be told, from committed state alone: launch the
//! attempts placed on it, signal those under a preemption notice or nearing their
//! time limit (`--signal`), and kill those that are ending or that the state no
//! longer knows. Pure: the session remembers what it already sent, so each
//! instruction goes out once per connection.

use std::collections::BTreeSet;

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
}

impl SessionMemory {
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

/// Signals the attempt should have received by `now` on `node`, and which of
/// its processes each reaches: a preemption notice reaches all of them;
/// `--signal=SIG` reaches the steps' tasks, `--signal=B:SIG` only the batch
/// shell (as in Slurm).
fn signals_due(
    job: &Job,
    attempt: &Attempt,
    node: &str,
    now: Timestamp,
) -> Vec<(Signal, SignalScope)> {
    let mut due = Vec::new();
    if let Some(notice) = &attempt.preemption {
        due.push((notice.signal, SignalScope::Full));
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
}
