//! Promise 9: per-job linearizable reads. Each job is a register whose value
//! only moves forward (requeues, then attempts, then the state's place in a
//! job's life: pending, running, completing, ended); the cluster changes it,
//! clients only read it. A read may see any value the job held while the
//! read was in flight, so a read never returns a value older than one a read
//! that completed before it began already saw. Each job's reads are checked
//! with the Wing–Gong/Lowe search in [`crate::linearizability`]. A read
//! that began after the job's submission was acknowledged and answered
//! without the job (a stale replica's answer) is a violation too: the job
//! existed before the read began.

use std::collections::BTreeMap;

use crate::history::{Call, EventKind, History, JobView, Reply};
use crate::linearizability::{Model, Timed, linearize};
use crate::verdict::Verdict;

/// The checker's name.
pub const NAME: &str = "reads";
const PROMISE: &str = "per-job reads are linearizable (never older than a completed read)";

/// Where a job is in its life, ordered.
pub type Version = (u32, u32, u8);

/// The order of a job's states within one attempt.
fn phase(state: &str) -> u8 {
    match state {
        "PENDING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" => 0,
        "CONFIGURING" | "RUNNING" | "SUSPENDED" | "RESIZING" => 1,
        "COMPLETING" | "STAGE_OUT" => 2,
        _ => 3,
    }
}

/// A job view's place in the job's life.
pub fn version(view: &JobView) -> Version {
    (view.requeues, view.attempts, phase(&view.state))
}

/// A job that moves forward unseen: a read of `v` is possible in state `s`
/// when `v >= s`, and moves it to `v`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Forward(Version);

impl Model for Forward {
    type Op = Version;
    fn step(&self, read: &Version) -> Option<Self> {
        (*read >= self.0).then_some(Forward(*read))
    }
}

/// Checks the promise.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::new(NAME, PROMISE);
    let mut invoked: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let mut reads: BTreeMap<u64, Vec<Timed<Version>>> = BTreeMap::new();
    let mut acknowledged: BTreeMap<u64, u64> = BTreeMap::new();
    let mut not_found = 0u32;
    for event in &history.events {
        match &event.kind {
            EventKind::Ok {
                reply: Reply::Submitted { job },
                ..
            } => {
                acknowledged.entry(*job).or_insert(event.t);
            }
            EventKind::Ok {
                op,
                reply: Reply::NotFound,
                ..
            } => {
                let Some((job, t)) = invoked.remove(op) else {
                    continue;
                };
                not_found += 1;
                if let Some(acked) = acknowledged.get(&job).filter(|acked| **acked < t) {
                    verdict.violation(
                        Some(t),
                        Some(job),
                        format!(
                            "job {job}: a read at {t}..{} ms did not find it, though its submission was acknowledged at {acked} ms",
                            event.t
                        ),
                    );
                }
            }
            EventKind::Invoke {
                op,
                call: Call::Read { job },
                ..
            } => {
                invoked.insert(*op, (*job, event.t));
            }
            EventKind::Ok {
                op,
                reply: Reply::Read(view),
                ..
            } => {
                if let Some((job, t)) = invoked.remove(op) {
                    reads.entry(job).or_default().push(Timed {
                        invoked: t,
                        completed: event.t,
                        op: version(view),
                    });
                }
            }
            _ => {}
        }
    }
    let total: usize = reads.values().map(Vec::len).sum();
    for (job, ops) in &reads {
        if linearize(&Forward((0, 0, 0)), ops).is_ok() {
            continue;
        }
        // Name the pair that shows it: a read that began after another had
        // completed, yet saw an older value.
        let inversion = ops.iter().find_map(|later| {
            ops.iter()
                .find(|earlier| earlier.completed < later.invoked && later.op < earlier.op)
                .map(|earlier| (earlier, later))
        });
        let message = match inversion {
            Some((earlier, later)) => format!(
                "job {job}: a read at {}..{} ms saw {:?} after a read that completed at {} ms had seen {:?}",
                later.invoked, later.completed, later.op, earlier.completed, earlier.op
            ),
            None => format!("job {job}: its reads have no order consistent with real time"),
        };
        verdict.violation(
            inversion.map(|(_, later)| later.invoked),
            Some(*job),
            message,
        );
    }
    verdict.measure("reads", total as f64);
    verdict.measure("jobs_read", reads.len() as f64);
    verdict.measure("reads_not_found", f64::from(not_found));
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Builder;

    #[test]
    fn reads_that_move_forward_or_overlap_pass() {
        let mut b = Builder::new();
        b.read(1, 7, 10, 20, ("PENDING", 0, 0))
            .read(2, 7, 30, 40, ("RUNNING", 1, 0))
            // Overlapping reads may see the job either side of a change.
            .read(3, 7, 50, 90, ("COMPLETING", 1, 0))
            .read(4, 7, 60, 70, ("RUNNING", 1, 0))
            .read(5, 7, 100, 110, ("PENDING", 1, 1))
            .read(6, 7, 120, 130, ("RUNNING", 2, 1));
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("reads"), Some(6.0));
    }

    #[test]
    fn a_read_older_than_a_completed_one_is_caught() {
        let mut b = Builder::new();
        b.read(1, 7, 10, 20, ("RUNNING", 1, 0))
            // A follower that lags: the job back in PENDING, attempt 0.
            .read(2, 7, 30, 40, ("PENDING", 0, 0))
            .read(3, 8, 30, 40, ("PENDING", 0, 0));
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(
            verdict.violations[0]
                .message
                .contains("job 7: a read at 30..40 ms saw (0, 0, 0) after a read that completed at 20 ms had seen (0, 1, 1)"),
            "{verdict:?}"
        );
    }

    /// A stale replica that has not applied the submission yet answers a
    /// read without the job: once the submission was acknowledged, that is
    /// a stale read, not information.
    #[test]
    fn a_read_that_misses_an_acknowledged_job_is_caught() {
        let not_found = |b: &mut Builder, op: u64, (from, to): (u64, u64)| {
            b.event(
                from,
                EventKind::Invoke {
                    process: 9,
                    op,
                    call: Call::Read { job: 7 },
                },
            )
            .event(
                to,
                EventKind::Ok {
                    process: 9,
                    op,
                    replica: None,
                    reply: Reply::NotFound,
                },
            );
        };
        let mut b = Builder::new();
        // Before the acknowledgement the job may rightly not be there yet.
        not_found(&mut b, 100, (5, 8));
        b.submit(1, "w1", 10, Some(7));
        not_found(&mut b, 101, (30, 40));
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(verdict.violations[0].message.contains("did not find it"));
        assert_eq!(verdict.measured("reads_not_found"), Some(2.0));
    }
}
