//! The agent's metrics, served at `--metrics-listen` (`GET /metrics`; see
//! `corral-telemetry`): each GPU's latest health sample (temperature, power,
//! memory used, utilization, healthy or not), the XIDs it raised as counters
//! by GPU and code (not a last value: two XIDs between scrapes are two), the
//! times this node fenced its jobs, and how long the lease it holds has
//! left. Gauges are read from the latest sample when scraped.

use tokio::time::Instant;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, ObservableGauge};
use tokio::sync::watch;

use crate::gpu::GpuSample;

/// What the agent registered, and the counters it adds to.
pub struct AgentMetrics {
    _gauges: Vec<ObservableGauge<f64>>,
    xids: Counter<u64>,
    fencings: Counter<u64>,
}

impl std::fmt::Debug for AgentMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentMetrics")
    }
}

type Reading = fn(&GpuSample) -> Option<f64>;

impl AgentMetrics {
    /// Registers the agent's instruments, reading GPU health from `health`
    /// and the lease's end from `lease`.
    pub fn register(
        health: &watch::Receiver<Vec<GpuSample>>,
        lease: watch::Receiver<Option<Instant>>,
    ) -> AgentMetrics {
        let meter = corral_telemetry::meter();
        let per_gpu: [(&'static str, &'static str, &'static str, Reading); 5] = [
            (
                "corral.gpu.temperature",
                "GPU die temperature",
                "Cel",
                |s| s.temperature_c.map(f64::from),
            ),
            ("corral.gpu.power", "GPU power draw", "W", |s| s.power_w),
            ("corral.gpu.memory.used", "GPU memory in use", "MiBy", |s| {
                s.memory_used_mb.map(|m| m as f64)
            }),
            (
                "corral.gpu.utilization",
                "Percent of the last sample period a kernel ran",
                "%",
                |s| s.utilization_pct.map(f64::from),
            ),
            (
                "corral.gpu.healthy",
                "1 while the GPU may run jobs, 0 when it reports a problem",
                "",
                |s| Some(if s.healthy { 1.0 } else { 0.0 }),
            ),
        ];
        let mut gauges = Vec::new();
        for (name, description, unit, read) in per_gpu {
            let health = health.clone();
            gauges.push(
                meter
                    .f64_observable_gauge(name)
                    .with_description(description)
                    .with_unit(unit)
                    .with_callback(move |observer| {
                        for sample in health.borrow().iter() {
                            if let Some(value) = read(sample) {
                                observer.observe(
                                    value,
                                    &[KeyValue::new("gpu", i64::from(sample.index))],
                                );
                            }
                        }
                    })
                    .build(),
            );
        }
        gauges.push(
            meter
                .f64_observable_gauge("corral.agent.lease.remaining")
                .with_description(
                    "How long the lease this node's jobs run under has left (0: lapsed)",
                )
                .with_unit("ms")
                .with_callback(move |observer| {
                    let left = lease.borrow().map_or(0.0, |end| {
                        end.saturating_duration_since(Instant::now()).as_secs_f64() * 1000.0
                    });
                    observer.observe(left, &[]);
                })
                .build(),
        );
        AgentMetrics {
            _gauges: gauges,
            xids: meter
                .u64_counter("corral.gpu.xids")
                .with_description("XID errors the GPUs raised, by GPU and XID code")
                .build(),
            fencings: meter
                .u64_counter("corral.agent.fencings")
                .with_description("Times this node killed its jobs because its lease lapsed")
                .build(),
        }
    }

    /// GPU `gpu` raised XID `xid`.
    pub fn xid(&self, gpu: u32, xid: u32) {
        self.xids.add(
            1,
            &[
                KeyValue::new("gpu", i64::from(gpu)),
                KeyValue::new("xid", i64::from(xid)),
            ],
        );
    }

    /// This node fenced its jobs.
    pub fn fenced(&self) {
        self.fencings.add(1, &[]);
    }
}
