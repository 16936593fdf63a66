//! The NVML backend on this machine's real GPUs: inventory, details and health
//! samples checked against `nvidia-smi` (where it is installed) and physical
//! bounds, and the XID watch's registration, wait loop and shutdown.
//!
//! Where there is no NVIDIA driver or GPU, each test says it is skipped and
//! passes; with `CORRAL_REQUIRE_GPU=1` it fails instead, so a run on a GPU
//! machine cannot pass by skipping. The tests only read: no GPU setting is
//! changed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use corral_agent::gpu::{
    GpuBackend, GpuError, NVML_EVENT_WAIT_MS, NVML_READINGS, NvmlGpus, XidWatchState,
};

/// Opens the backend, or says why the test is skipped (`None`).
fn open_or_skip(test: &str) -> Option<NvmlGpus> {
    match NvmlGpus::open() {
        Ok(gpus) => Some(gpus),
        Err(
            error @ (GpuError::NvmlLibraryMissing { .. }
            | GpuError::NvmlDriverNotLoaded
            | GpuError::NvmlNoGpus),
        ) => {
            assert!(
                std::env::var("CORRAL_REQUIRE_GPU").as_deref() != Ok("1"),
                "{test}: CORRAL_REQUIRE_GPU=1 but there is no usable GPU: {error}"
            );
            eprintln!("skipped {test}: no NVIDIA GPU here ({error})");
            None
        }
        Err(error) => panic!("{test}: NVML is installed but cannot be opened: {error}"),
    }
}

/// `nvidia-smi --query-gpu=FIELDS` as rows of fields, or `None` without it.
fn nvidia_smi(fields: &str) -> Option<Vec<Vec<String>>> {
    let out = Command::new("nvidia-smi")
        .arg(format!("--query-gpu={fields}"))
        .args(["--format=csv,noheader,nounits"])
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "nvidia-smi failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|line| line.split(',').map(|f| f.trim().to_string()).collect())
            .collect(),
    )
}

#[test]
fn the_inventory_and_details_are_what_nvidia_smi_reports() {
    let Some(gpus) = open_or_skip("the_inventory_and_details_are_what_nvidia_smi_reports") else {
        return;
    };
    let details = gpus.details();
    eprintln!("{}", serde_json::to_string_pretty(&details).unwrap());
    assert!(!details.gpus.is_empty());
    for (position, gpu) in details.gpus.iter().enumerate() {
        assert_eq!(
            gpu.info.index as usize, position,
            "indices are NVML's, in order"
        );
        assert!(
            gpu.info.uuid.starts_with("GPU-"),
            "a whole GPU's UUID: {}",
            gpu.info.uuid
        );
        assert!(!gpu.info.name.is_empty() && !gpu.info.model.is_empty());
        assert!(gpu.memory_total_mib.unwrap_or(0) > 1024, "{gpu:?}");
        assert!(gpu.compute_capability.is_some(), "{gpu:?}");
    }
    assert!(details.driver_version.is_some() && details.cuda_driver_version.is_some());
    let Some(rows) = nvidia_smi("index,uuid,name,memory.total,driver_version,mig.mode.current")
    else {
        eprintln!("nvidia-smi is not installed: the comparison with it is skipped");
        return;
    };
    assert_eq!(rows.len(), details.gpus.len(), "{rows:?}");
    for (row, gpu) in rows.iter().zip(&details.gpus) {
        assert_eq!(row[0], gpu.info.index.to_string());
        assert_eq!(row[1], gpu.info.uuid);
        assert_eq!(row[2], gpu.info.name);
        assert_eq!(
            row[3].parse::<u64>().ok(),
            gpu.memory_total_mib,
            "total memory, MiB"
        );
        assert_eq!(Some(&row[4]), details.driver_version.as_ref());
        if let Some(mig) = gpu.mig_mode {
            let smi = if mig.current { "Enabled" } else { "Disabled" };
            assert_eq!(row[5], smi, "MIG mode");
        }
    }
}

