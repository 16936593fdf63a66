//! Promise 5: every attempt after the first resumes from at least the last
//! checkpoint committed before the failure (`CORRAL_RESUME_FROM`), never
//! from scratch when one exists, and never from one no attempt wrote. (A
//! checkpoint may be committed without its rank learning so, killed while it
//! waited for the answer: written is what the history can hold it to.)

use crate::attempts::Attempts;
use crate::history::History;
use crate::verdict::Verdict;

/// The checker's name.
pub const NAME: &str = "resume";
const PROMISE: &str = "every requeued attempt resumes from the last committed checkpoint";

/// Checks the promise.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::new(NAME, PROMISE);
    let view = Attempts::of(history);
    let tolerance = history.header.clock_tolerance_ms;
    let (mut resumed, mut lost_steps_total) = (0u32, 0u64);
    for ((job, number), attempt) in &view.observed {
        if *number < 2 {
            continue;
        }
        let Some(started) = attempt.first_start() else {
            continue;
        };
        // The failure ended the previous attempt; a checkpoint committed up
        // to then must be resumed from.
        let failed_at = view
            .final_attempt((*job, number - 1))
            .and_then(|a| a.end)
            .unwrap_or(started)
            .min(started);
        let committed: Vec<(u64, u64)> = view
            .observed
            .range((*job, 0)..(*job, *number))
            .flat_map(|(_, a)| a.checkpoints.iter().copied())
            .collect();
        let required = committed
            .iter()
            .filter(|(t, _)| *t <= failed_at + tolerance)
            .map(|(_, step)| *step)
            .max();
        for (rank, r) in &attempt.ranks {
            match (required, r.resumed_from) {
                (Some(step), None) => verdict.violation(
                    Some(r.started),
                    Some(*job),
                    format!(
                        "job {job}.{number} rank {rank} started from scratch; checkpoint {step} had been committed"
                    ),
                ),
                (Some(step), Some(from)) if from < step => verdict.violation(
                    Some(r.started),
                    Some(*job),
                    format!(
                        "job {job}.{number} rank {rank} resumed from {from}, behind committed checkpoint {step}"
                    ),
                ),
                _ => {}
            }
            if let Some(from) = r.resumed_from {
                // Written before this rank started (a leftover of an ended
                // attempt writing later does not count).
                let written = view
                    .observed
                    .range((*job, 0)..(*job, *number))
                    .flat_map(|(_, a)| a.written.iter())
                    .any(|(t, step)| *step == from && *t <= r.started + tolerance);
                if !written {
                    verdict.violation(
                        Some(r.started),
                        Some(*job),
                        format!(
                            "job {job}.{number} rank {rank} resumed from {from}, which no attempt had written"
                        ),
                    );
                }
                if let Some(step) = required {
                    lost_steps_total += step.saturating_sub(from);
                }
            }
        }
        resumed += 1;
    }
    verdict.measure("resumed_attempts", f64::from(resumed));
    verdict.measure("steps_behind_total", lost_steps_total as f64);
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Builder;

    fn base() -> Builder {
        let mut b = Builder::new();
        b.start(100, (1, 1), "gpu01", (0, 1), &[0], None)
            .checkpoint(1_000, (1, 1), 10)
            .checkpoint(2_000, (1, 1), 20);
        b
    }

    #[test]
    fn resuming_from_the_last_committed_checkpoint_passes() {
        let mut b = base();
        b.start(5_000, (1, 2), "gpu02", (0, 1), &[0], Some(20))
            .start(5_000, (2, 2), "gpu03", (0, 1), &[0], None);
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("resumed_attempts"), Some(2.0));
    }

    #[test]
    fn restarting_from_scratch_or_from_an_old_checkpoint_is_caught() {
        let mut b = base();
        b.start(5_000, (1, 2), "gpu02", (0, 1), &[0], None)
            .checkpoint(6_000, (1, 2), 30)
            .start(9_000, (1, 3), "gpu02", (0, 1), &[0], Some(20));
        let verdict = check(&b.history());
        let text = format!("{:?}", verdict.violations);
        assert!(
            text.contains("1.2 rank 0 started from scratch; checkpoint 20"),
            "{text}"
        );
        assert!(
            text.contains("1.3 rank 0 resumed from 20, behind committed checkpoint 30"),
            "{text}"
        );
        assert_eq!(verdict.violations.len(), 2, "{text}");
    }

    #[test]
    fn the_checkpoint_a_preempted_attempt_committed_in_its_grace_is_resumed_from() {
        // Notice at 2,500 ms: the trap commits step 24 at 2,600 ms and the
        // attempt ends (preempted) at 2,700 ms. Resuming from 20 loses it.
        for (from, caught) in [(24, false), (20, true)] {
            let mut b = base();
            b.preempting("preempt")
                .notice(2_550, (1, 1), 0, false)
                .checkpoint(2_600, (1, 1), 24)
                .final_job(crate::history::FinalJob {
                    job: 1,
                    name: "w1".into(),
                    state: "RUNNING".into(),
                    requeues: 1,
                    attempts: vec![crate::history::FinalAttempt {
                        number: 1,
                        allocation: vec![("gpu01".into(), vec![0])],
                        start: Some(100),
                        end: Some(2_700),
                        cause: Some("Preempted".into()),
                    }],
                    gpu_ms: 0,
                })
                .start(5_000, (1, 2), "gpu02", (0, 1), &[0], Some(from));
            let verdict = check(&b.history());
            assert_eq!(!verdict.holds(), caught, "{verdict:?}");
            if caught {
                assert!(
                    format!("{verdict:?}")
                        .contains("resumed from 20, behind committed checkpoint 24"),
                    "{verdict:?}"
                );
            }
        }
    }

    #[test]
    fn resuming_from_a_checkpoint_never_written_is_caught() {
        let mut b = base();
        b.start(5_000, (1, 2), "gpu02", (0, 1), &[0], Some(25));
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(
            verdict.violations[0]
                .message
                .contains("which no attempt had written")
        );
    }

    #[test]
    fn resuming_from_a_checkpoint_written_but_not_known_committed_passes() {
        // Rank 0 wrote 30 and was killed waiting for the commit's answer;
        // the cluster had committed it.
        let mut b = base();
        b.event(
            2_500,
            crate::history::EventKind::CheckpointWritten {
                job: 1,
                attempt: 1,
                step: 30,
            },
        )
        .start(5_000, (1, 2), "gpu02", (0, 1), &[0], Some(30));
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
    }

    #[test]
    fn resuming_from_a_checkpoint_written_only_after_the_start_is_caught() {
        let mut b = base();
        b.start(5_000, (1, 2), "gpu02", (0, 1), &[0], Some(30))
            .event(
                9_000,
                crate::history::EventKind::CheckpointWritten {
                    job: 1,
                    attempt: 1,
                    step: 30,
                },
            );
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
    }
}
