//! The `GpuBackend` trait every GPU source implements (NVML, simulated, none), and
//! the records it returns: what the GPUs are, how they are doing, and the XID
//! errors they raise.

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedReceiver;

use super::details::NodeGpuDetails;
use super::error::GpuError;

/// One GPU as the scheduler sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// The GPU's index on this node (NVML's index, `CUDA_VISIBLE_DEVICES` order).
    pub index: u32,
    /// Short lowercase type used for scheduling (`h100`, `a100`, `l40s`): the
    /// `TYPE` in `--gres=gpu:TYPE:N`. See [`super::model_type`].
    pub model: String,
    /// The GPU's UUID (`GPU-...`), stable across reboots and renumbering.
    pub uuid: String,
    /// The full product name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// The MIG instances this GPU is split into; empty when MIG is off. A
    /// backend lists physical GPUs; [`super::GpuSlots`] makes each instance a
    /// GPU of its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mig: Vec<MigInstance>,
    /// MIG mode is on. Such a GPU is offered only as its instances: with none
    /// (not created yet, or unreadable), it offers nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mig_mode: bool,
}

/// One MIG instance of a GPU in MIG mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigInstance {
    /// Its profile as Slurm names it: `3g.20gb` (compute slices, memory in GiB).
    pub profile: String,
    /// Its UUID (`MIG-...`), by which `CUDA_VISIBLE_DEVICES` names it.
    pub uuid: String,
}

/// One GPU's health at one moment. A reading the GPU does not support is `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    /// The GPU's index on this node.
    pub index: u32,
    /// Die temperature in degrees Celsius.
    pub temperature_c: Option<u32>,
    /// Power draw in watts.
    pub power_w: Option<f64>,
    /// Percent of the last sample period in which a kernel ran.
    pub utilization_pct: Option<u32>,
    /// Device memory in use, in MiB (2^20 bytes, Slurm's "MB").
    pub memory_used_mb: Option<u64>,
    /// Uncorrected ECC errors since the driver loaded.
    pub ecc_uncorrected_volatile: Option<u64>,
    /// Whether retired memory pages wait for a GPU reset to take effect (GPUs
    /// before Ampere).
    pub retired_pages_pending: Option<bool>,
    /// Whether memory rows wait for a GPU reset to be remapped (Ampere and
    /// newer, which remap rows instead of retiring pages).
    #[serde(default)]
    pub row_remap_pending: Option<bool>,
    /// Whether remapping a memory row failed: the GPU needs service.
    #[serde(default)]
    pub row_remap_failed: Option<bool>,
    /// Whether the GPU may run jobs. `false` comes with a `problem`.
    pub healthy: bool,
    /// Why the GPU is unhealthy, in words for an operator.
    pub problem: Option<String>,
}

/// An XID error reported by the driver for one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XidEvent {
    /// The GPU's index on this node (from [`super::GpuSlots`]: the slot's).
    pub gpu: u32,
    /// The XID number; see [`super::classify_xid`] for what to do about it.
    pub xid: u32,
    /// Where the event came from and anything else known about it.
    pub detail: String,
}

/// A process that holds a context on a GPU: what NVML lists as running there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcess {
    /// The UUID of the GPU (`GPU-...`) or MIG instance (`MIG-...`) it runs on,
    /// as the slot's [`GpuInfo::uuid`] names it.
    pub uuid: String,
    /// The process.
    pub pid: u32,
}

/// A source of GPU inventory, health and XID events.
///
/// Implementations are cheap to query: [`GpuBackend::sample`] runs every
/// few hundred milliseconds, off the heartbeat's path.
pub trait GpuBackend: Send + Sync + 'static {
    /// The backend's name: `"nvml"`, `"simulated"` or `"none"`.
    fn kind(&self) -> &'static str;

    /// The GPUs on this node, by index. Fixed for the backend's life.
    fn gpus(&self) -> Vec<GpuInfo>;

    /// A health sample of every GPU, by index.
    fn sample(&self) -> Vec<GpuSample>;

    /// What the backend knows about the GPUs beyond the inventory (driver,
    /// memory, MIG mode, supported events) and the state of the XID watch.
    fn details(&self) -> NodeGpuDetails;

    /// XID events as they happen (fed from a dedicated thread, since NVML's
    /// event wait blocks).
    ///
    /// Call it once, at start-up, and keep the receiver: the first receiver also
    /// gets the events raised since the backend was opened (up to
    /// [`super::XID_BACKLOG_MAX`]). Later calls are allowed and each returns a
    /// receiver of the events raised from then on. The receiver never closes
    /// while the backend lives.
    fn xid_events(&self) -> UnboundedReceiver<XidEvent>;

    /// The processes that hold a context on a GPU now (compute and
    /// graphics), each by the GPU or MIG instance it runs on: how a job's
    /// process that left its process group, its cgroup and its environment is
    /// still found before its GPUs are given to another job.
    fn processes(&self) -> Result<Vec<GpuProcess>, GpuError>;
}
