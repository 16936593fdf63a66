//! Reading what NVML knows about each GPU beyond the inventory: versions,
//! memory, MIG and ECC modes, compute capability, power limit, temperature
//! thresholds and supported event types. Each reading the GPU does not give is
//! left out rather than failing the whole report.

use nvml_wrapper::enum_wrappers::device::TemperatureThreshold;
use nvml_wrapper::{Device, Nvml, cuda_driver_version_major, cuda_driver_version_minor};

use super::events::event_names;
use crate::gpu::backend::GpuInfo;
use crate::gpu::details::{GpuDetails, MigModes, NodeGpuDetails, XidWatch};

/// Bytes in a MiB.
const MIB: u64 = 1 << 20;

/// The node's GPUs and driver, with the XID watch as it stands.
pub fn read(nvml: &Nvml, infos: &[GpuInfo], xid_watch: XidWatch) -> NodeGpuDetails {
    NodeGpuDetails {
        backend: "nvml".to_string(),
        driver_version: nvml.sys_driver_version().ok(),
        nvml_version: nvml.sys_nvml_version().ok(),
        cuda_driver_version: nvml.sys_cuda_driver_version().ok().map(|version| {
            format!(
                "{}.{}",
                cuda_driver_version_major(version),
                cuda_driver_version_minor(version)
            )
        }),
        gpus: infos
            .iter()
            .map(|info| match nvml.device_by_index(info.index) {
                Ok(device) => gpu(info, &device),
                Err(error) => {
                    tracing::warn!(gpu = info.index, %error, "NVML cannot open the GPU");
                    GpuDetails::inventory_only(info.clone())
                }
            })
            .collect(),
        xid_watch,
    }
}

fn gpu(info: &GpuInfo, device: &Device<'_>) -> GpuDetails {
    GpuDetails {
        info: info.clone(),
        pci_bus_id: device.pci_info().ok().map(|pci| pci.bus_id),
        memory_total_mib: device.memory_info().ok().map(|memory| memory.total / MIB),
        mig_mode: device.mig_mode().ok().map(|mode| MigModes {
            current: mode.current != 0,
            pending: mode.pending != 0,
        }),
        ecc_enabled: device
            .is_ecc_enabled()
            .ok()
            .map(|ecc| ecc.currently_enabled),
        compute_capability: device
            .cuda_compute_capability()
            .ok()
            .map(|cc| format!("{}.{}", cc.major, cc.minor)),
        power_limit_w: device
            .enforced_power_limit()
            .ok()
            .map(|milliwatts| f64::from(milliwatts) / 1000.0),
        slowdown_temperature_c: device
            .temperature_threshold(TemperatureThreshold::Slowdown)
            .ok(),
        shutdown_temperature_c: device
            .temperature_threshold(TemperatureThreshold::Shutdown)
            .ok(),
        supported_events: device
            .supported_event_types()
            .map(event_names)
            .unwrap_or_default(),
    }
}
