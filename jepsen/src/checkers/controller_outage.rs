//! Promise 12: a controller outage kills no job. The agents keep their jobs
//! while every controller is down (they no longer fence on a lapsed lease
//! while a majority of nodes reach no leader), so an attempt that was running
//! when a `kill-all-controllers` fault (2 s, or `kill-all-controllers-30s`)
//! began is not ended as lost (`NodeFailure`, the cause of an agent's
//! fencing or of a node declared down, or the fence's SIGKILL,
//! `Exited(signal 9)`) between the fault's begin and its heal plus the lease
//! plus the clock tolerance (the leader, back, may wait out a lease before it
//! declares a silent node down). An attempt was running when the fault began
//! if one of its ranks recorded its start before then, neither that rank's
//! exit nor the batch script's came before then, and the cluster's record
//! does not end it before then. Excused: an attempt one of whose nodes
//! another fault (`kill-agent`, `pause-agent`, `isolate-agent`, ...)
//! overlapping that window cut off from the leader: that fault may rightly
//! lose it. The attempts spanning outages are measured
//! (`attempts_across_outages`, `attempts_survived_outages`), so a run in
//! which no attempt ran across an outage shows it; with no outage injected
//! (`controller_outages` = 0) there is nothing to check.

use std::collections::BTreeSet;

use crate::attempts::{AttemptKey, Attempts, ObservedAttempt};
use crate::faults::Fault;
use crate::history::History;
use crate::verdict::Verdict;

/// The checker's name.
pub const NAME: &str = "controller-outage";
const PROMISE: &str = "a controller outage kills no job: an attempt running when every controller went down is not lost before the heal plus the lease";

/// The kinds of fault that take every controller down begin so.
const OUTAGE: &str = "kill-all-controllers";

/// Whether an attempt that ended so was lost with its node or its agent:
/// fenced (reported lost), declared down, or SIGKILLed outside the
/// cluster's own decisions (a cancel, a preemption, a time limit or an XID
/// each have a cause of their own).
fn lost(cause: &str) -> bool {
    cause.starts_with("NodeFailure") || cause == "Exited(signal 9)"
}

/// Whether `attempt` was running at `t`: a rank had started and neither it
/// nor the batch script had ended.
fn running_at(attempt: &ObservedAttempt, t: u64) -> bool {
    let batch_ended = attempt.batch_exit.is_some_and(|(end, _)| end < t);
    !batch_ended
        && attempt
            .ranks
            .values()
            .any(|r| r.started < t && r.exited.is_none_or(|(end, _)| end >= t))
}

