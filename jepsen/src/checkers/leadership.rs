//! Promise 7: at most one leader dispatches per term. Every controller that
//! said it led, or sent a launch, names its term; two controllers in one
//! term is a split brain.

use std::collections::BTreeMap;

use crate::history::{EventKind, History};
use crate::verdict::Verdict;

/// The checker's name.
pub const NAME: &str = "leadership";
const PROMISE: &str = "at most one leader dispatching per term";

/// Checks the promise.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::new(NAME, PROMISE);
    let mut leaders: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let mut dispatches = 0u32;
    for event in &history.events {
        let (replica, term, what) = match &event.kind {
            EventKind::Leader { replica, term } => (*replica, *term, "led"),
            EventKind::Dispatch {
                replica,
                term,
                job,
                attempt,
                ..
            } => {
                dispatches += 1;
                let _ = (job, attempt);
                (*replica, *term, "dispatched")
            }
            _ => continue,
        };
        match leaders.get(&term) {
            Some((first, since)) if *first != replica => verdict.violation(
                Some(event.t),
                None,
                format!(
                    "term {term}: controller {replica} {what} while controller {first} led it (since {since} ms)"
                ),
            ),
            Some(_) => {}
            None => {
                leaders.insert(term, (replica, event.t));
            }
        }
    }
    verdict.measure("terms", leaders.len() as f64);
    verdict.measure("dispatches", f64::from(dispatches));
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Builder;

    fn dispatch(replica: u64, term: u64) -> EventKind {
        EventKind::Dispatch {
            replica,
            term,
            job: 1,
            attempt: 1,
            node: "gpu01".into(),
        }
    }

    #[test]
    fn one_leader_per_term_passes() {
        let mut b = Builder::new();
        b.event(
            1,
            EventKind::Leader {
                replica: 1,
                term: 1,
            },
        )
        .event(2, dispatch(1, 1))
        .event(
            3,
            EventKind::Leader {
                replica: 2,
                term: 2,
            },
        )
        .event(4, dispatch(2, 2))
        .event(5, dispatch(1, 1));
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("terms"), Some(2.0));
    }

    #[test]
    fn two_controllers_in_one_term_are_caught() {
        let mut b = Builder::new();
        b.event(
            1,
            EventKind::Leader {
                replica: 1,
                term: 3,
            },
        )
        .event(2, dispatch(3, 3));
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(
            verdict.violations[0]
                .message
                .contains("term 3: controller 3 dispatched while controller 1 led it")
        );
    }
}
