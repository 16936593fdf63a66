//! Promise 8: liveness after heal. Within the bound the header states
//! (`liveness_bound_ms`) after the last fault is healed, every job has
//! reached a terminal state and a leader exists; and after every heal of a
//! fault that touched the controllers, each replica is back at lag 0 within
//! 5 s, with no controller the fault left in a minority leading
//! ([`super::rejoin`]).

use crate::history::{EventKind, History};
use crate::verdict::Verdict;

/// The checker's name.
pub const NAME: &str = "liveness";
const PROMISE: &str = "after the last heal, every job ends and a leader exists within the bound; after every heal, each replica at lag 0 within 5 s, led from the majority";

/// Checks the promise.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::new(NAME, PROMISE);
    let bound = history.header.liveness_bound_ms;
    let healed = history
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::FaultHealed { .. }))
        .map(|e| e.t)
        .max()
        .unwrap_or(0);
    let deadline = healed + bound;
    // A leader shows by a `Leader` event (a new term's), by dispatching, or
    // by answering the observer's `Replicas` reading: one that led through
    // the fault and after it starts no term.
    let leader_after = history
        .events
        .iter()
        .find(|e| {
            e.t >= healed
                && matches!(
                    e.kind,
                    EventKind::Leader { .. }
                        | EventKind::Dispatch { .. }
                        | EventKind::Replicas { .. }
                )
        })
        .map(|e| e.t);
    match leader_after {
        Some(t) if t > deadline => verdict.violation(
            Some(t),
            None,
            format!(
                "the first leader after the last heal ({healed} ms) was seen {} ms later, past the {bound} ms bound",
                t - healed
            ),
        ),
        Some(t) => verdict.measure("leader_after_heal_ms", (t - healed) as f64),
        None => verdict.violation(
            None,
            None,
            format!("no leader was seen after the last heal ({healed} ms)"),
        ),
    }
    let mut slowest = 0u64;
    for job in history.finals() {
        if !job.is_terminal() {
            verdict.violation(
                None,
                Some(job.job),
                format!(
                    "job {} is still {} at the end of the run ({} ms after the last heal)",
                    job.job,
                    job.state,
                    history.end().saturating_sub(healed)
                ),
            );
            continue;
        }
        let Some(end) = job.attempts.last().and_then(|a| a.end) else {
            continue;
        };
        if end > healed {
            slowest = slowest.max(end - healed);
        }
        if end > deadline {
            verdict.violation(
                Some(end),
                Some(job.job),
                format!(
                    "job {} ended {} ms after the last heal, past the {bound} ms bound",
                    job.job,
                    end - healed
                ),
            );
        }
    }
    verdict.measure("last_heal_ms", healed as f64);
    verdict.measure("slowest_job_end_after_heal_ms", slowest as f64);
    super::rejoin::check_heals(history, &mut verdict);
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Builder, finished};

    /// A leader killed at 10 ms and healed at `t`, every replica back at
    /// once after (the heal-by-heal part: `rejoin`).
    fn healed_at(t: u64) -> Builder {
        let mut b = killed_and_healed_at(t);
        b.event(
            t + 5,
            EventKind::Replicas {
                leader: 2,
                members: vec![1, 2, 3],
                caught_up: vec![1, 2, 3],
            },
        );
        b
    }

    fn killed_and_healed_at(t: u64) -> Builder {
        let mut b = Builder::new();
        b.event(
            10,
            EventKind::FaultBegin {
                fault: 1,
                kind: "kill-leader".into(),
                target: "controller-1".into(),
                cut_off: Vec::new(),
            },
        )
        .event(t, EventKind::FaultHealed { fault: 1 });
        b
    }

    #[test]
    fn jobs_ending_and_a_leader_after_the_heal_pass() {
        let mut b = healed_at(50);
        b.event(
            60,
            EventKind::Leader {
                replica: 2,
                term: 2,
            },
        )
        .final_job(finished(1, "w1"));
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(
            verdict.measured("slowest_job_end_after_heal_ms"),
            Some(150.0)
        );
    }

    #[test]
    fn a_leader_that_led_through_the_fault_is_seen_by_its_readings() {
        // No new term after the heal: the leader of before answers the
        // observer's reading (the 300 s bridge run: "first leader seen
        // 120,686 ms" after the heal, while controller-3 led throughout).
        let mut b = healed_at(50);
        b.final_job(finished(1, "w1"));
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("leader_after_heal_ms"), Some(5.0));
    }

    #[test]
    fn a_stuck_job_and_a_missing_leader_are_caught() {
        let mut b = killed_and_healed_at(50);
        let mut stuck = finished(1, "w1");
        stuck.state = "RUNNING".into();
        b.final_job(stuck);
        let verdict = check(&b.history());
        let text = format!("{:?}", verdict.violations);
        assert!(
            text.contains("no leader was seen after the last heal"),
            "{text}"
        );
        assert!(text.contains("job 1 is still RUNNING"), "{text}");
    }

    #[test]
    fn a_job_ending_past_the_bound_is_caught() {
        let mut b = healed_at(50);
        b.event(
            60,
            EventKind::Leader {
                replica: 2,
                term: 2,
            },
        );
        let mut late = finished(1, "w1");
        late.attempts[0].end = Some(90_000);
        b.final_job(late);
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(
            verdict.violations[0]
                .message
                .contains("89950 ms after the last heal")
        );
    }
}
