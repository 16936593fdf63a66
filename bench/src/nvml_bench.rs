//! `corral-bench nvml`: what health sampling costs on this node's real GPUs,
//! through the agent's own NVML backend. Per GPU, the time of one sample (the
//! six readings a heartbeat carries) and of each reading; for the node, one
//! full sample of every GPU (what the agent's sampling task does every 500 ms)
//! and its share of that period. Also: the time to open the backend and to read
//! the details, and the XID watch's state when done. Needs the NVIDIA driver;
//! elsewhere it says so and fails.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use corral_agent::gpu::{GpuBackend, NvmlGpus, XidWatchState};
use serde_json::json;

use crate::figures::{Report, Samples};

/// How often the agent samples (its HEALTH_SAMPLE_EVERY).
const AGENT_SAMPLE_PERIOD: Duration = Duration::from_millis(500);

/// Arguments of `corral-bench nvml`.
#[derive(Args)]
pub struct NvmlArgs {
    /// Samples of every GPU to time (after 10 untimed ones).
    #[arg(long, default_value_t = 200)]
    rounds: usize,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs the benchmark.
pub fn run(args: &NvmlArgs) -> anyhow::Result<()> {
    let opened = Instant::now();
    let gpus = NvmlGpus::open().context("opening the GPUs through NVML")?;
    let open_ms = opened.elapsed().as_secs_f64() * 1e3;
    let infos = gpus.gpus();
    let details_started = Instant::now();
    let details = gpus.details();
    let details_ms = details_started.elapsed().as_secs_f64() * 1e3;
    for _ in 0..10 {
        let _ = gpus.sample();
    }
    let mut per_gpu: BTreeMap<u32, Samples> = BTreeMap::new();
    let mut per_reading: BTreeMap<&'static str, Samples> = BTreeMap::new();
    let mut node = Samples::default();
    for _ in 0..args.rounds {
        for info in &infos {
            let started = Instant::now();
            let Some((_, costs)) = gpus.sample_timed(info.index) else {
                anyhow::bail!("GPU {} vanished from the backend", info.index);
            };
            per_gpu
                .entry(info.index)
                .or_default()
                .push(started.elapsed());
            for cost in costs {
                per_reading.entry(cost.reading).or_default().push(cost.took);
            }
        }
        let started = Instant::now();
        let _ = gpus.sample();
        node.push(started.elapsed());
    }
    let watch = gpus.details().xid_watch;
    gpus.close(Duration::from_secs(5))
        .context("stopping the XID watch")?;

    let mut report = Report::default();
    report.put("gpus", infos.len() as u64);
    report.put(
        "model",
        infos.first().map(|i| i.name.clone()).unwrap_or_default(),
    );
    report.put("driver", details.driver_version.unwrap_or_default());
    report.put("rounds", args.rounds as u64);
    report.put("open_ms", open_ms);
    report.put("details_ms", details_ms);
    let gpu_figures: Vec<serde_json::Value> = per_gpu
        .iter_mut()
        .map(|(index, samples)| {
            json!({
                "index": index,
                "sample_us_median": round(samples.quantile(0.5)),
                "sample_us_p99": round(samples.quantile(0.99)),
                "sample_us_max": round(samples.quantile(1.0)),
            })
        })
        .collect();
    report.put("per_gpu", serde_json::Value::Array(gpu_figures));
    let readings: serde_json::Map<String, serde_json::Value> = per_reading
        .iter_mut()
        .map(|(name, samples)| {
            (
                (*name).to_string(),
                json!({
                    "us_median": round(samples.quantile(0.5)),
                    "us_p99": round(samples.quantile(0.99)),
                }),
            )
        })
        .collect();
    report.put("per_reading", serde_json::Value::Object(readings));
    let node_median = node.quantile(0.5);
    report.put("node_sample_us_median", node_median);
    report.put("node_sample_us_p99", node.quantile(0.99));
    report.put("node_sample_us_max", node.quantile(1.0));
    report.put(
        "node_sample_share_of_period_pct",
        node_median / (AGENT_SAMPLE_PERIOD.as_secs_f64() * 1e6) * 100.0,
    );
    report.put(
        "xid_watch",
        match watch.state {
            XidWatchState::Watching => format!(
                "watching {} GPUs ({} waits timed out, {} events, {} failed)",
                watch.watched.len(),
                watch.waits.timeouts,
                watch.waits.events,
                watch.waits.errors
            ),
            other => format!("{other:?}: {}", watch.reason.unwrap_or_default()),
        },
    );
    report.print(args.json)
}

/// Rounded to a tenth of a microsecond.
fn round(micros: f64) -> f64 {
    (micros * 10.0).round() / 10.0
}
