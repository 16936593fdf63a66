//! Promise 4: one requeue per failure. A job's attempts are numbered 1, 2, ...
//! without gaps; every attempt but the last ended with a cause that requeues
//! (a node failure, an XID, a preemption, a lost agent, an operator's
//! requeue), never with its batch script's own exit; the requeue count
//! matches; an attempt starts only once every rank of the attempts before it
//! has stopped (a job never runs twice at once); and no attempt whose batch
//! script recorded a clean exit ran
//! again (its ranks' exits are not enough: a node's agent may die with a
//! finished rank's exit status, and its attempt is then lost, rightly), unless
//! the exit happened on a node a fault cut off from the leader for longer
//! than the lease: the cluster then rightly declares the node down, never
//! hears of the exit, and requeues the job, as Slurm does; or unless it was
//! the attempt's answer to a preemption notice (an exit in the grace ends the
//! attempt as preempted, and the job is requeued).

use crate::attempts::Attempts;
use crate::history::History;
use crate::verdict::Verdict;

/// The checker's name.
pub const NAME: &str = "requeue";
const PROMISE: &str =
    "one requeue per failure: none doubled, none without a cause, never beside the last";

/// Whether an attempt that ended so is followed by another. `Exited(..)` is
/// the batch script's own end; `Cancelled` and `TimeLimit` end the job.
fn requeues(cause: &str) -> bool {
    !(cause.starts_with("Exited") || cause == "Cancelled" || cause == "TimeLimit")
}

/// Whether `t` falls in the grace of a preemption of `key` (from the notice,
/// the deadline less the grace, on).
fn in_grace(history: &History, view: &Attempts, key: (u64, u32), t: u64) -> bool {
    let grace = history.header.preemption.map_or(0, |p| p.grace_ms);
    view.preemptions
        .get(&key)
        .is_some_and(|p| t + history.header.clock_tolerance_ms >= p.deadline.saturating_sub(grace))
}

