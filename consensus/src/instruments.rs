//! The replica's own instruments, through the OpenTelemetry API (a daemon
//! that serves metrics installs a provider first; otherwise they record
//! nowhere): how long proposals take to commit, by outcome, and how long each
//! sync of the log and of sled takes. Made on first use, from the provider
//! global then: a daemon installs its provider once, before it starts the
//! replica (a second provider in one process would not see these).

use std::sync::OnceLock;

use opentelemetry::metrics::Histogram;

/// Milliseconds from a proposal to its answer (`outcome`: `committed`,
/// `not_leader`, `timeout`, `lost`, `refused`).
pub fn propose_duration() -> &'static Histogram<f64> {
    static HISTOGRAM: OnceLock<Histogram<f64>> = OnceLock::new();
    HISTOGRAM.get_or_init(|| {
        opentelemetry::global::meter("corral")
            .f64_histogram("corral.raft.propose.duration")
            .with_description(
                "From a proposal on this replica to its answer (committed and applied, or why not)",
            )
            .with_unit("ms")
            .build()
    })
}

/// Milliseconds one sync took (`store`: `log`, the Raft log's segments;
/// `database`, sled's vote and purge point).
pub fn sync_duration() -> &'static Histogram<f64> {
    static HISTOGRAM: OnceLock<Histogram<f64>> = OnceLock::new();
    HISTOGRAM.get_or_init(|| {
        opentelemetry::global::meter("corral")
            .f64_histogram("corral.raft.sync.duration")
            .with_description("How long one fdatasync of the replica's storage took")
            .with_unit("ms")
            .build()
    })
}
