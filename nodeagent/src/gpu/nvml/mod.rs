//! `NvmlGpus`: real GPUs through NVML (the nvml-wrapper crate, which loads
//! `libnvidia-ml.so.1` at run time). Inventory at open, samples on demand, and
//! XID events from a dedicated thread.

mod details;
mod events;
mod open;
mod processes;
mod sample;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nvml_wrapper::Nvml;
use tokio::sync::mpsc::UnboundedReceiver;

use super::backend::{GpuBackend, GpuInfo, GpuProcess, GpuSample, XidEvent};
use super::details::{NodeGpuDetails, XidWatch, XidWatchState};
use super::error::GpuError;
use super::fanout::XidFanout;

pub use events::WAIT_TIMEOUT_MS;
pub use sample::{READINGS, ReadingCost};

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
    /// Per GPU index, the readings it does not support (asked no more).
    unsupported: Mutex<BTreeMap<u32, sample::Unsupported>>,
    /// What the event thread registered and how its waits went.
    watch: Mutex<XidWatch>,
    /// Set when the backend is closed or dropped; the event thread then ends.
    stop: AtomicBool,
    /// Set by the event thread as it returns.
    event_thread_ended: AtomicBool,
}

impl Shared {
    /// The drained GPUs, even after a panic elsewhere: each update leaves the map
    /// consistent.
    fn drained(&self) -> MutexGuard<'_, BTreeMap<u32, String>> {
        self.drained
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Samples GPU `index`, skipping the readings it does not support.
    fn sample(&self, index: u32) -> (GpuSample, Vec<ReadingCost>) {
        let drained = self.drained().get(&index).cloned();
        let lock = || {
            self.unsupported
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        };
        let mut unsupported = lock().get(&index).cloned().unwrap_or_default();
        let taken =
            sample::sample_gpu_timed(&self.nvml, index, drained.as_deref(), &mut unsupported);
        lock().entry(index).or_default().extend(unsupported);
        taken
    }

    /// Changes the XID watch's record.
    fn update_watch(&self, change: impl FnOnce(&mut XidWatch)) {
        change(
            &mut self
                .watch
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
    }

    fn watch(&self) -> XidWatch {
        self.watch
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// Every GPU's index, type, UUID and name, read through NVML without starting
/// an XID watch (what `corral local up --gpu-backend nvml` configures the node
/// with). Fails as [`NvmlGpus::open`] does.
pub fn nvml_inventory() -> Result<Vec<GpuInfo>, GpuError> {
    open::inventory(&open::init()?)
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
        for info in infos.iter().filter(|info| !info.mig.is_empty()) {
            let profiles: Vec<&str> = info.mig.iter().map(|m| m.profile.as_str()).collect();
            tracing::info!(
                gpu = info.index,
                "this GPU is in MIG mode: its instances ({}) are scheduled as GPUs of their own",
                profiles.join(", ")
            );
        }
        let shared = Arc::new(Shared {
            nvml,
            fanout: XidFanout::new(),
            drained: Mutex::new(BTreeMap::new()),
            unsupported: Mutex::new(BTreeMap::new()),
            watch: Mutex::new(XidWatch::empty(XidWatchState::Starting)),
            stop: AtomicBool::new(false),
            event_thread_ended: AtomicBool::new(false),
        });
        events::spawn(Arc::clone(&shared), infos.clone())?;
        Ok(Self { infos, shared })
    }

    /// One GPU's sample, with what each NVML reading cost; `None` for an index
    /// this node does not have.
    pub fn sample_timed(&self, index: u32) -> Option<(GpuSample, Vec<ReadingCost>)> {
        self.infos.iter().find(|info| info.index == index)?;
        Some(self.shared.sample(index))
    }

    /// Stops the XID watch and waits up to `patience` for its thread to end
    /// (it checks every [`WAIT_TIMEOUT_MS`]). Dropping the backend stops it
    /// too, without waiting.
    pub fn close(self, patience: Duration) -> Result<(), GpuError> {
        self.shared.stop.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + patience;
        while !self.shared.event_thread_ended.load(Ordering::SeqCst) {
            if Instant::now() >= deadline {
                return Err(GpuError::EventThreadStuck { waited: patience });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
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
        self.infos
            .iter()
            .map(|info| self.shared.sample(info.index).0)
            .collect()
    }

    fn details(&self) -> NodeGpuDetails {
        details::read(&self.shared.nvml, &self.infos, self.shared.watch())
    }

    fn xid_events(&self) -> UnboundedReceiver<XidEvent> {
        self.shared.fanout.subscribe()
    }

    fn processes(&self) -> Result<Vec<GpuProcess>, GpuError> {
        processes::read(&self.shared.nvml, &self.infos)
    }
}
