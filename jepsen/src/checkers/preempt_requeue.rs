//! Promise 10: a preempted attempt is requeued, once. However the attempt
//! ends in its grace (its tasks exit 0 after a checkpoint, exit non-zero, or
//! are killed at the deadline), the cluster ends it as `Preempted`, never as
//! the script's own success or failure, and the job gets exactly one next
//! attempt (unless it was cancelled while it waited for it). A cancel asked
//! for during the grace may end it `Cancelled` instead; a fault that cut one
//! of its nodes off may end it as that fault's cause. A scenario named
//! `preempt...` must have preempted something: a run in which nothing was
//! preempted proves nothing about preemption and fails.

use crate::attempts::Attempts;
use crate::history::{Call, EventKind, History};
use crate::verdict::Verdict;

/// The checker's name.
pub const NAME: &str = "preempt-requeue";
const PROMISE: &str = "a preempted attempt ends as preempted, whatever its tasks did in the grace, and is requeued once";

/// Checks the promise.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::new(NAME, PROMISE);
    let view = Attempts::of(history);
    let faults = crate::faults::of(history);
    let tolerance = history.header.clock_tolerance_ms;
    let grace = history.header.preemption.map_or(0, |p| p.grace_ms);
    let cancels = cancel_times(history);
    let mut requeued = 0u32;
    for (&(job, number), preemption) in &view.preemptions {
        let Some(record) = view.finals.get(&job) else {
            verdict.violation(
                None,
                Some(job),
                format!(
                    "job {job}.{number} was preempted, but the cluster has no record of job {job}"
                ),
            );
            continue;
        };
        let Some(attempt) = record.attempts.iter().find(|a| a.number == number) else {
            continue;
        };
        let (Some(cause), Some(end)) = (attempt.cause.as_deref(), attempt.end) else {
            // Still running at the end of the run: liveness says whether
            // that is allowed.
            continue;
        };
        let notice = preemption.deadline.saturating_sub(grace);
        let cancelled = cancels
            .iter()
            .any(|(j, t)| *j == job && *t <= end + tolerance);
        let cut_off = faults.iter().any(|f| {
            f.began <= end + tolerance
                && f.healed + tolerance >= notice
                && attempt
                    .allocation
                    .iter()
                    .any(|(node, _)| f.cut_off.contains(node))
        });
        let excused =
            (cause == "Cancelled" && cancelled) || (cut_off && !cause.starts_with("Exited"));
        if cause != "Preempted" && !excused {
            verdict.violation(
                Some(end),
                Some(job),
                format!(
                    "job {job}.{number} was preempted for job {} (deadline {} ms) and ended at {end} ms with {cause}, not as preempted",
                    preemption.for_job, preemption.deadline
                ),
            );
            continue;
        }
        if cause != "Preempted" {
            continue;
        }
        let next = record
            .attempts
            .iter()
            .filter(|a| a.number == number + 1)
            .count();
        let later_start = record
            .attempts
            .iter()
            .find(|a| a.number == number + 1)
            .and_then(|a| a.start);
        match next {
            1 => {
                requeued += 1;
                if later_start.is_some_and(|s| s + tolerance < end) {
                    verdict.violation(
                        later_start,
                        Some(job),
                        format!(
                            "job {job}.{} started before preempted attempt {number} ended ({end} ms)",
                            number + 1
                        ),
                    );
                }
            }
            0 if record.state == "CANCELLED" => {}
            0 => verdict.violation(
                Some(end),
                Some(job),
                format!(
                    "job {job}.{number} was preempted at {end} ms and not requeued: the job is {}",
                    record.state
                ),
            ),
            n => verdict.violation(
                Some(end),
                Some(job),
                format!(
                    "job {job}.{number} was preempted and followed by {n} attempts {}",
                    number + 1
                ),
            ),
        }
    }
    if history.header.scenario.starts_with("preempt") && view.preemptions.is_empty() {
        verdict.violation(
            None,
            None,
            format!(
                "scenario {} preempted no attempt: nothing here tests preemption",
                history.header.scenario
            ),
        );
    }
    verdict.measure("preempted", view.preemptions.len() as f64);
    verdict.measure("requeued_after_preemption", f64::from(requeued));
    verdict
}

/// When each job's cancellation was asked for (invoked).
pub(crate) fn cancel_times(history: &History) -> Vec<(u64, u64)> {
    history
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Invoke {
                call: Call::Cancel { job },
                ..
            } => Some((*job, e.t)),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{FinalAttempt, FinalJob};
    use crate::testing::Builder;

    /// Job 1: attempt 1 on gpu01, 1,000..`end` ms, ended with `cause`;
    /// attempt 2 from 8,000 ms when `rerun`.
    fn victim(cause: &str, end: u64, rerun: bool, state: &str) -> FinalJob {
        let mut attempts = vec![FinalAttempt {
            number: 1,
            allocation: vec![("gpu01".into(), vec![0])],
            start: Some(1_000),
            end: Some(end),
            cause: Some(cause.into()),
        }];
        if rerun {
            attempts.push(FinalAttempt {
                number: 2,
                allocation: vec![("gpu02".into(), vec![0])],
                start: Some(8_000),
                end: Some(9_000),
                cause: Some("Exited(0)".into()),
            });
        }
        FinalJob {
            job: 1,
            name: "w1".into(),
            state: state.into(),
            requeues: u32::from(rerun),
            attempts,
            gpu_ms: 0,
        }
    }

    #[test]
    fn a_preempted_attempt_requeued_once_passes() {
        let mut b = Builder::new();
        b.preempting("preempt")
            .preempted((1, 1), 2, 7_000)
            .final_job(victim("Preempted", 4_000, true, "COMPLETED"));
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("preempted"), Some(1.0));
        assert_eq!(verdict.measured("requeued_after_preemption"), Some(1.0));
    }

    #[test]
    fn a_preempted_attempt_ended_by_its_own_exit_is_caught() {
        let mut b = Builder::new();
        b.preempting("preempt")
            .preempted((1, 1), 2, 7_000)
            .final_job(victim("Exited(0)", 4_000, false, "COMPLETED"));
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(
            verdict.violations[0]
                .message
                .contains("ended at 4000 ms with Exited(0), not as preempted"),
            "{verdict:?}"
        );
    }

    #[test]
    fn a_preempted_attempt_not_requeued_is_caught_unless_cancelled() {
        let mut b = Builder::new();
        b.preempting("preempt")
            .preempted((1, 1), 2, 7_000)
            .final_job(victim("Preempted", 4_000, false, "FAILED"));
        let verdict = check(&b.history());
        assert!(
            format!("{verdict:?}").contains("not requeued: the job is FAILED"),
            "{verdict:?}"
        );
        let mut b = Builder::new();
        b.preempting("preempt")
            .preempted((1, 1), 2, 7_000)
            .final_job(victim("Preempted", 4_000, false, "CANCELLED"));
        assert!(check(&b.history()).holds());
    }

    #[test]
    fn a_preempt_scenario_that_preempted_nothing_fails_and_others_need_not() {
        let mut b = Builder::new();
        b.preempting("preempt-faults")
            .final_job(victim("Exited(0)", 4_000, false, "COMPLETED"));
        let verdict = check(&b.history());
        assert!(
            format!("{verdict:?}").contains("preempted no attempt"),
            "{verdict:?}"
        );
        let mut b = Builder::new();
        b.final_job(victim("Exited(0)", 4_000, false, "COMPLETED"));
        assert!(check(&b.history()).holds());
    }
}
