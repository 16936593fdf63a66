//! Promise 2: no GPU is in two live attempts at once. An agent cut off from
//! the controllers keeps its attempt until its lease runs out, and the leader
//! may place the job again only after declaring the node down (lease plus a
//! margin, counted from its own election), so overlaps are impossible by
//! design: only the header's clock tolerance is allowed (the observers'
//! clocks), and every overlap found is reported with its length.

use std::collections::BTreeMap;

use crate::attempts::{AttemptKey, Attempts};
use crate::history::History;
use crate::verdict::Verdict;

/// The checker's name.
pub const NAME: &str = "gpu-exclusivity";
const PROMISE: &str = "no GPU in two live attempts at once";

/// One rank's use of one GPU: from, to, and whose.
type Use = (u64, u64, AttemptKey);

/// Checks the promise.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::new(NAME, PROMISE);
    let view = Attempts::of(history);
    let mut uses: BTreeMap<(&str, u32), Vec<Use>> = BTreeMap::new();
    for (key, attempt) in &view.observed {
        for rank in attempt.ranks.values() {
            let end = view.rank_end(rank);
            for gpu in &rank.gpus {
                uses.entry((rank.node.as_str(), *gpu))
                    .or_default()
                    .push((rank.started, end, *key));
            }
        }
    }
    let tolerance = history.header.clock_tolerance_ms;
    let mut max_overlap = 0u64;
    let mut overlaps = 0u32;
    for ((node, gpu), mut intervals) in uses {
        intervals.sort();
        // Each use against the longest-running earlier use of another attempt.
        let mut latest: Option<(u64, AttemptKey)> = None;
        for (from, to, key) in intervals {
            if let Some((until, holder)) = latest
                && holder != key
                && until > from
            {
                let overlap = until.min(to) - from;
                max_overlap = max_overlap.max(overlap);
                if overlap > tolerance {
                    overlaps += 1;
                    verdict.violation(
                        Some(from),
                        Some(key.0),
                        format!(
                            "{node} GPU {gpu}: job {}.{} started while job {}.{} still ran there ({overlap} ms together)",
                            key.0, key.1, holder.0, holder.1
                        ),
                    );
                }
            }
            if latest.is_none_or(|(until, _)| to > until) {
                latest = Some((to, key));
            }
        }
    }
    verdict.measure("max_overlap_ms", max_overlap as f64);
    verdict.measure("overlaps", f64::from(overlaps));
    verdict.measure("lease_ms", history.header.lease_ms as f64);
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Builder;

    #[test]
    fn back_to_back_attempts_on_one_gpu_pass() {
        let mut b = Builder::new();
        b.start(100, (1, 1), "gpu01", (0, 1), &[0, 1], None)
            .exit(200, (1, 1), "gpu01", 0, 0)
            .start(200, (2, 1), "gpu01", (0, 1), &[1], None)
            .exit(300, (2, 1), "gpu01", 0, 0)
            .start(150, (3, 1), "gpu02", (0, 1), &[1], None);
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("max_overlap_ms"), Some(0.0));
    }

    #[test]
    fn a_gpu_given_to_a_second_job_while_the_first_still_runs_is_caught() {
        let mut b = Builder::new();
        // Job 1 never records an exit (it was killed) but still stepped at
        // 20 s; job 2 got GPU 5 at 5 s.
        b.start(1_000, (1, 1), "gpu01", (0, 1), &[5], None)
            .step(20_000, (1, 1), 0, 190)
            .start(5_000, (2, 1), "gpu01", (0, 1), &[4, 5], None)
            .exit(20_000, (2, 1), "gpu01", 0, 0);
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(
            verdict.violations[0].message.contains("gpu01 GPU 5"),
            "{verdict:?}"
        );
        assert_eq!(verdict.measured("max_overlap_ms"), Some(15_000.0));
    }

    #[test]
    fn an_attempt_rerun_beside_its_requeued_successor_is_caught() {
        let mut b = Builder::new();
        b.start(1_000, (1, 1), "gpu01", (0, 1), &[0], None)
            .exit(9_000, (1, 1), "gpu01", 0, 0)
            .start(4_000, (1, 2), "gpu01", (0, 1), &[0], Some(10))
            .exit(12_000, (1, 2), "gpu01", 0, 0);
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(
            verdict.violations[0]
                .message
                .contains("job 1.2 started while job 1.1")
        );
    }

    #[test]
    fn a_preemptor_given_the_gpu_of_a_victim_still_in_its_grace_is_caught() {
        // The victim ignores its notice: its last sign of life is the
        // notice itself, at 6,000 ms; the preemptor takes GPU 0 at 5,000.
        let mut b = Builder::new();
        b.start(1_000, (1, 1), "gpu01", (0, 1), &[0], None)
            .step(4_000, (1, 1), 0, 30)
            .notice(6_000, (1, 1), 0, true)
            .start(5_000, (2, 1), "gpu01", (0, 1), &[0, 1], None)
            .step(7_000, (2, 1), 0, 20);
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert_eq!(verdict.measured("max_overlap_ms"), Some(1_000.0));
    }

    #[test]
    fn overlaps_within_the_clock_tolerance_are_measured_not_flagged() {
        let mut b = Builder::new();
        b.start(1_000, (1, 1), "gpu01", (0, 1), &[0], None)
            .exit(2_300, (1, 1), "gpu01", 0, 0)
            .start(2_000, (2, 1), "gpu01", (0, 1), &[0], None)
            .exit(3_000, (2, 1), "gpu01", 0, 0);
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("max_overlap_ms"), Some(300.0));
    }
}
