//! The thread that waits on NVML's event set for critical XID and double-bit
//! ECC events, and publishes them as `XidEvent`s. NVML's wait blocks, so it gets
//! a std thread of its own; it ends within one wait timeout of the backend being
//! closed or dropped. What it registered and how its waits return are kept in
//! the backend's [`XidWatch`] for operators (`corral-agent gpus`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{EventSet, Nvml};

use super::Shared;
use crate::gpu::backend::{GpuInfo, XidEvent};
use crate::gpu::details::{UnwatchedGpu, WatchedGpu, XidWatchState};
use crate::gpu::error::GpuError;
use crate::gpu::xid::classify_xid;

/// How long one wait on the event set lasts, in milliseconds: the thread checks
/// for shutdown this often.
pub const WAIT_TIMEOUT_MS: u32 = 1000;

/// Pause after a failed wait other than a timeout, so the thread does not spin.
const WAIT_ERROR_BACKOFF: Duration = Duration::from_secs(1);

/// A failing wait is logged the first time and then once per this many failures.
const WAIT_ERROR_LOG_EVERY: u64 = 60;

/// The XID of a double-bit ECC error, which NVML also reports as its own event.
const DOUBLE_BIT_ECC_XID: u32 = 48;

/// The value NVML gives when it does not know a critical XID's number.
const UNKNOWN_XID: u32 = 999;

/// The event types the watch asks for.
fn wanted() -> EventTypes {
    EventTypes::CRITICAL_XID_ERROR | EventTypes::DOUBLE_BIT_ECC_ERROR
}

/// NVML's names of the event types in `types` (`CRITICAL_XID_ERROR`).
pub fn event_names(types: EventTypes) -> Vec<String> {
    types
        .iter_names()
        .map(|(name, _)| name.to_string())
        .collect()
}

/// Starts the event thread.
pub fn spawn(shared: Arc<Shared>, infos: Vec<GpuInfo>) -> Result<(), GpuError> {
    thread::Builder::new()
        .name("nvml-xid-events".to_string())
        .spawn(move || {
            run(&shared, &infos);
            shared.event_thread_ended.store(true, Ordering::SeqCst);
        })
        .map(drop)
        .map_err(|source| GpuError::EventThread { source })
}

fn run(shared: &Shared, infos: &[GpuInfo]) {
    let registration = register(&shared.nvml, infos);
    let Some(set) = registration.set else {
        let reason = "no GPU on this node reports XID events through NVML: XID fail-fast is off; \
                      check the driver version and that the agent runs as root";
        tracing::error!(left_out = ?registration.left_out, "{reason}");
        shared.update_watch(|watch| {
            watch.state = XidWatchState::Off;
            watch.reason = Some(reason.to_string());
            watch.left_out = registration.left_out;
        });
        return;
    };
    for gpu in &registration.watched {
        tracing::info!(
            gpu = gpu.index,
            events = gpu.events.join(","),
            "watching for XID errors"
        );
    }
    for gpu in &registration.left_out {
        tracing::warn!(
            gpu = gpu.index,
            reason = gpu.reason,
            "not watched for XID errors"
        );
    }
    shared.update_watch(|watch| {
        watch.state = XidWatchState::Watching;
        watch.watched = registration.watched;
        watch.left_out = registration.left_out;
    });
    let mut failed_in_a_row = 0u64;
    while !shared.stop.load(Ordering::SeqCst) {
        match set.wait(WAIT_TIMEOUT_MS) {
            Ok(data) => {
                failed_in_a_row = 0;
                shared.update_watch(|watch| watch.waits.events += 1);
                let gpu = data.device.index().ok().or_else(|| {
                    let uuid = data.device.uuid().ok()?;
                    infos
                        .iter()
                        .find(|info| info.uuid == uuid)
                        .map(|info| info.index)
                });
                match (xid_of(data.event_type, data.event_data.as_ref()), gpu) {
                    (Some((xid, detail)), Some(gpu)) => {
                        publish(shared, XidEvent { gpu, xid, detail });
                    }
                    (Some((xid, _)), None) => {
                        tracing::error!(xid, "NVML raised an XID for a GPU it cannot name");
                    }
                    (None, _) => {}
                }
            }
            Err(NvmlError::Timeout) => {
                failed_in_a_row = 0;
                shared.update_watch(|watch| watch.waits.timeouts += 1);
            }
            Err(error) => {
                if failed_in_a_row.is_multiple_of(WAIT_ERROR_LOG_EVERY) {
                    tracing::warn!(%error, failed_in_a_row, "waiting for NVML events failed");
                }
                failed_in_a_row += 1;
                shared.update_watch(|watch| watch.waits.errors += 1);
                thread::sleep(WAIT_ERROR_BACKOFF);
            }
        }
    }
    shared.update_watch(|watch| watch.state = XidWatchState::Ended);
}

