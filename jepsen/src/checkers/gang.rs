//! Promise 3: a gang runs all or none. Every rank of an attempt that ran to
//! its end started; and when one rank fails (exits non-zero, or an attempt
//! ends while ranks still run), every other rank ends too: none keeps running
//! past the attempt's end in the cluster's record by more than the bound.
//! In calm (no fault from a lease before the end to the rank's own end, and
//! no preemption site, whose trainers may trap the SIGTERM) the bound is
//! [`CALM_BOUND_MS`]: the ranks die on the SIGTERM the agents or `srun`
//! send at once, and a trainer runs 3-9 s, so a rank left running shows.
//! Otherwise it is the lease: a cut-off node's ranks end when its lease runs
//! out; a node cut off with a majority of the nodes keeps its jobs until the
//! heal, and the lease counts from there.

use crate::attempts::Attempts;
use crate::history::History;
use crate::verdict::Verdict;

/// The checker's name.
pub const NAME: &str = "gang";
const PROMISE: &str = "every rank of an attempt starts or none does; a failed rank ends all";

/// How long past the attempt's end a rank may run when nothing else is
/// going on: the kill's way from the leader (or `srun`) to the rank, and the
/// rank's and the record's clocks.
pub const CALM_BOUND_MS: u64 = 4_000;

