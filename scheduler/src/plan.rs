//! What one scheduling pass decides: allocations to start, preemptions to begin,
//! pending reasons that changed, and the backfill reservations it held.

use corral_state::command::{Command, PlannedAllocation, PlannedPreemption};
use corral_state::job::PendingReason;
use corral_state::{JobId, Timestamp};

/// Resources held for a blocked job: lower-priority jobs may use these nodes only
/// if they end (by time limit) before `start`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackfillReservation {
    /// The blocked job.
    pub job: JobId,
    /// When it is expected to start, from running jobs' time limits.
    pub start: Timestamp,
    /// The nodes it is expected to start on.
    pub nodes: Vec<String>,
}

/// Counters of one pass, for logs and benchmarks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassStats {
    /// Pending jobs looked at.
    pub considered: usize,
    /// Jobs that could not start for a reason other than resources.
    pub ineligible: usize,
    /// Placement searches run.
    pub placements_tried: usize,
    /// Jobs skipped because an identical request already failed this pass.
    pub shape_cache_hits: usize,
    /// Jobs started on nodes held for a higher-priority job (they end first).
    pub backfilled: usize,
}

/// The outcome of one pass. Apply it with [`Plan::to_command`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Gangs to start, in priority order.
    pub allocations: Vec<PlannedAllocation>,
    /// Jobs to preempt.
    pub preemptions: Vec<PlannedPreemption>,
    /// Pending reasons that differ from the ones in the state.
    pub reasons: Vec<(JobId, PendingReason)>,
    /// Reservations held for blocked jobs, in priority order.
    pub reservations: Vec<BackfillReservation>,
    /// Counters.
    pub stats: PassStats,
}

impl Plan {
    /// The `ApplyPlan` command for this plan, or `None` when it changes nothing.
    pub fn to_command(&self, at: Timestamp) -> Option<Command> {
        if self.allocations.is_empty() && self.preemptions.is_empty() && self.reasons.is_empty() {
            return None;
        }
        Some(Command::ApplyPlan {
            allocations: self.allocations.clone(),
            preemptions: self.preemptions.clone(),
            reasons: self.reasons.clone(),
            at,
        })
    }
}
