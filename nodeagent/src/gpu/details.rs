//! What a backend can tell an operator about its GPUs beyond the inventory the
//! scheduler uses: driver versions, each GPU's memory, MIG mode, ECC mode, limits
//! and the events it supports, and the state of the XID watch. `corral-agent
//! gpus` prints it; the agent logs the XID watch when it starts.

use serde::{Deserialize, Serialize};

use super::backend::GpuInfo;

/// A node's GPUs as the backend sees them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeGpuDetails {
    /// The backend's name (`nvml`, `simulated`, `none`).
    pub backend: String,
    /// The kernel driver's version (`580.159.04`), where the backend knows it.
    pub driver_version: Option<String>,
    /// NVML's own version.
    pub nvml_version: Option<String>,
    /// The newest CUDA version the driver supports (`13.0`).
    pub cuda_driver_version: Option<String>,
    /// Each GPU, by index.
    pub gpus: Vec<GpuDetails>,
    /// Whether, and how, XID errors are being watched.
    pub xid_watch: XidWatch,
}

/// One GPU. A reading the GPU or backend does not give is `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuDetails {
    /// Index, type, UUID and name, as registered with the controllers.
    #[serde(flatten)]
    pub info: GpuInfo,
    /// The PCI bus id (`00000000:18:00.0`), as in the kernel log's XID lines.
    pub pci_bus_id: Option<String>,
    /// Installed memory, MiB.
    pub memory_total_mib: Option<u64>,
    /// MIG mode now and after the next GPU reset.
    pub mig_mode: Option<MigModes>,
    /// Whether ECC is on now.
    pub ecc_enabled: Option<bool>,
    /// CUDA compute capability (`9.0`).
    pub compute_capability: Option<String>,
    /// The power limit the GPU enforces, watts.
    pub power_limit_w: Option<f64>,
    /// Temperature at which the GPU slows itself down, °C.
    pub slowdown_temperature_c: Option<u32>,
    /// Temperature at which the GPU shuts down, °C.
    pub shutdown_temperature_c: Option<u32>,
    /// The event types the driver can report for this GPU (NVML's names).
    pub supported_events: Vec<String>,
}

/// A GPU's MIG mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigModes {
    /// MIG is on now.
    pub current: bool,
    /// MIG will be on after the next GPU reset.
    pub pending: bool,
}

/// The XID watch: the thread that waits for the driver's error events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XidWatch {
    /// Where the watch is.
    pub state: XidWatchState,
    /// Why the watch is off, when it is.
    pub reason: Option<String>,
    /// The GPUs watched, and for which event types.
    pub watched: Vec<WatchedGpu>,
    /// GPUs that could not be watched, with why.
    pub left_out: Vec<UnwatchedGpu>,
    /// Waits on the event set that returned, by how they returned.
    pub waits: WaitCounts,
}

/// Where the XID watch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XidWatchState {
    /// Registering the GPUs' events.
    Starting,
    /// Waiting for events.
    Watching,
    /// Not watching: no GPU could be registered (see `reason`).
    Off,
    /// The backend closed and the thread ended.
    Ended,
    /// Faults come from the simulated backend's control socket, not a driver.
    Simulated,
    /// There are no GPUs to watch.
    NoGpus,
}

/// A GPU whose events are watched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchedGpu {
    /// The GPU's index.
    pub index: u32,
    /// The event types registered for it.
    pub events: Vec<String>,
}

/// A GPU left out of the watch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnwatchedGpu {
    /// The GPU's index.
    pub index: u32,
    /// Why it is not watched.
    pub reason: String,
}

/// How the event set's waits returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitCounts {
    /// With an event.
    pub events: u64,
    /// With nothing before the wait's timeout (the usual case).
    pub timeouts: u64,
    /// With an error.
    pub errors: u64,
}

impl XidWatch {
    /// A watch in `state` with nothing registered.
    pub fn empty(state: XidWatchState) -> Self {
        Self {
            state,
            reason: None,
            watched: Vec::new(),
            left_out: Vec::new(),
            waits: WaitCounts::default(),
        }
    }
}

impl NodeGpuDetails {
    /// What any backend knows: the inventory alone.
    pub fn from_inventory(backend: &str, gpus: Vec<GpuInfo>, xid_watch: XidWatch) -> Self {
        Self {
            backend: backend.to_string(),
            driver_version: None,
            nvml_version: None,
            cuda_driver_version: None,
            gpus: gpus.into_iter().map(GpuDetails::inventory_only).collect(),
            xid_watch,
        }
    }
}

impl GpuDetails {
    /// A GPU of which only the inventory is known.
    pub fn inventory_only(info: GpuInfo) -> Self {
        Self {
            info,
            pci_bus_id: None,
            memory_total_mib: None,
            mig_mode: None,
            ecc_enabled: None,
            compute_capability: None,
            power_limit_w: None,
            slowdown_temperature_c: None,
            shutdown_temperature_c: None,
            supported_events: Vec::new(),
        }
    }
}
