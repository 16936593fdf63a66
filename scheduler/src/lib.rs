//! corral-scheduler: the scheduling policy, a pure function of the cluster state.
//!
//! [`plan`] takes the replicated state and the leader's time and returns a
//! [`Plan`]: gangs to start, jobs to preempt, and why the rest wait. It does no
//! I/O, reads no clock and uses no randomness: the same state and time give the
//! same plan. The state machine's `ApplyPlan` re-checks every entry, so a plan made
//! on a slightly old state is safe.
//!
//! The pass is a pipeline, one module per stage: [`priority`] orders the queue
//! (multifactor, with [`fairshare`]), [`eligibility`] filters jobs that may not
//! start (holds, dependencies, limits), [`place`] finds gangs topology-aware over a
//! [`view`] of free capacity, [`backfill`] holds reservations for blocked jobs and
//! lets others start only where they cannot delay them, and [`preempt`] frees
//! room for jobs that outrank running ones. [`explain`] says why a job waits.

pub mod association_limits;
pub mod backfill;
pub mod dependency;
pub mod eligibility;
pub mod explain;
pub mod fairshare;
pub mod pass;
pub mod place;
pub mod plan;
pub mod preempt;
pub mod priority;
pub mod topology;
pub mod view;

pub use explain::{Explanation, explain};
pub use pass::{PassInputs, plan, plan_avoiding, plan_with};
pub use plan::{BackfillReservation, PassStats, Plan};
