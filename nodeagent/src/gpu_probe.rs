//! `corral-agent gpus`: what this node's GPUs look like to the agent, for an
//! operator commissioning a node. It opens the backend the agent would (`--gpus`),
//! lets the XID watch run for a while, and prints the inventory the controllers
//! will be sent, each GPU's memory, MIG and ECC modes and limits, a health
//! sample, and which event types are registered for XID fail-fast. It needs no
//! controller.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use serde::Serialize;

use crate::gpu::{
    GpuBackend, GpuProcess, GpuSample, GpuSpec, NodeGpuDetails, NvmlGpus, XidWatchState,
    backend_from_spec,
};

/// The agent's subcommand that runs the probe.
pub const SUBCOMMAND: &str = "gpus";

/// How long the probe waits for the XID watch to register its events.
const REGISTRATION_PATIENCE: Duration = Duration::from_secs(30);

/// `corral-agent gpus`.
#[derive(Debug, Parser)]
#[command(
    name = "corral-agent gpus",
    about = "Show this node's GPUs as the agent sees them (inventory, health, XID watch)"
)]
pub struct ProbeArgs {
    /// GPUs: `nvml`, `simulated:COUNT:TYPE` or `none`, as for the agent.
    #[arg(long, default_value = "nvml")]
    gpus: String,
    /// Seconds to let the XID watch wait for events before reporting (its
    /// waits are counted in the report).
    #[arg(long, default_value_t = 3)]
    listen_s: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// The probe's report.
#[derive(Debug, Serialize)]
struct Report {
    #[serde(flatten)]
    details: NodeGpuDetails,
    samples: Vec<GpuSample>,
    /// What runs on the GPUs (by the UUID of the GPU or MIG instance).
    processes: Vec<GpuProcess>,
    /// Why the processes could not be listed, when they could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    processes_error: Option<String>,
}

impl Report {
    fn of(backend: &dyn GpuBackend, details: NodeGpuDetails, samples: Vec<GpuSample>) -> Self {
        let (processes, processes_error) = match backend.processes() {
            Ok(listed) => (listed, None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        Report {
            details,
            samples,
            processes,
            processes_error,
        }
    }
}

/// Runs `corral-agent gpus ARGS` (the arguments after the subcommand).
pub fn run(args: impl IntoIterator<Item = String>) -> ExitCode {
    let args = ProbeArgs::parse_from(std::iter::once(SUBCOMMAND.to_string()).chain(args));
    match probe(&args) {
        Ok(report) => {
            let printed = if args.json {
                serde_json::to_string_pretty(&report)
                    .map(|text| println!("{text}"))
                    .map_err(|e| e.to_string())
            } else {
                print_text(&report);
                Ok(())
            };
            match printed {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("corral-agent gpus: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("corral-agent gpus: {e}");
            ExitCode::FAILURE
        }
    }
}

fn probe(args: &ProbeArgs) -> Result<Report, String> {
    let spec: GpuSpec = args.gpus.parse().map_err(|e| format!("{e}"))?;
    if spec == GpuSpec::Nvml {
        let gpus = NvmlGpus::open().map_err(|e| e.to_string())?;
        let report = listen_and_report(&gpus, Duration::from_secs(args.listen_s));
        if let Err(e) = gpus.close(Duration::from_secs(5)) {
            // The report still stands; the stuck wait is worth knowing too.
            eprintln!("corral-agent gpus: {e}");
        }
        return Ok(report);
    }
    let dir = tempfile_dir()?;
    let backend = backend_from_spec(&args.gpus, &dir).map_err(|e| e.to_string())?;
    let report = Report::of(&backend, backend.details(), backend.gpu_samples());
    let _ = std::fs::remove_dir_all(&dir);
    Ok(report)
}

/// Waits for the XID watch to leave `Starting`, lets it wait for events for
/// `listen`, then reads the GPUs.
fn listen_and_report(gpus: &NvmlGpus, listen: Duration) -> Report {
    let deadline = std::time::Instant::now() + REGISTRATION_PATIENCE;
    while gpus.details().xid_watch.state == XidWatchState::Starting
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(listen);
    Report::of(gpus, gpus.details(), gpus.sample())
}

/// A private directory for a simulated backend's control socket.
fn tempfile_dir() -> Result<std::path::PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("corral-agent-gpus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

fn print_text(report: &Report) {
    let d = &report.details;
    let or_dash = |value: Option<String>| value.unwrap_or_else(|| "-".to_string());
    println!("backend        {}", d.backend);
    println!("driver         {}", or_dash(d.driver_version.clone()));
    println!("NVML           {}", or_dash(d.nvml_version.clone()));
    println!("CUDA (driver)  {}", or_dash(d.cuda_driver_version.clone()));
    let mut slot = 0;
    for gpu in &d.gpus {
        let info = &gpu.info;
        println!();
        println!("GPU {}  {}  (type {})", info.index, info.name, info.model);
        println!("  uuid           {}", info.uuid);
        println!("  pci            {}", or_dash(gpu.pci_bus_id.clone()));
        println!(
            "  memory         {}",
            or_dash(gpu.memory_total_mib.map(|mib| format!("{mib} MiB")))
        );
        println!(
            "  MIG            {}",
            or_dash(gpu.mig_mode.map(|mode| {
                let word = |on: bool| if on { "enabled" } else { "disabled" };
                if mode.current == mode.pending {
                    word(mode.current).to_string()
                } else {
                    format!(
                        "{} ({} after reset)",
                        word(mode.current),
                        word(mode.pending)
                    )
                }
            }))
        );
        if info.mig.is_empty() {
            slot += 1;
        }
        for instance in &info.mig {
            println!(
                "  MIG instance   {}  {}  (scheduled as GPU {slot}, type {}_{})",
                instance.profile, instance.uuid, info.model, instance.profile
            );
            slot += 1;
        }
        println!(
            "  ECC            {}",
            or_dash(
                gpu.ecc_enabled
                    .map(|on| if on { "on" } else { "off" }.to_string())
            )
        );
        println!(
            "  compute cap.   {}",
            or_dash(gpu.compute_capability.clone())
        );
        println!(
            "  power limit    {}",
            or_dash(gpu.power_limit_w.map(|w| format!("{w:.0} W")))
        );
        println!(
            "  temp. limits   slowdown {} / shutdown {}",
            or_dash(gpu.slowdown_temperature_c.map(|c| format!("{c} C"))),
            or_dash(gpu.shutdown_temperature_c.map(|c| format!("{c} C")))
        );
        println!(
            "  events         {}",
            if gpu.supported_events.is_empty() {
                "-".to_string()
            } else {
                gpu.supported_events.join(", ")
            }
        );
        if let Some(sample) = report.samples.iter().find(|s| s.index == info.index) {
            println!(
                "  health         {} | {} | {} | {} | ECC uncorrected {} | pages pending retirement {} | rows pending remap {} | row remap failed {}",
                or_dash(sample.temperature_c.map(|c| format!("{c} C"))),
                or_dash(sample.power_w.map(|w| format!("{w:.1} W"))),
                or_dash(sample.utilization_pct.map(|u| format!("{u}% busy"))),
                or_dash(sample.memory_used_mb.map(|m| format!("{m} MiB used"))),
                or_dash(sample.ecc_uncorrected_volatile.map(|n| n.to_string())),
                or_dash(sample.retired_pages_pending.map(|p| p.to_string())),
                or_dash(sample.row_remap_pending.map(|p| p.to_string())),
                or_dash(sample.row_remap_failed.map(|p| p.to_string())),
            );
            match &sample.problem {
                None => println!("  verdict        healthy"),
                Some(problem) => println!("  verdict        UNHEALTHY: {problem}"),
            }
        }
        let mut uuids = vec![info.uuid.as_str()];
        uuids.extend(info.mig.iter().map(|m| m.uuid.as_str()));
        let pids: Vec<String> = report
            .processes
            .iter()
            .filter(|p| uuids.contains(&p.uuid.as_str()))
            .map(|p| p.pid.to_string())
            .collect();
        match &report.processes_error {
            Some(e) => println!("  processes      cannot be listed: {e}"),
            None if pids.is_empty() => println!("  processes      none"),
            None => println!("  processes      {}", pids.join(", ")),
        }
    }
    let watch = &d.xid_watch;
    println!();
    println!(
        "XID watch      {}{}",
        serde_json::to_value(watch.state)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        watch
            .reason
            .as_ref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default()
    );
    for gpu in &watch.watched {
        println!("  GPU {}        {}", gpu.index, gpu.events.join(", "));
    }
    for gpu in &watch.left_out {
        println!("  GPU {}        not watched: {}", gpu.index, gpu.reason);
    }
    if d.backend == "nvml" {
        println!(
            "  waits          {} timed out, {} with an event, {} failed",
            watch.waits.timeouts, watch.waits.events, watch.waits.errors
        );
    }
}
