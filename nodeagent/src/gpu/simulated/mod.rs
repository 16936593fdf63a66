//! `SimulatedGpus`: N fake GPUs of one type for tests, the demo and chaos runs.
//! Faults come from outside through a control socket (see [`crate::gpu::inject`]
//! for the client and [`FaultCommand`] for the commands), and so do the
//! processes that say they opened a context on a GPU (what NVML would list).

mod control_server;
mod fleet;

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc::UnboundedReceiver;

use control_server::ControlServer;
use corral_state::mig::MigLayout;
pub use fleet::SIMULATED_THERMAL_LIMIT_C;
use fleet::{FNV_OFFSET, Fleet, fnv1a};

use super::backend::{GpuBackend, GpuInfo, GpuProcess, GpuSample, XidEvent};
use super::details::{NodeGpuDetails, XidWatch, XidWatchState};
use super::error::GpuError;
use super::fanout::XidFanout;
use super::fault_command::FaultCommand;

/// The most GPUs a simulated node may have.
pub const MAX_SIMULATED_GPUS: u32 = 64;

/// Fake GPUs whose health and XID errors are injected through a Unix socket.
///
/// Samples are plausible idle readings for the model; `xid` raises an
/// [`XidEvent`] and, for an XID that drains the GPU or node, makes the GPU report
/// unhealthy with the XID as its problem; `heal` restores it; `temp` sets a
/// temperature (at or above [`SIMULATED_THERMAL_LIMIT_C`] the GPU reports
/// unhealthy). Dropping the backend stops the socket and removes its file.
#[derive(Debug)]
pub struct SimulatedGpus {
    infos: Vec<GpuInfo>,
    state: Arc<Shared>,
    control: ControlServer,
}

/// What the backend and its control thread share.
#[derive(Debug)]
struct Shared {
    fleet: Mutex<Fleet>,
    fanout: XidFanout,
}

impl Shared {
    fn apply(&self, command: &FaultCommand) -> Result<(), String> {
        let event = self.fleet().apply(command)?;
        if let Some(event) = event {
            tracing::info!(gpu = event.gpu, xid = event.xid, "simulated XID injected");
            self.fanout.publish(event);
        }
        Ok(())
    }

    /// The fleet, even after a panic elsewhere: each update leaves it consistent.
    fn fleet(&self) -> MutexGuard<'_, Fleet> {
        self.fleet
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl SimulatedGpus {
    /// `count` (1 to [`MAX_SIMULATED_GPUS`]) GPUs of type `model` (letters,
    /// digits, `_`, `.`, `-`; lowercased), with a control socket at `control`.
    /// The GPUs `mig` names are in MIG mode, split into its instances.
    pub fn new(
        count: u32,
        model: &str,
        mig: &MigLayout,
        control: PathBuf,
    ) -> Result<Self, GpuError> {
        let model = validate_model(count, model)?;
        mig.slots(count, &model).map_err(|e| GpuError::BadSpec {
            spec: format!("simulated:{count}:{model}:mig={mig}"),
            reason: e.to_string(),
        })?;
        let seed = fnv1a(FNV_OFFSET, control.as_os_str().as_bytes());
        let fleet = Fleet::new(count, &model, mig, seed);
        let infos = fleet.infos().to_vec();
        let state = Arc::new(Shared {
            fleet: Mutex::new(fleet),
            fanout: XidFanout::new(),
        });
        let handler = {
            let state = Arc::clone(&state);
            Arc::new(move |line: &str| {
                let command: FaultCommand = line.parse().map_err(|e: GpuError| e.to_string())?;
                state.apply(&command)
            })
        };
        let control = ControlServer::start(control, handler)?;
        Ok(Self {
            infos,
            state,
            control,
        })
    }

    /// The control socket's path.
    pub fn control_path(&self) -> &Path {
        self.control.path()
    }

    /// Applies a fault command in-process, as if it came through the socket.
    pub fn apply(&self, command: &FaultCommand) -> Result<(), GpuError> {
        self.state
            .apply(command)
            .map_err(|reason| GpuError::InjectionRefused {
                command: command.to_string(),
                reason,
            })
    }
}

impl GpuBackend for SimulatedGpus {
    fn kind(&self) -> &'static str {
        "simulated"
    }

    fn gpus(&self) -> Vec<GpuInfo> {
        self.infos.clone()
    }

    fn sample(&self) -> Vec<GpuSample> {
        self.state.fleet().sample()
    }

    fn details(&self) -> NodeGpuDetails {
        NodeGpuDetails::from_inventory(
            "simulated",
            self.infos.clone(),
            XidWatch::empty(XidWatchState::Simulated),
        )
    }

    fn xid_events(&self) -> UnboundedReceiver<XidEvent> {
        self.state.fanout.subscribe()
    }

    /// The processes that said they opened a context (`context GPU PID`),
    /// while they live (a zombie's context is gone).
    fn processes(&self) -> Result<Vec<GpuProcess>, GpuError> {
        let alive = |pid: u32| i32::try_from(pid).is_ok_and(crate::job::process::process_alive);
        Ok(self.state.fleet().contexts(alive))
    }
}

/// Checks the count and the type name (as `--gres=gpu:TYPE:N` accepts it).
fn validate_model(count: u32, model: &str) -> Result<String, GpuError> {
    let bad = |reason: String| GpuError::BadSpec {
        spec: format!("simulated:{count}:{model}"),
        reason,
    };
    if count == 0 {
        return Err(bad(
            "a simulated node needs at least one GPU (use `none` for a CPU node)".to_string(),
        ));
    }
    if count > MAX_SIMULATED_GPUS {
        return Err(bad(format!(
            "{count} GPUs is more than the {MAX_SIMULATED_GPUS} a simulated node may have"
        )));
    }
    if model.is_empty() {
        return Err(bad("the GPU type is empty".to_string()));
    }
    let valid = model
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if !valid || model.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad(format!(
            "GPU type {model:?} must be letters, digits, '_', '.' and '-', and not a number"
        )));
    }
    Ok(model.to_ascii_lowercase())
}
