//! corral-telemetry: what the daemons (`corrald`, `corral-agent`) say about
//! themselves. Metrics are OpenTelemetry's: [`Metrics::install`] builds the
//! SDK's meter provider with a Prometheus reader and installs it as the
//! global one, so every crate records through the `opentelemetry` API
//! ([`meter`]) without knowing who reads, and [`metrics_server::serve`]
//! answers `GET /metrics` with the Prometheus text format, with the
//! process's own figures (CPU seconds, resident memory, open descriptors:
//! the `prometheus` crate's process collector). A daemon given no metrics
//! address installs nothing, and every instrument is a no-op.
//!
//! Names follow Prometheus' conventions as the exporter writes them: a
//! counter gets `_total`, a unit its suffix (`ms` → `_milliseconds`), dots
//! become underscores.

pub mod metrics_server;

use opentelemetry::metrics::{Meter, MeterProvider as _, ObservableCounter};
use opentelemetry::{KeyValue, global};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;

pub use metrics_server::{MetricsServer, serve};

/// The instrumentation scope every corral instrument is made in.
pub const SCOPE: &str = "corral";

/// Why metrics could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The Prometheus registry or exporter refused a collector.
    #[error("cannot set up the metrics registry: {0}")]
    Registry(String),
    /// The metrics address could not be listened on.
    #[error("cannot listen for metrics scrapes on {address} (give another address, or port 0)")]
    Listen {
        /// The address.
        address: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The installed metrics: the registry scrapes read.
#[derive(Clone)]
pub struct Metrics {
    registry: prometheus::Registry,
    provider: SdkMeterProvider,
    /// The log line counters (kept for the provider's life).
    _log_lines: [ObservableCounter<u64>; 2],
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Metrics {
    /// Builds the meter provider of service `service` (`corrald`,
    /// `corral-agent`), with this process's own figures, and makes it the
    /// global one. Call it before any instrument is made: one made before
    /// records nowhere.
    pub fn install(service: &'static str) -> Result<Metrics, TelemetryError> {
        let registry = prometheus::Registry::new();
        registry
            .register(Box::new(
                prometheus::process_collector::ProcessCollector::for_self(),
            ))
            .map_err(|e| TelemetryError::Registry(e.to_string()))?;
        let exporter = opentelemetry_prometheus::exporter()
            .with_registry(registry.clone())
            .scope_info_enabled(false)
            .build()
            .map_err(|e| TelemetryError::Registry(e.to_string()))?;
        let provider = SdkMeterProvider::builder()
            .with_reader(exporter)
            .with_resource(Resource::builder().with_service_name(service).build())
            .build();
        global::set_meter_provider(provider.clone());
        let meter = provider.meter(SCOPE);
        let lines = meter
            .u64_observable_counter("corral.log.lines")
            .with_description(
                "Lines this process logged, by level (those the repeat limit dropped included)",
            )
            .with_callback(|observer| {
                for (level, lines) in corral_logging::line_counts::logged() {
                    observer.observe(lines, &[KeyValue::new("level", level)]);
                }
            })
            .build();
        let suppressed = meter
            .u64_observable_counter("corral.log.suppressed")
            .with_description("Lines the repeat limit dropped (a line repeated past 5 per 10 s)")
            .with_callback(|observer| {
                observer.observe(corral_logging::line_counts::suppressed(), &[]);
            })
            .build();
        Ok(Metrics {
            registry,
            provider,
            _log_lines: [lines, suppressed],
        })
    }

    /// What a scrape reads.
    pub fn registry(&self) -> &prometheus::Registry {
        &self.registry
    }

    /// The provider (for a shutdown that flushes).
    pub fn provider(&self) -> &SdkMeterProvider {
        &self.provider
    }
}

/// Installs the metrics of `service` and serves them on `listen`, saying
/// where (`how` names the setting that asked for them).
pub async fn start(
    service: &'static str,
    listen: std::net::SocketAddr,
    how: &str,
) -> Result<MetricsServer, TelemetryError> {
    let metrics = Metrics::install(service)?;
    let server = serve(listen, metrics.registry().clone()).await?;
    tracing::info!("metrics at http://{}/metrics ({how})", server.address());
    Ok(server)
}

/// The meter every corral instrument is made from (a no-op one until
/// [`Metrics::install`]).
pub fn meter() -> Meter {
    global::meter(SCOPE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape(metrics: &Metrics) -> String {
        use prometheus::Encoder;
        let mut text = Vec::new();
        prometheus::TextEncoder::new()
            .encode(&metrics.registry().gather(), &mut text)
            .unwrap_or_default();
        String::from_utf8_lossy(&text).into_owned()
    }

    #[test]
    fn instruments_made_after_install_and_the_process_figures_are_scraped() {
        let metrics = Metrics::install("corral-test").unwrap_or_else(|e| panic!("{e}"));
        let counter = meter().u64_counter("corral.test.things").build();
        counter.add(3, &[KeyValue::new("kind", "a")]);
        corral_logging::line_counts::count(&tracing::Level::WARN, true);
        let text = scrape(&metrics);
        assert!(
            text.contains("corral_test_things_total{kind=\"a\"} 3"),
            "{text}"
        );
        assert!(text.contains("process_resident_memory_bytes"), "{text}");
        assert!(
            text.contains("corral_log_lines_total{level=\"warn\"}"),
            "{text}"
        );
        assert!(text.contains("corral_log_suppressed_total"), "{text}");
    }
}
