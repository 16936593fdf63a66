//! Promise 15: the run tested what it claims. A checker holds vacuously on
//! a run in which nothing happened, so the run itself is judged: jobs ran
//! (some rank started), and a scenario with faults injected at least one
//! (every fault skipped, say for want of root or libfaketime, is a run of
//! the `none` scenario under another name), and a fault whose effect the
//! runner counted had one (a disk stall that slowed no fsync stalled
//! nothing). Measured: the faults injected and skipped, and the ranks
//! started.

use crate::history::{EventKind, History};
use crate::verdict::Verdict;

/// The checker's name.
pub const NAME: &str = "coverage";
const PROMISE: &str = "the run did what its scenario says: jobs ran, and its faults were injected";

/// Checks the promise.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::new(NAME, PROMISE);
    let (mut injected, mut ranks) = (0u32, 0u32);
    let mut skipped: Vec<String> = Vec::new();
    for event in &history.events {
        match &event.kind {
            EventKind::FaultBegin { .. } => injected += 1,
            EventKind::FaultSkipped { kind, reason } => skipped.push(format!("{kind}: {reason}")),
            EventKind::AttemptStart { .. } => ranks += 1,
            EventKind::FaultEffect {
                fault,
                effect,
                count: 0,
            } => {
                verdict.violation(
                    Some(event.t),
                    None,
                    format!("fault {fault} showed no effect: no {effect} while it lasted"),
                );
            }
            _ => {}
        }
    }
    if ranks == 0 {
        verdict.violation(
            None,
            None,
            "no rank of any job started: the workload never ran",
        );
    }
    if !history.header.faults.is_empty() && injected == 0 {
        let why = if skipped.is_empty() {
            "none came due (run longer)".to_string()
        } else {
            format!("skipped: {}", skipped.join("; "))
        };
        verdict.violation(
            None,
            None,
            format!(
                "scenario {} injects {} but injected no fault: {why}",
                history.header.scenario,
                history.header.faults.join(", ")
            ),
        );
    }
    verdict.measure("faults_injected", f64::from(injected));
    verdict.measure("faults_skipped", skipped.len() as f64);
    verdict.measure("ranks_started", f64::from(ranks));
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Builder;

    fn with_faults(b: &mut Builder) -> History {
        let mut history = b.history();
        history.header.scenario = "partition".into();
        history.header.faults = vec!["halves-12s".into()];
        history
    }

    #[test]
    fn a_run_with_jobs_and_an_injected_fault_holds() {
        let mut b = Builder::new();
        b.start(100, (1, 1), "gpu01", (0, 1), &[0], None).event(
            200,
            EventKind::FaultBegin {
                fault: 1,
                kind: "halves-12s".into(),
                target: "a | b".into(),
                cut_off: Vec::new(),
            },
        );
        let verdict = check(&with_faults(&mut b));
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("faults_injected"), Some(1.0));
    }

    #[test]
    fn a_disk_stall_that_slowed_no_sync_is_caught() {
        let mut b = Builder::new();
        b.start(100, (1, 1), "gpu01", (0, 1), &[0], None).event(
            9_000,
            EventKind::FaultEffect {
                fault: 1,
                effect: "slow syncs logged by controller-1".into(),
                count: 0,
            },
        );
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(verdict.violations[0].message.contains("no slow syncs"));
    }

    #[test]
    fn every_fault_skipped_or_no_job_is_caught() {
        let mut b = Builder::new();
        b.event(
            100,
            EventKind::FaultSkipped {
                kind: "halves-12s".into(),
                reason: "needs root".into(),
            },
        );
        let verdict = check(&with_faults(&mut b));
        assert_eq!(verdict.violations.len(), 2, "{verdict:?}");
        assert!(
            verdict.violations[1]
                .message
                .contains("skipped: halves-12s: needs root")
        );
        // A scenario without faults needs none.
        let mut quiet = Builder::new();
        quiet.start(100, (1, 1), "gpu01", (0, 1), &[0], None);
        assert!(check(&quiet.history()).holds());
    }
}
