//! `NoGpus`: the backend of a CPU node (`--gpus none`): no GPUs, no samples, and
//! an XID receiver that never yields.

use tokio::sync::mpsc::UnboundedReceiver;

use super::backend::{GpuBackend, GpuInfo, GpuProcess, GpuSample, XidEvent};
use super::details::{NodeGpuDetails, XidWatch, XidWatchState};
use super::error::GpuError;
use super::fanout::XidFanout;

/// A node without GPUs.
#[derive(Debug, Default)]
pub struct NoGpus {
    fanout: XidFanout,
}

impl NoGpus {
    /// The backend of a CPU node.
    pub fn new() -> Self {
        Self::default()
    }
}

impl GpuBackend for NoGpus {
    fn kind(&self) -> &'static str {
        "none"
    }

    fn gpus(&self) -> Vec<GpuInfo> {
        Vec::new()
    }

    fn sample(&self) -> Vec<GpuSample> {
        Vec::new()
    }

    fn details(&self) -> NodeGpuDetails {
        NodeGpuDetails::from_inventory("none", Vec::new(), XidWatch::empty(XidWatchState::NoGpus))
    }

    fn xid_events(&self) -> UnboundedReceiver<XidEvent> {
        // The fan-out keeps the sender, so the receiver stays open and empty.
        self.fanout.subscribe()
    }

    fn processes(&self) -> Result<Vec<GpuProcess>, GpuError> {
        Ok(Vec::new())
    }
}