/// Checks the promise.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::new(NAME, PROMISE);
    let view = Attempts::of(history);
    let faults = crate::faults::of(history);
    let lease = history.header.lease_ms;
    let mut requeued = 0u32;
    for job in view.finals.values() {
        let numbers: Vec<u32> = job.attempts.iter().map(|a| a.number).collect();
        let expected: Vec<u32> = (1..=job.attempts.len() as u32).collect();
        if numbers != expected {
            verdict.violation(
                None,
                Some(job.job),
                format!(
                    "job {} has attempts {numbers:?}, not 1..{}",
                    job.job,
                    numbers.len()
                ),
            );
        }
        // Each attempt but the last was requeued; the last too when it ended
        // with a cause that requeues and the job then ended while pending
        // (cancelled before its next attempt started).
        let later = job.attempts.len().saturating_sub(1) as u32;
        let last_requeued = job
            .attempts
            .last()
            .and_then(|a| a.cause.as_deref())
            .is_some_and(requeues);
        requeued += job.requeues;
        if job.requeues != later && !(last_requeued && job.requeues == later + 1) {
            verdict.violation(
                None,
                Some(job.job),
                format!(
                    "job {} counts {} requeue(s) for {} attempt(s)",
                    job.job,
                    job.requeues,
                    job.attempts.len()
                ),
            );
        }
        for pair in job.attempts.windows(2) {
            let (before, after) = (&pair[0], &pair[1]);
            match before.cause.as_deref() {
                None => verdict.violation(
                    after.start,
                    Some(job.job),
                    format!(
                        "job {}: attempt {} began while attempt {} had not ended",
                        job.job, after.number, before.number
                    ),
                ),
                Some(cause) if !requeues(cause) => verdict.violation(
                    after.start,
                    Some(job.job),
                    format!(
                        "job {}: attempt {} ended with {cause}, yet attempt {} followed",
                        job.job, before.number, after.number
                    ),
                ),
                Some(_) => {}
            }
            // The job's own record of a clean end outweighs the cluster's cause.
            let clean_exit = view
                .observed
                .get(&(job.job, before.number))
                .and_then(|a| a.batch_exit.as_ref().map(|e| (e, a)))
                .filter(|((_, status), _)| *status == 0)
                .and_then(|((t, _), attempt)| {
                    let batch_node = attempt.ranks.get(&0).map(|r| r.node.as_str());
                    // Excused only when the cluster ended it as a node
                    // failure while the batch node was cut off.
                    let unheard = before.cause.as_deref() == Some("NodeFailure")
                        && batch_node.is_some_and(|node| {
                            crate::faults::cut_off_past_lease(&faults, node, *t, lease)
                        });
                    // And when the clean exit was the victim's answer to a
                    // preemption notice: an end in the grace is requeued.
                    let preempted = before.cause.as_deref() == Some("Preempted")
                        && in_grace(history, &view, (job.job, before.number), *t);
                    // And when the cluster had already ended the attempt
                    // (a node of it lost, say) before the script exited:
                    // the exit answered the attempt's kill.
                    let after_its_end = before.end.is_some_and(|end| *t >= end);
                    // And when an XID on one of its GPUs came first: the
                    // agent kills at the XID, before the leader records the
                    // end, and a script that exits meanwhile lost the race
                    // to its kill (seen in a soak: XID 13 at 109,320 ms, the
                    // script's exit 0 ten ms later).
                    let xid_first = before.cause.as_deref().is_some_and(|c| {
                        c.starts_with("ApplicationXid") || c.starts_with("GpuFailure")
                    }) && xid_on_before(&faults, &before.allocation, *t);
                    (!unheard && !preempted && !after_its_end && !xid_first).then_some(*t)
                });
            if let Some(t) = clean_exit {
                verdict.violation(
                    Some(t),
                    Some(job.job),
                    format!(
                        "job {}: attempt {} exited 0 at {t} ms and was run again as attempt {}",
                        job.job, before.number, after.number
                    ),
                );
            }
        }
    }
    // A job runs once at a time: an attempt starts only after every rank of
    // the attempts before it stopped.
    let tolerance = history.header.clock_tolerance_ms;
    for ((job, number), attempt) in &view.observed {
        let Some(started) = attempt.first_start() else {
            continue;
        };
        for ((_, earlier), before) in view.observed.range((*job, 0)..(*job, *number)) {
            for (rank, r) in &before.ranks {
                let until = view.rank_end(r);
                if until > started + tolerance {
                    verdict.violation(
                        Some(started),
                        Some(*job),
                        format!(
                            "job {job}: attempt {number} started at {started} ms while attempt {earlier}'s rank {rank} on {} still ran (until {until} ms)",
                            r.node
                        ),
                    );
                }
            }
        }
    }
    verdict.measure("requeues", f64::from(requeued));
    verdict
}

/// How soon after an XID the agent's kill may find a script still exiting.
const XID_KILL_WINDOW_MS: u64 = 5_000;