/// The event set, and which GPUs are in it and which are not.
struct Registration<'nvml> {
    set: Option<EventSet<'nvml>>,
    watched: Vec<WatchedGpu>,
    left_out: Vec<UnwatchedGpu>,
}

/// An event set with every GPU that supports XID events registered. A GPU whose
/// registration fails is left out (NVML frees the set on failure, so the set is
/// rebuilt without it).
fn register<'nvml>(nvml: &'nvml Nvml, infos: &[GpuInfo]) -> Registration<'nvml> {
    let mut left_out: Vec<UnwatchedGpu> = Vec::new();
    let mut leave_out = |index: u32, reason: String| {
        left_out.push(UnwatchedGpu { index, reason });
    };
    let mut excluded = Vec::new();
    'attempt: for _ in 0..=infos.len() {
        let mut set = match nvml.create_event_set() {
            Ok(set) => set,
            Err(error) => {
                for info in infos {
                    leave_out(
                        info.index,
                        format!("NVML cannot create an event set: {error}"),
                    );
                }
                break;
            }
        };
        let mut watched = Vec::new();
        for info in infos {
            let gpu = info.index;
            if excluded.contains(&gpu) {
                continue;
            }
            let supported = nvml
                .device_by_index(gpu)
                .and_then(|device| Ok((device.supported_event_types()?, device)));
            let (types, device) = match supported {
                Ok((supported, device)) if supported.intersects(wanted()) => {
                    (supported & wanted(), device)
                }
                Ok((supported, _)) => {
                    excluded.push(gpu);
                    leave_out(
                        gpu,
                        format!(
                            "reports neither XID nor double-bit ECC events (supports: {})",
                            event_names(supported).join(", ")
                        ),
                    );
                    continue;
                }
                Err(error) => {
                    excluded.push(gpu);
                    leave_out(gpu, format!("cannot ask it for its event types: {error}"));
                    continue;
                }
            };
            match device.register_events(types, set) {
                Ok(with_gpu) => {
                    set = with_gpu;
                    watched.push(WatchedGpu {
                        index: gpu,
                        events: event_names(types),
                    });
                }
                Err(error) => {
                    excluded.push(gpu);
                    leave_out(gpu, format!("registering its events failed: {error}"));
                    continue 'attempt;
                }
            }
        }
        let set = (!watched.is_empty()).then_some(set);
        return Registration {
            set,
            watched,
            left_out,
        };
    }
    Registration {
        set: None,
        watched: Vec::new(),
        left_out,
    }
}

/// The XID number an NVML event stands for and where it came from, if it is an
/// XID at all: a critical XID event carries its number (or NVML's 999 for one it
/// does not know), and a double-bit ECC event is XID 48.
pub fn xid_of(event_type: EventTypes, event_data: Option<&XidError>) -> Option<(u32, String)> {
    if event_type.contains(EventTypes::CRITICAL_XID_ERROR) {
        Some(match event_data {
            Some(XidError::Value(value)) => match u32::try_from(*value) {
                Ok(xid) if xid != UNKNOWN_XID => (xid, "NVML critical XID event".to_string()),
                _ => (
                    UNKNOWN_XID,
                    format!("NVML critical XID event with number {value}; see the kernel log"),
                ),
            },
            Some(XidError::Unknown) | None => (
                UNKNOWN_XID,
                "NVML critical XID event without its XID number; see the kernel log".to_string(),
            ),
        })
    } else if event_type.contains(EventTypes::DOUBLE_BIT_ECC_ERROR) {
        Some((
            DOUBLE_BIT_ECC_XID,
            "NVML double-bit ECC error event (XID 48)".to_string(),
        ))
    } else {
        None
    }
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

#[cfg(test)]
#[path = "recorded_events_tests.rs"]
mod recorded_events_tests;