#[test]
fn health_samples_read_every_gpu_within_physical_bounds() {
    let Some(gpus) = open_or_skip("health_samples_read_every_gpu_within_physical_bounds") else {
        return;
    };
    let details = gpus.details();
    let samples = gpus.sample();
    eprintln!("{}", serde_json::to_string_pretty(&samples).unwrap());
    assert_eq!(samples.len(), details.gpus.len());
    for (sample, gpu) in samples.iter().zip(&details.gpus) {
        assert_eq!(sample.index, gpu.info.index);
        let temperature = sample
            .temperature_c
            .expect("every data-centre GPU has a sensor");
        assert!((5..=110).contains(&temperature), "{sample:?}");
        if let (Some(power), Some(limit)) = (sample.power_w, gpu.power_limit_w) {
            assert!(
                power > 0.0 && power <= limit * 1.5,
                "{sample:?} limit {limit}"
            );
        }
        if let Some(busy) = sample.utilization_pct {
            assert!(busy <= 100, "{sample:?}");
        }
        assert!(
            sample.retired_pages_pending.is_some() || sample.row_remap_pending.is_some(),
            "a data-centre GPU reports pending page retirement or row remapping: {sample:?}"
        );
        let used = sample.memory_used_mb.expect("memory in use");
        assert!(
            used <= gpu.memory_total_mib.unwrap_or(u64::MAX),
            "{sample:?}"
        );
        assert!(
            sample.healthy,
            "GPU {} reports a problem; if the GPU is really faulty this test is right to \
             fail: {:?}",
            sample.index, sample.problem
        );
    }
}

#[test]
fn the_xid_watch_registers_waits_and_stops_when_closed() {
    let Some(gpus) = open_or_skip("the_xid_watch_registers_waits_and_stops_when_closed") else {
        return;
    };
    let patience = Duration::from_secs(60);
    let started = Instant::now();
    let watch = loop {
        let watch = gpus.details().xid_watch;
        if watch.state != XidWatchState::Starting {
            break watch;
        }
        assert!(started.elapsed() < patience, "registration hangs");
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!(
        "after {:?}: {}",
        started.elapsed(),
        serde_json::to_string_pretty(&watch).unwrap()
    );
    match watch.state {
        XidWatchState::Watching => {
            assert!(!watch.watched.is_empty());
            for gpu in &watch.watched {
                assert!(
                    gpu.events.iter().any(|e| e == "CRITICAL_XID_ERROR"),
                    "{gpu:?}"
                );
            }
            // The wait loop runs: waits come back with a timeout (nothing is
            // wrong with the GPUs) about once per wait timeout.
            let waited = Instant::now();
            loop {
                let waits = gpus.details().xid_watch.waits;
                assert_eq!(waits.errors, 0, "event waits fail: {waits:?}");
                if waits.timeouts >= 2 {
                    eprintln!(
                        "2 waits of {NVML_EVENT_WAIT_MS} ms timed out after {:?}: {waits:?}",
                        waited.elapsed()
                    );
                    break;
                }
                assert!(waited.elapsed() < patience, "the wait loop does not turn");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        XidWatchState::Off => {
            // A driver or VM without event support: the agent runs without XID
            // fail-fast and says why. Say it here too.
            let reason = watch.reason.clone().expect("an Off watch says why");
            eprintln!("the XID watch is off on this machine: {reason}: {watch:?}");
            assert!(!watch.left_out.is_empty(), "each GPU left out says why");
        }
        other => panic!("unexpected XID watch state {other:?}"),
    }
    let closing = Instant::now();
    gpus.close(Duration::from_secs(10))
        .expect("the event thread ends when the backend closes");
    eprintln!("the event thread ended {:?} after close", closing.elapsed());
}

#[test]
fn each_gpu_is_sampled_on_its_own_and_an_unknown_index_is_refused() {
    let Some(gpus) = open_or_skip("each_gpu_is_sampled_on_its_own_and_an_unknown_index_is_refused")
    else {
        return;
    };
    let count = gpus.gpus().len() as u32;
    for index in 0..count {
        let (sample, costs) = gpus.sample_timed(index).expect("a GPU of this node");
        assert_eq!(sample.index, index);
        let names: Vec<&str> = costs.iter().map(|c| c.reading).collect();
        eprintln!("GPU {index}: readings taken {names:?}");
        assert_eq!(names.first(), Some(&"open"));
        let order = |name: &&str| NVML_READINGS.iter().position(|r| r == name);
        assert!(
            names.iter().all(|n| order(n).is_some()) && names.is_sorted_by_key(order),
            "{names:?}"
        );
        // What the GPU does not support is asked once: the next sample skips it.
        let (_, again) = gpus.sample_timed(index).expect("a GPU of this node");
        let again: Vec<&str> = again.iter().map(|c| c.reading).collect();
        assert!(again.iter().all(|name| names.contains(name)), "{again:?}");
        for reading in ["temperature", "memory"] {
            assert!(again.contains(&reading), "{reading} is read every time");
        }
    }
    assert!(gpus.sample_timed(count).is_none());
}
