//! The thread that waits on NVML's event set for critical XID and double-bit
//! ECC events, and publishes them as `XidEvent`s. NVML's wait blocks, so it gets
//! a std thread of its own; it ends within one wait timeout of the backend being
//! dropped.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::event::EventData;
use nvml_wrapper::{EventSet, Nvml};

use super::Shared;
use crate::gpu::backend::{GpuInfo, XidEvent};
use crate::gpu::error::GpuError;
use crate::gpu::xid::classify_xid;

/// How long one wait on the event set lasts, in milliseconds: the thread checks
/// for shutdown this often.
const WAIT_TIMEOUT_MS: u32 = 1000;

/// Pause after a failed wait other than a timeout, so the thread does not spin.
const WAIT_ERROR_BACKOFF: Duration = Duration::from_secs(1);

/// The XID of a double-bit ECC error, which NVML also reports as its own event.
const DOUBLE_BIT_ECC_XID: u32 = 48;

/// The value NVML gives when it does not know a critical XID's number.
const UNKNOWN_XID: u32 = 999;

/// Starts the event thread.
pub fn spawn(shared: Arc<Shared>, infos: Vec<GpuInfo>) -> Result<(), GpuError> {
    thread::Builder::new()
        .name("nvml-xid-events".to_string())
        .spawn(move || run(&shared, &infos))
        .map(drop)
        .map_err(|source| GpuError::EventThread { source })
}

fn run(shared: &Shared, infos: &[GpuInfo]) {
    let Some(set) = register(&shared.nvml, infos) else {
        tracing::error!(
            "no GPU on this node reports XID events through NVML: XID fail-fast is off; \
             check the driver version and that the agent runs as root"
        );
        return;
    };
    while !shared.stop.load(Ordering::SeqCst) {
        match set.wait(WAIT_TIMEOUT_MS) {
            Ok(data) => {
                if let Some(event) = xid_event(&data, infos) {
                    publish(shared, event);
                }
            }
            Err(NvmlError::Timeout) => {}
            Err(error) => {
                tracing::warn!(%error, "waiting for NVML events failed");
                thread::sleep(WAIT_ERROR_BACKOFF);
            }
        }
    }
}

/// An event set with every GPU that supports XID events registered. A GPU whose
/// registration fails is left out (NVML frees the set on failure, so the set is
/// rebuilt without it).
fn register<'nvml>(nvml: &'nvml Nvml, infos: &[GpuInfo]) -> Option<EventSet<'nvml>> {
    let wanted = EventTypes::CRITICAL_XID_ERROR | EventTypes::DOUBLE_BIT_ECC_ERROR;
    let mut left_out = BTreeSet::new();
    'attempt: for _ in 0..=infos.len() {
        let mut set = match nvml.create_event_set() {
            Ok(set) => set,
            Err(error) => {
                tracing::warn!(%error, "NVML cannot create an event set");
                return None;
            }
        };
        let mut registered = 0;
        for info in infos {
            let gpu = info.index;
            if left_out.contains(&gpu) {
                continue;
            }
            let supported = nvml
                .device_by_index(gpu)
                .and_then(|device| Ok((device.supported_event_types()?, device)));
            let (types, device) = match supported {
                Ok((supported, device)) if supported.intersects(wanted) => {
                    (supported & wanted, device)
                }
                Ok(_) => {
                    tracing::warn!(gpu, "this GPU does not report XID events");
                    left_out.insert(gpu);
                    continue;
                }
                Err(error) => {
                    tracing::warn!(gpu, %error, "cannot ask this GPU for its event types");
                    left_out.insert(gpu);
                    continue;
                }
            };
            match device.register_events(types, set) {
                Ok(with_gpu) => {
                    set = with_gpu;
                    registered += 1;
                }
                Err(error) => {
                    tracing::warn!(gpu, %error, "cannot watch this GPU for XID events");
                    left_out.insert(gpu);
                    continue 'attempt;
                }
            }
        }
        return (registered > 0).then_some(set);
    }
    None
}

/// The XID event an NVML event stands for, if it is one.
fn xid_event(data: &EventData<'_>, infos: &[GpuInfo]) -> Option<XidEvent> {
    let (xid, detail) = if data.event_type.contains(EventTypes::CRITICAL_XID_ERROR) {
        match &data.event_data {
            Some(XidError::Value(value)) => (
                u32::try_from(*value).unwrap_or(UNKNOWN_XID),
                "NVML critical XID event".to_string(),
            ),
            Some(XidError::Unknown) | None => (
                UNKNOWN_XID,
                "NVML critical XID event without its XID number; see the kernel log".to_string(),
            ),
        }
    } else if data.event_type.contains(EventTypes::DOUBLE_BIT_ECC_ERROR) {
        (
            DOUBLE_BIT_ECC_XID,
            "NVML double-bit ECC error event (XID 48)".to_string(),
        )
    } else {
        return None;
    };
    let gpu = data.device.index().ok().or_else(|| {
        let uuid = data.device.uuid().ok()?;
        infos
            .iter()
            .find(|info| info.uuid == uuid)
            .map(|info| info.index)
    });
    let Some(gpu) = gpu else {
        tracing::error!(xid, "NVML raised an XID for a GPU it cannot name");
        return None;
    };
    Some(XidEvent { gpu, xid, detail })
}

/// Records a draining XID against its GPU (so samples report it), then hands
/// the event to the receivers.
fn publish(shared: &Shared, event: XidEvent) {
    let class = classify_xid(event.xid);
    tracing::warn!(
        gpu = event.gpu,
        xid = event.xid,
        meaning = class.meaning,
        "XID error"
    );
    if class.action.drains() {
        shared
            .drained()
            .insert(event.gpu, format!("XID {}: {}", event.xid, class.meaning));
    }
    shared.fanout.publish(event);
}
