//! One checker per promise, each in its own module, each a pure function
//! from a history to a [`Verdict`].

pub mod accounting;
pub mod controller_outage;
pub mod coverage;
pub mod elections;
pub mod gang;
pub mod gpu_exclusivity;
pub mod leadership;
pub mod liveness;
pub mod preempt_grace;
pub mod preempt_requeue;
pub mod reads;
pub mod rejoin;
pub mod requeue;
pub mod resources;
pub mod resume;
pub mod submissions;

use crate::history::History;
use crate::verdict::Verdict;

/// Every checker, in the order of the promises.
pub fn check_all(history: &History) -> Vec<Verdict> {
    vec![
        submissions::check(history),
        gpu_exclusivity::check(history),
        gang::check(history),
        requeue::check(history),
        resume::check(history),
        accounting::check(history),
        leadership::check(history),
        liveness::check(history),
        reads::check(history),
        preempt_requeue::check(history),
        preempt_grace::check(history),
        controller_outage::check(history),
        resources::check(history),
        elections::check(history),
        coverage::check(history),
    ]
}
