//! Promise 6: accounting equals the sum over attempts of runtime × GPUs. Two
//! checks: what the cluster charged a job equals the sum over its recorded
//! attempts of (end − start) × GPUs, within the clock tolerance per attempt;
//! and each recorded attempt covers what its ranks observed of their own run
//! (the cluster never charges for less than the GPUs were used), except that
//! an end the cluster decided is charged up to the decision, and its ranks
//! may take up to the lease to die (from the heal, on a node cut off with a
//! majority of the nodes, which keeps its jobs until then).

use crate::attempts::Attempts;
use crate::history::History;
use crate::verdict::Verdict;

/// The checker's name.
pub const NAME: &str = "accounting";
const PROMISE: &str = "charged GPU time = sum over attempts of runtime x GPUs";

/// Checks the promise.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::new(NAME, PROMISE);
    let view = Attempts::of(history);
    let tolerance = history.header.clock_tolerance_ms;
    let run_end = history.end();
    let faults = crate::faults::of(history);
    let nodes = crate::faults::nodes_named(history).len();
    let (mut charged_total, mut expected_total, mut worst) = (0u64, 0u64, 0u64);
    for job in view.finals.values() {
        let mut expected = 0u64;
        let mut slack = 0u64;
        for attempt in &job.attempts {
            let gpus: u64 = attempt.allocation.iter().map(|(_, g)| g.len() as u64).sum();
            let (Some(start), end) = (attempt.start, attempt.end) else {
                continue;
            };
            let end = end.unwrap_or(run_end);
            expected += end.saturating_sub(start) * gpus;
            slack += 2 * tolerance * gpus;
            let Some(observed) = view.observed.get(&(job.job, attempt.number)) else {
                continue;
            };
            // An end the cluster decided (a cancel, a node failure, an XID)
            // is charged up to the decision, as Slurm does; the ranks die
            // once the kill reaches them, within the lease.
            let decided = !attempt
                .cause
                .as_deref()
                .is_some_and(|c| c.starts_with("Exited"));
            let late = if decided { history.header.lease_ms } else { 0 } + tolerance;
            for (rank, r) in &observed.ranks {
                let ran_until = view.rank_end(r);
                let heard = if decided {
                    crate::faults::kept_by_majority_until(&faults, &r.node, end, nodes)
                        .unwrap_or(end)
                        .max(end)
                } else {
                    end
                };
                if r.started + tolerance < start || ran_until > heard + late {
                    verdict.violation(
                        Some(r.started),
                        Some(job.job),
                        format!(
                            "job {}.{} rank {rank} ran {}..{} ms, outside the recorded {start}..{end} ms",
                            job.job, attempt.number, r.started, ran_until
                        ),
                    );
                }
            }
        }
        let difference = job.gpu_ms.abs_diff(expected);
        worst = worst.max(difference);
        charged_total += job.gpu_ms;
        expected_total += expected;
        if difference > slack {
            verdict.violation(
                None,
                Some(job.job),
                format!(
                    "job {} was charged {} GPU-ms; its attempts ran {expected} GPU-ms",
                    job.job, job.gpu_ms
                ),
            );
        }
    }
    verdict.measure("charged_gpu_s", charged_total as f64 / 1000.0);
    verdict.measure("attempts_gpu_s", expected_total as f64 / 1000.0);
    verdict.measure("max_job_difference_gpu_ms", worst as f64);
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{FinalAttempt, FinalJob};
    use crate::testing::Builder;

    fn job(gpu_ms: u64) -> FinalJob {
        let attempt = |number, start, end| FinalAttempt {
            number,
            allocation: vec![("gpu01".into(), vec![0, 1]), ("gpu02".into(), vec![0, 1])],
            start: Some(start),
            end: Some(end),
            cause: Some("NodeFailure".into()),
        };
        FinalJob {
            job: 1,
            name: "w1".into(),
            state: "COMPLETED".into(),
            requeues: 1,
            attempts: vec![attempt(1, 1_000, 3_000), attempt(2, 5_000, 6_000)],
            gpu_ms,
        }
    }

    #[test]
    fn charges_matching_the_attempts_pass() {
        let mut b = Builder::new();
        b.start(1_100, (1, 1), "gpu01", (0, 2), &[0, 1], None)
            .exit(2_900, (1, 1), "gpu01", 0, 1)
            .final_job(job(4 * 2_000 + 4 * 1_000 + 300));
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("attempts_gpu_s"), Some(12.0));
    }

    #[test]
    fn a_double_charge_is_caught() {
        let mut b = Builder::new();
        b.final_job(job(2 * (4 * 2_000 + 4 * 1_000)));
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(
            verdict.violations[0]
                .message
                .contains("charged 24000 GPU-ms")
        );
    }

    #[test]
    fn ranks_of_a_decided_end_may_die_within_the_lease() {
        let mut b = Builder::new();
        b.start(1_100, (1, 1), "gpu02", (1, 2), &[0, 1], None)
            .step(3_600, (1, 1), 1, 25)
            .final_job(job(12_000));
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
    }

    #[test]
    fn a_rank_running_past_its_recorded_exit_is_caught() {
        let mut b = Builder::new();
        let mut exited = job(12_000);
        exited.attempts[0].cause = Some("Exited(0)".into());
        b.start(1_100, (1, 1), "gpu02", (1, 2), &[0, 1], None)
            .exit(4_500, (1, 1), "gpu02", 1, 0)
            .final_job(exited);
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(
            verdict.violations[0]
                .message
                .contains("outside the recorded 1000..3000 ms")
        );
    }
}
