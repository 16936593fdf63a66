//! The agent channel's instruments, through the OpenTelemetry API (recording
//! nowhere unless the agent serves metrics, `--metrics-listen`): the round
//! trip of each acknowledged heartbeat, which is what the lease is renewed
//! by, and how long the agent went without a leader between two sessions.
//! Made on first use, from the global provider the agent installs first.

use std::sync::OnceLock;

use opentelemetry::metrics::Histogram;

/// Milliseconds from a heartbeat to the leader's acknowledgement (which a
/// leader sends only once a quorum confirmed that it still leads).
pub fn heartbeat_round_trip() -> &'static Histogram<f64> {
    static HISTOGRAM: OnceLock<Histogram<f64>> = OnceLock::new();
    HISTOGRAM.get_or_init(|| {
        corral_telemetry::meter()
            .f64_histogram("corral.agent.heartbeat.round_trip")
            .with_description("From a heartbeat to its acknowledgement by the leader")
            .with_unit("ms")
            .build()
    })
}

/// Milliseconds from the end of a session with a leader to the welcome of
/// the next.
pub fn reattach_duration() -> &'static Histogram<f64> {
    static HISTOGRAM: OnceLock<Histogram<f64>> = OnceLock::new();
    HISTOGRAM.get_or_init(|| {
        corral_telemetry::meter()
            .f64_histogram("corral.agent.reattach.duration")
            .with_description("From the end of a session with a leader to the welcome of the next")
            .with_unit("ms")
            .build()
    })
}
