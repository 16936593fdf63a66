//! The NVML backend on this machine. Without libnvidia-ml (no GPU, no driver)
//! opening it must fail with the message that tells the operator what to do; on
//! a GPU machine it must list the GPUs and sample them.
#![allow(clippy::unwrap_used)]

use corral_agent::gpu::{GpuBackend, GpuError, NvmlGpus, backend_from_spec};

const NO_DRIVER: &str = "libnvidia-ml.so not found: this node has no NVIDIA driver; \
                         run the agent with --gpus simulated:N:TYPE for a simulated node";

#[test]
fn opening_nvml_fails_clearly_without_the_driver_or_works_with_it() {
    match NvmlGpus::open() {
        Err(error @ GpuError::NvmlLibraryMissing { .. }) => {
            assert_eq!(error.to_string(), NO_DRIVER);
        }
        Err(error @ (GpuError::NvmlDriverNotLoaded | GpuError::NvmlNoGpus)) => {
            assert!(error.to_string().contains("--gpus"), "{error}");
        }
        Err(other) => panic!("unexpected NVML error: {other}"),
        Ok(gpus) => {
            assert_eq!(gpus.kind(), "nvml");
            let infos = gpus.gpus();
            assert!(!infos.is_empty());
            assert!(infos.iter().all(|gpu| gpu.uuid.starts_with("GPU-")));
            let samples = gpus.sample();
            assert_eq!(samples.len(), infos.len());
            assert!(samples.iter().all(|s| s.temperature_c.is_some()));
            eprintln!("{infos:#?}\n{samples:#?}");
        }
    }
}

#[test]
fn the_nvml_spec_fails_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    if let Err(error) = backend_from_spec("nvml", dir.path()) {
        assert!(error.to_string().contains("--gpus"), "{error}");
    }
}