/// Checks the promise.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::new(NAME, PROMISE);
    let view = Attempts::of(history);
    let faults = crate::faults::of(history);
    let lease = history.header.lease_ms;
    let tolerance = history.header.clock_tolerance_ms;
    let (outages, others): (Vec<&Fault>, Vec<&Fault>) =
        faults.iter().partition(|f| f.kind.starts_with(OUTAGE));
    let (mut across, mut survived, mut excused) = (0u32, 0u32, 0u32);
    // An attempt lost once is judged once, under the first outage whose
    // window holds its end.
    let mut judged: BTreeSet<AttemptKey> = BTreeSet::new();
    for outage in &outages {
        let until = outage.healed + lease + tolerance;
        for (&(job, number), attempt) in &view.observed {
            if !running_at(attempt, outage.began) {
                continue;
            }
            // Without the cluster's record there is nothing to judge it by
            // (`submissions` and `liveness` own a missing record).
            let Some(record) = view.final_attempt((job, number)) else {
                continue;
            };
            if record.end.is_some_and(|end| end < outage.began) {
                // The cluster had ended it already; its ranks were stopping.
                continue;
            }
            across += 1;
            let killed = match (record.end, record.cause.as_deref()) {
                (Some(end), Some(cause))
                    if lost(cause) && (outage.began..=until).contains(&end) =>
                {
                    Some((end, cause))
                }
                _ => None,
            };
            let Some((end, cause)) = killed else {
                survived += 1;
                continue;
            };
            if !judged.insert((job, number)) {
                continue;
            }
            let nodes: BTreeSet<&str> = attempt
                .ranks
                .values()
                .map(|r| r.node.as_str())
                .chain(record.allocation.iter().map(|(node, _)| node.as_str()))
                .collect();
            let cut_by_another = others.iter().any(|f| {
                f.began <= until
                    && f.healed + tolerance >= outage.began
                    && f.cut_off.iter().any(|n| nodes.contains(n.as_str()))
            });
            if cut_by_another {
                excused += 1;
                continue;
            }
            let on: Vec<&str> = nodes.into_iter().collect();
            verdict.violation(
                Some(end),
                Some(job),
                format!(
                    "job {job}.{number} on {} was running when {} took every controller down at {} ms (healed {} ms) and ended at {end} ms with {cause}, before the heal plus the lease ({until} ms), with no other fault cutting its nodes off",
                    on.join(","),
                    outage.kind,
                    outage.began,
                    outage.healed
                ),
            );
        }
    }
    verdict.measure("controller_outages", outages.len() as f64);
    verdict.measure("attempts_across_outages", f64::from(across));
    verdict.measure("attempts_survived_outages", f64::from(survived));
    verdict.measure("attempts_lost_to_other_faults", f64::from(excused));
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{EventKind, FinalAttempt, FinalJob};
    use crate::testing::Builder;

    /// A fault `kind` cutting off `cut_off`, from `began` to `healed`.
    fn fault<'b>(
        b: &'b mut Builder,
        id: u64,
        kind: &str,
        (began, healed): (u64, u64),
        cut_off: &[&str],
    ) -> &'b mut Builder {
        b.event(
            began,
            EventKind::FaultBegin {
                fault: id,
                kind: kind.into(),
                target: "every controller".into(),
                cut_off: cut_off.iter().map(|n| n.to_string()).collect(),
            },
        )
        .event(healed, EventKind::FaultHealed { fault: id })
    }

    /// Every controller down from 5,000 to 35,000 ms; the lease is 10 s and
    /// the tolerance 500 ms, so the window runs to 45,500 ms.
    fn outage_30s(b: &mut Builder) -> &mut Builder {
        fault(
            b,
            1,
            "kill-all-controllers-30s",
            (5_000, 35_000),
            &["gpu01", "gpu02"],
        )
    }

    /// Job 1's single attempt on gpu01, started at 1,000 ms (stepping at
    /// 4,000), ended at `end` with `cause` as the cluster recorded it.
    fn job<'b>(b: &'b mut Builder, end: u64, cause: &str) -> &'b mut Builder {
        b.start(1_000, (1, 1), "gpu01", (0, 1), &[0], None)
            .step(4_000, (1, 1), 0, 3)
            .final_job(FinalJob {
                job: 1,
                name: "w1".into(),
                state: "COMPLETED".into(),
                requeues: 0,
                attempts: vec![FinalAttempt {
                    number: 1,
                    allocation: vec![("gpu01".into(), vec![0])],
                    start: Some(1_000),
                    end: Some(end),
                    cause: Some(cause.into()),
                }],
                gpu_ms: 0,
            })
    }

    #[test]
    fn an_attempt_that_runs_across_a_30s_outage_and_finishes_passes() {
        let mut b = Builder::new();
        outage_30s(&mut b);
        job(&mut b, 50_100, "Exited(0)")
            .step(20_000, (1, 1), 0, 20)
            .exit(50_000, (1, 1), "gpu01", 0, 0)
            .batch_exit(50_000, (1, 1), "gpu01", 0);
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("controller_outages"), Some(1.0));
        assert_eq!(verdict.measured("attempts_across_outages"), Some(1.0));
        assert_eq!(verdict.measured("attempts_survived_outages"), Some(1.0));
    }

    #[test]
    fn an_attempt_lost_in_the_outages_window_is_caught() {
        let mut b = Builder::new();
        outage_30s(&mut b);
        job(&mut b, 36_200, "NodeFailure");
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        let violation = &verdict.violations[0];
        assert_eq!((violation.t, violation.job), (Some(36_200), Some(1)));
        assert!(
            violation.message.contains(
                "job 1.1 on gpu01 was running when kill-all-controllers-30s took every controller down at 5000 ms"
            ),
            "{verdict:?}"
        );
        assert_eq!(verdict.measured("attempts_survived_outages"), Some(0.0));
    }

    #[test]
    fn the_short_outage_and_a_fences_sigkill_count_too() {
        let mut b = Builder::new();
        fault(
            &mut b,
            1,
            "kill-all-controllers",
            (5_000, 7_000),
            &["gpu01", "gpu02"],
        );
        job(&mut b, 16_000, "Exited(signal 9)");
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
    }

    #[test]
    fn a_node_also_cut_off_by_an_overlapping_fault_is_excused() {
        for kind in ["isolate-agent-20s", "kill-agent"] {
            let mut b = Builder::new();
            outage_30s(&mut b);
            fault(&mut b, 2, kind, (36_000, 44_000), &["gpu01"]);
            job(&mut b, 40_000, "NodeFailure");
            let verdict = check(&b.history());
            assert!(verdict.holds(), "{kind}: {verdict:?}");
            assert_eq!(verdict.measured("attempts_lost_to_other_faults"), Some(1.0));
        }
        // Another node cut off excuses nothing.
        let mut b = Builder::new();
        outage_30s(&mut b);
        fault(&mut b, 2, "isolate-agent-20s", (36_000, 44_000), &["gpu02"]);
        job(&mut b, 40_000, "NodeFailure");
        assert_eq!(check(&b.history()).violations.len(), 1);
    }

    #[test]
    fn a_loss_after_the_window_or_of_an_attempt_started_during_the_outage_is_not_this_promises() {
        let mut b = Builder::new();
        outage_30s(&mut b);
        job(&mut b, 46_000, "NodeFailure");
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        // Started after every controller went down: not running at the begin.
        let mut b = Builder::new();
        fault(
            &mut b,
            1,
            "kill-all-controllers-30s",
            (500, 30_500),
            &["gpu01"],
        );
        job(&mut b, 20_000, "NodeFailure");
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("attempts_across_outages"), Some(0.0));
    }

    #[test]
    fn with_no_outage_there_is_nothing_to_check_and_it_says_so() {
        let mut b = Builder::new();
        fault(&mut b, 1, "kill-leader", (5_000, 7_000), &[]);
        job(&mut b, 6_000, "NodeFailure");
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("controller_outages"), Some(0.0));
        assert_eq!(verdict.measured("attempts_across_outages"), Some(0.0));
    }
}
