//! GPU health behind one trait, with an NVML backend for real GPUs and a
//! simulated backend whose faults are injected from outside; and the table that
//! maps an XID error to what the agent does about it.
//!
//! Start at [`GpuBackend`] and [`backend_from_spec`] (the agent's `--gpus`
//! option), then [`classify_xid`].

mod backend;
mod details;
mod error;
mod fanout;
mod fault_command;
mod inject;
mod model_type;
mod no_gpus;
mod nvml;
mod sampling;
mod simulated;
mod slots;
mod spec;
mod xid;

pub use backend::{GpuBackend, GpuInfo, GpuProcess, GpuSample, MigInstance, XidEvent};
pub use details::{
    GpuDetails, MigModes, NodeGpuDetails, UnwatchedGpu, WaitCounts, WatchedGpu, XidWatch,
    XidWatchState,
};
pub use error::GpuError;
pub use fanout::XID_BACKLOG_MAX;
pub use fault_command::{FaultCommand, MAX_COMMAND_LEN, MAX_TEMPERATURE_C};
pub use inject::{INJECT_TIMEOUT, inject};
pub use model_type::model_type;
pub use no_gpus::NoGpus;
pub use nvml::{
    NvmlGpus, READINGS as NVML_READINGS, ReadingCost, WAIT_TIMEOUT_MS as NVML_EVENT_WAIT_MS,
    nvml_inventory,
};
pub use sampling::sample_periodically;
pub use simulated::{MAX_SIMULATED_GPUS, SIMULATED_THERMAL_LIMIT_C, SimulatedGpus};
pub use slots::GpuSlots;
pub use spec::{CONTROL_SOCKET_NAME, GpuSpec, backend_from_spec, control_socket};
pub use xid::{UNKNOWN_XID_MEANING, XidAction, XidClass, classify_xid};