/// Checks the promise.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::new(NAME, PROMISE);
    let view = Attempts::of(history);
    let lease = history.header.lease_ms;
    let bound = lease + history.header.clock_tolerance_ms;
    let calm_site = history.header.preemption.is_none();
    let faults = crate::faults::of(history);
    let nodes = crate::faults::nodes_named(history).len();
    let mut gangs = 0u32;
    let mut worst_straggle = 0u64;
    for (key, attempt) in &view.observed {
        if attempt.ranks.is_empty() {
            continue;
        }
        if attempt.nodes > 1 {
            gangs += 1;
        }
        let recorded = view.final_attempt(*key);
        let completed = recorded
            .and_then(|a| a.cause.as_deref())
            .is_some_and(|cause| cause == "Exited(0)");
        let missing: Vec<u32> = (0..attempt.nodes)
            .filter(|rank| !attempt.ranks.contains_key(rank))
            .collect();
        if completed && !missing.is_empty() {
            verdict.violation(
                attempt.first_start(),
                Some(key.0),
                format!(
                    "job {}.{} completed although rank(s) {missing:?} of {} never started",
                    key.0, key.1, attempt.nodes
                ),
            );
        }
        // The attempt's end: the first failed rank, else the cluster's record.
        let failed = attempt
            .ranks
            .iter()
            .filter_map(|(rank, r)| {
                r.exited
                    .filter(|(_, status)| *status != 0)
                    .map(|(t, _)| (t, *rank))
            })
            .min();
        let ended = match (failed.map(|(t, _)| t), recorded.and_then(|a| a.end)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let Some(ended) = ended else { continue };
        for (rank, r) in &attempt.ranks {
            let until = view.rank_end(r);
            if until > ended {
                let straggle = until - ended;
                worst_straggle = worst_straggle.max(straggle);
                let heard = crate::faults::kept_by_majority_until(&faults, &r.node, ended, nodes)
                    .unwrap_or(ended);
                let calm = calm_site
                    && !faults.iter().any(|f| {
                        f.began <= until && ended.saturating_sub(lease) <= f.healed + lease
                    });
                let allowed = if calm { CALM_BOUND_MS } else { bound };
                if until > heard.max(ended) + allowed {
                    let why = match failed {
                        Some((_, failed_rank)) => format!("rank {failed_rank} failed"),
                        None => "the attempt ended".to_string(),
                    };
                    verdict.violation(
                        Some(ended),
                        Some(key.0),
                        format!(
                            "job {}.{}: rank {rank} on {} ran {straggle} ms after {why} ({} allow {allowed} ms)",
                            key.0,
                            key.1,
                            r.node,
                            if calm { "calm times" } else { "faults" }
                        ),
                    );
                }
            }
        }
    }
    verdict.measure("gang_attempts", f64::from(gangs));
    verdict.measure("max_rank_straggle_ms", worst_straggle as f64);
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{EventKind, FinalAttempt, FinalJob};
    use crate::testing::Builder;

    fn record(job: u64, attempts: Vec<(u32, u64, &str)>) -> FinalJob {
        FinalJob {
            job,
            name: format!("w{job}"),
            state: "COMPLETED".into(),
            requeues: attempts.len() as u32 - 1,
            attempts: attempts
                .into_iter()
                .map(|(number, end, cause)| FinalAttempt {
                    number,
                    allocation: vec![],
                    start: Some(0),
                    end: Some(end),
                    cause: Some(cause.into()),
                })
                .collect(),
            gpu_ms: 0,
        }
    }

    #[test]
    fn a_gang_whose_ranks_fail_together_passes() {
        let mut b = Builder::new();
        b.start(100, (1, 1), "gpu01", (0, 2), &[0], None)
            .start(110, (1, 1), "gpu02", (1, 2), &[0], None)
            .exit(1_000, (1, 1), "gpu02", 1, 1)
            .exit(1_200, (1, 1), "gpu01", 0, 1)
            .start(2_000, (1, 2), "gpu01", (0, 2), &[0], None)
            .start(2_010, (1, 2), "gpu03", (1, 2), &[0], None)
            .exit(3_000, (1, 2), "gpu01", 0, 0)
            .exit(3_000, (1, 2), "gpu03", 1, 0)
            .final_job(record(
                1,
                vec![(1, 1_300, "NodeFailure"), (2, 3_010, "Exited(0)")],
            ));
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("gang_attempts"), Some(2.0));
    }

    #[test]
    fn a_completed_gang_with_a_rank_that_never_started_is_caught() {
        let mut b = Builder::new();
        b.start(100, (1, 1), "gpu01", (0, 3), &[0], None)
            .start(100, (1, 1), "gpu02", (2, 3), &[0], None)
            .exit(500, (1, 1), "gpu01", 0, 0)
            .exit(500, (1, 1), "gpu02", 2, 0)
            .final_job(record(1, vec![(1, 510, "Exited(0)")]));
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(
            verdict.violations[0]
                .message
                .contains("rank(s) [1] of 3 never started")
        );
    }

    #[test]
    fn a_rank_left_running_after_its_peer_failed_is_caught() {
        let mut b = Builder::new();
        b.start(100, (1, 1), "gpu01", (0, 2), &[0], None)
            .start(100, (1, 1), "gpu02", (1, 2), &[0], None)
            .exit(1_000, (1, 1), "gpu02", 1, 137)
            .exit(40_000, (1, 1), "gpu01", 0, 0)
            .final_job(record(1, vec![(1, 1_100, "NodeFailure")]));
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(
            verdict.violations[0]
                .message
                .contains("rank 0 on gpu01 ran 39000 ms after rank 1 failed"),
            "{verdict:?}"
        );
    }

    /// A trainer runs 3-9 s: within the lease, a rank left running after its
    /// peer failed would end by itself before the lease bound. In calm the
    /// bound is seconds, so it shows; during a fault the lease applies.
    #[test]
    fn in_calm_a_rank_running_seconds_past_a_failure_is_caught() {
        let calm = |b: &mut Builder| {
            b.start(100, (1, 1), "gpu01", (0, 2), &[0], None)
                .start(100, (1, 1), "gpu02", (1, 2), &[0], None)
                .exit(1_000, (1, 1), "gpu02", 1, 1)
                .exit(7_000, (1, 1), "gpu01", 0, 0)
                .final_job(record(1, vec![(1, 1_100, "Exited(1)")]));
        };
        let mut b = Builder::new();
        calm(&mut b);
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(
            verdict.violations[0]
                .message
                .contains("calm times allow 4000 ms"),
            "{verdict:?}"
        );
        let mut faulted = Builder::new();
        faulted
            .event(
                500,
                EventKind::FaultBegin {
                    fault: 1,
                    kind: "kill-leader".into(),
                    target: "controller-1".into(),
                    cut_off: Vec::new(),
                },
            )
            .event(2_500, EventKind::FaultHealed { fault: 1 });
        calm(&mut faulted);
        assert!(
            check(&faulted.history()).holds(),
            "a fault allows the lease"
        );
    }
}
