//! `NvmlGpus`: real GPUs through NVML (the nvml-wrapper crate, which loads
//! `libnvidia-ml.so.1` at run time). Inventory at open, samples on demand, and
//! XID events from a dedicated thread.

mod events;
mod open;
mod sample;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nvml_wrapper::Nvml;
use tokio::sync::mpsc::UnboundedReceiver;

use super::backend::{GpuBackend, GpuInfo, GpuSample, XidEvent};
use super::error::GpuError;
use super::fanout::XidFanout;

/// The GPUs of this node, through NVML.
///
/// A GPU that raised an XID which drains it (see [`super::classify_xid`])
/// reports unhealthy with that XID as its problem for the rest of the backend's
/// life: the fault needs a GPU reset, after which the agent is restarted.
#[derive(Debug)]
pub struct NvmlGpus {
    infos: Vec<GpuInfo>,
    shared: Arc<Shared>,
}

/// What the backend and its event thread share.
#[derive(Debug)]
struct Shared {
    nvml: Nvml,
    fanout: XidFanout,
    /// Per GPU index, the draining XID it raised.
    drained: Mutex<BTreeMap<u32, String>>,
    /// Set when the backend is dropped; the event thread then ends.
    stop: AtomicBool,
}

impl Shared {
    /// The drained GPUs, even after a panic elsewhere: each update leaves the map
    /// consistent.
    fn drained(&self) -> MutexGuard<'_, BTreeMap<u32, String>> {
        self.drained
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl NvmlGpus {
    /// Loads NVML, lists the GPUs and starts watching for XID errors.
    ///
    /// Fails with [`GpuError::NvmlLibraryMissing`] on a node without the NVIDIA
    /// driver, [`GpuError::NvmlDriverNotLoaded`] when the library is there but the
    /// kernel driver is not, and [`GpuError::NvmlNoGpus`] when NVML sees no GPU.
    pub fn open() -> Result<Self, GpuError> {
        let nvml = open::init()?;
        let infos = open::inventory(&nvml)?;
        let shared = Arc::new(Shared {
            nvml,
            fanout: XidFanout::new(),
            drained: Mutex::new(BTreeMap::new()),
            stop: AtomicBool::new(false),
        });
        events::spawn(Arc::clone(&shared), infos.clone())?;
        Ok(Self { infos, shared })
    }
}

impl Drop for NvmlGpus {
    fn drop(&mut self) {
        // The event thread sees this within one wait timeout and ends.
        self.shared.stop.store(true, Ordering::SeqCst);
    }
}

impl GpuBackend for NvmlGpus {
    fn kind(&self) -> &'static str {
        "nvml"
    }

    fn gpus(&self) -> Vec<GpuInfo> {
        self.infos.clone()
    }

    fn sample(&self) -> Vec<GpuSample> {
        let drained = self.shared.drained().clone();
        self.infos
            .iter()
            .map(|info| {
                sample::sample_gpu(
                    &self.shared.nvml,
                    info.index,
                    drained.get(&info.index).map(String::as_str),
                )
            })
            .collect()
    }

    fn xid_events(&self) -> UnboundedReceiver<XidEvent> {
        self.shared.fanout.subscribe()
    }
}
