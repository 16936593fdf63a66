//! The leader's scheduling passes as metrics (what Slurm's `sdiag` and its
//! OpenMetrics endpoint report as the main and backfill cycles; corral runs
//! both in one pass): how long each pass took, how many pending jobs it
//! looked at, what it planned (started in priority order, or backfilled
//! onto nodes held for a higher-priority job), the preemptions it asked
//! for, and the reservations it held for blocked jobs. Recorded by the
//! leader loop after each pass; nothing when the controller serves no
//! metrics.

use std::time::Duration;

use corral_scheduler::plan::Plan;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Gauge, Histogram};

/// What one pass did, taken from its plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassSummary {
    /// How long the pass took (the plan only, not its commit).
    pub took: Duration,
    /// Pending jobs looked at.
    pub considered: u64,
    /// Allocations planned in priority order.
    pub in_order: u64,
    /// Allocations planned by backfill.
    pub backfilled: u64,
    /// Preemptions planned.
    pub preemptions: u64,
    /// Reservations held for blocked jobs.
    pub reservations: u64,
}

impl PassSummary {
    /// The summary of `plan`, which took `took`.
    pub fn of(plan: &Plan, took: Duration) -> PassSummary {
        let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        let backfilled = count(plan.stats.backfilled);
        PassSummary {
            took,
            considered: count(plan.stats.considered),
            in_order: count(plan.allocations.len()).saturating_sub(backfilled),
            backfilled,
            preemptions: count(plan.preemptions.len()),
            reservations: count(plan.reservations.len()),
        }
    }
}

/// The instruments passes are recorded in.
pub struct PassInstruments {
    duration: Histogram<f64>,
    considered: Counter<u64>,
    planned: Counter<u64>,
    preemptions: Counter<u64>,
    reservations: Gauge<u64>,
}

impl PassInstruments {
    /// Made from the global meter provider (install it first).
    pub fn new() -> PassInstruments {
        let meter = corral_telemetry::meter();
        PassInstruments {
            duration: meter
                .f64_histogram("corral.scheduler.pass.duration")
                .with_description("How long one scheduling pass (priority order and backfill) took")
                .with_unit("ms")
                .build(),
            considered: meter
                .u64_counter("corral.scheduler.jobs.considered")
                .with_description("Pending jobs the scheduling passes looked at")
                .build(),
            planned: meter
                .u64_counter("corral.scheduler.allocations.planned")
                .with_description(
                    "Allocations the passes planned, by how (`priority`: in priority order; `backfill`: on nodes held for a higher-priority job that they leave in time)",
                )
                .build(),
            preemptions: meter
                .u64_counter("corral.scheduler.preemptions.planned")
                .with_description("Preemptions the passes planned")
                .build(),
            reservations: meter
                .u64_gauge("corral.scheduler.backfill.reservations")
                .with_description("Reservations the last pass held for blocked jobs")
                .build(),
        }
    }

    /// Records one pass.
    pub fn record(&self, pass: &PassSummary) {
        self.duration.record(pass.took.as_secs_f64() * 1000.0, &[]);
        self.considered.add(pass.considered, &[]);
        self.planned
            .add(pass.in_order, &[KeyValue::new("placement", "priority")]);
        self.planned
            .add(pass.backfilled, &[KeyValue::new("placement", "backfill")]);
        self.preemptions.add(pass.preemptions, &[]);
        self.reservations.record(pass.reservations, &[]);
    }
}

impl Default for PassInstruments {
    fn default() -> Self {
        PassInstruments::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_scheduler::plan::PassStats;

    #[test]
    fn backfilled_allocations_are_not_counted_as_in_order_ones() {
        let plan = Plan {
            allocations: vec![
                corral_state::command::PlannedAllocation {
                    job: corral_state::ids::JobId(1),
                    attempt: 1,
                    nodes: Vec::new(),
                };
                3
            ],
            stats: PassStats {
                considered: 9,
                backfilled: 2,
                ..PassStats::default()
            },
            ..Plan::default()
        };
        let summary = PassSummary::of(&plan, Duration::from_millis(4));
        assert_eq!(
            (summary.considered, summary.in_order, summary.backfilled),
            (9, 1, 2)
        );
    }
}