/// Whether an XID fault hit one of `allocation`'s GPUs at most
/// [`XID_KILL_WINDOW_MS`] before `t`.
fn xid_on_before(
    faults: &[crate::faults::Fault],
    allocation: &[(String, Vec<u32>)],
    t: u64,
) -> bool {
    faults.iter().any(|f| {
        f.kind.starts_with("xid")
            && f.began <= t
            && t - f.began <= XID_KILL_WINDOW_MS
            && allocation
                .iter()
                .any(|(node, gpus)| gpus.iter().any(|g| f.target == format!("{node} GPU {g}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{EventKind, FinalAttempt, FinalJob};
    use crate::testing::Builder;

    fn job(requeues: u32, attempts: &[(u32, Option<&str>)]) -> FinalJob {
        FinalJob {
            job: 1,
            name: "w1".into(),
            state: "COMPLETED".into(),
            requeues,
            attempts: attempts
                .iter()
                .map(|(number, cause)| FinalAttempt {
                    number: *number,
                    allocation: vec![],
                    start: Some(u64::from(*number) * 1_000),
                    end: cause.map(|_| u64::from(*number) * 1_000 + 500),
                    cause: cause.map(str::to_string),
                })
                .collect(),
            gpu_ms: 0,
        }
    }

    #[test]
    fn one_requeue_per_failure_passes() {
        let mut b = Builder::new();
        b.final_job(job(
            2,
            &[
                (1, Some("NodeFailure")),
                (2, Some("Xid(79)")),
                (3, Some("Exited(0)")),
            ],
        ));
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("requeues"), Some(2.0));
    }

    #[test]
    fn a_job_cancelled_while_pending_after_a_requeue_counts_that_requeue() {
        let mut b = Builder::new();
        let mut cancelled = job(1, &[(1, Some("GpuFailure"))]);
        cancelled.state = "CANCELLED".into();
        b.final_job(cancelled);
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
    }

    #[test]
    fn a_requeue_without_a_cause_and_a_miscount_are_caught() {
        let mut b = Builder::new();
        b.final_job(job(3, &[(1, Some("Exited(0)")), (2, Some("Exited(0)"))]));
        let verdict = check(&b.history());
        let text = format!("{:?}", verdict.violations);
        assert!(
            text.contains("counts 3 requeue(s) for 2 attempt(s)"),
            "{text}"
        );
        assert!(
            text.contains("ended with Exited(0), yet attempt 2 followed"),
            "{text}"
        );
    }

    /// Job 1's first attempt on gpu01: started at 900 ms, its rank and its
    /// batch script exiting 0 at 1,400 ms.
    fn clean_first_attempt(b: &mut Builder) -> &mut Builder {
        b.start(900, (1, 1), "gpu01", (0, 1), &[0], None)
            .exit(1_400, (1, 1), "gpu01", 0, 0)
            .event(
                1_400,
                EventKind::BatchExit {
                    job: 1,
                    attempt: 1,
                    node: "gpu01".into(),
                    status: 0,
                },
            )
    }

    /// Seen in a soak: XID 13 on a GPU of the attempt at 109,320 ms, the
    /// script's exit 0 ten ms later, before the leader recorded the end the
    /// agent's kill reported. The requeue was right; an XID on another GPU
    /// excuses nothing.
    #[test]
    fn a_clean_exit_that_lost_the_race_to_an_xid_kill_is_no_violation() {
        let with_xid_on = |target: &str| {
            let mut b = Builder::new();
            clean_first_attempt(&mut b)
                .event(
                    1_390,
                    EventKind::FaultBegin {
                        fault: 1,
                        kind: "xid-13".into(),
                        target: target.into(),
                        cut_off: Vec::new(),
                    },
                )
                .event(1_391, EventKind::FaultHealed { fault: 1 });
            let mut final_job = job(1, &[(1, Some("ApplicationXid")), (2, Some("Exited(0)"))]);
            final_job.attempts[0].allocation = vec![("gpu01".into(), vec![0])];
            final_job.attempts[0].end = Some(1_500);
            b.final_job(final_job);
            check(&b.history())
        };
        let verdict = with_xid_on("gpu01 GPU 0");
        assert!(verdict.violations.is_empty(), "{verdict:?}");
        let elsewhere = with_xid_on("gpu01 GPU 3");
        assert_eq!(elsewhere.violations.len(), 1, "{elsewhere:?}");
    }

    /// Seen in a soak: the other node of a two-node attempt was declared
    /// down at 113,353 ms; the batch script, killed for it, exited 0 six ms
    /// later. The requeue was right.
    #[test]
    fn a_clean_exit_after_the_cluster_ended_the_attempt_answers_its_kill() {
        let mut b = Builder::new();
        b.start(900, (1, 1), "gpu01", (0, 1), &[0], None)
            .exit(1_506, (1, 1), "gpu01", 0, 0)
            .event(
                1_506,
                EventKind::BatchExit {
                    job: 1,
                    attempt: 1,
                    node: "gpu01".into(),
                    status: 0,
                },
            )
            .final_job(job(1, &[(1, Some("NodeFailure")), (2, Some("Exited(0)"))]));
        let verdict = check(&b.history());
        assert!(verdict.violations.is_empty(), "{verdict:?}");
    }

    #[test]
    fn a_cleanly_exited_attempt_run_again_is_caught_from_the_jobs_own_record() {
        let mut b = Builder::new();
        clean_first_attempt(&mut b)
            .final_job(job(1, &[(1, Some("NodeFailure")), (2, Some("Exited(0)"))]));
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(
            verdict.violations[0]
                .message
                .contains("exited 0 at 1400 ms and was run again")
        );
    }

    #[test]
    fn a_clean_exit_on_a_node_cut_off_past_the_lease_may_run_again_and_not_a_shorter_cut() {
        for (healed, caught) in [(21_000, false), (5_000, true)] {
            let mut b = Builder::new();
            b.event(
                1_000,
                EventKind::FaultBegin {
                    fault: 1,
                    kind: "isolate-agent".into(),
                    target: "agent-gpu01".into(),
                    cut_off: vec!["gpu01".into()],
                },
            );
            clean_first_attempt(&mut b)
                .event(healed, EventKind::FaultHealed { fault: 1 })
                .final_job(job(1, &[(1, Some("NodeFailure")), (2, Some("Exited(0)"))]));
            let verdict = check(&b.history());
            assert_eq!(!verdict.violations.is_empty(), caught, "{verdict:?}");
        }
    }

    #[test]
    fn a_clean_exit_in_a_preemptions_grace_is_requeued_rightly_and_not_before_it() {
        // Notice at 1,000 ms (deadline 5,000 ms, 4 s of grace); the batch
        // script exits 0 at 1,400 ms: in the grace. With the notice later
        // (deadline 9,000: notice at 5,000) the same exit came first.
        for (deadline, caught) in [(5_000, false), (9_000, true)] {
            let mut b = Builder::new();
            b.preempting("preempt");
            clean_first_attempt(&mut b)
                .preempted((1, 1), 7, deadline)
                .final_job(job(1, &[(1, Some("Preempted")), (2, Some("Exited(0)"))]));
            let verdict = check(&b.history());
            assert_eq!(!verdict.violations.is_empty(), caught, "{verdict:?}");
        }
    }

    #[test]
    fn a_lost_attempt_whose_ranks_finished_may_run_again() {
        // Both ranks exited 0, but the batch script never did (a node's
        // agent died with its rank's exit status): lost, and rerun.
        let mut b = Builder::new();
        b.start(900, (1, 1), "gpu01", (0, 2), &[0], None)
            .start(900, (1, 1), "gpu02", (1, 2), &[0], None)
            .exit(1_300, (1, 1), "gpu02", 1, 0)
            .exit(1_400, (1, 1), "gpu01", 0, 0)
            .final_job(job(1, &[(1, Some("NodeFailure")), (2, Some("Exited(0)"))]));
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
    }

    #[test]
    fn an_attempt_started_beside_the_one_before_is_caught() {
        let mut b = Builder::new();
        b.start(900, (1, 1), "gpu01", (0, 1), &[0], None)
            .step(16_000, (1, 1), 0, 150)
            .start(15_000, (1, 2), "gpu02", (0, 1), &[0], None)
            .exit(20_000, (1, 2), "gpu02", 0, 0)
            .final_job(job(1, &[(1, Some("NodeFailure")), (2, Some("Exited(0)"))]));
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(
            verdict.violations[0]
                .message
                .contains("attempt 2 started at 15000 ms while attempt 1's rank 0 on gpu01 still ran (until 16000 ms)"),
            "{verdict:?}"
        );
    }

    #[test]
    fn gaps_and_overlapping_attempts_are_caught() {
        let mut b = Builder::new();
        b.final_job(job(2, &[(1, None), (3, Some("Exited(0)"))]));
        let verdict = check(&b.history());
        let text = format!("{:?}", verdict.violations);
        assert!(text.contains("attempts [1, 3]"), "{text}");
        assert!(text.contains("had not ended"), "{text}");
    }
}
