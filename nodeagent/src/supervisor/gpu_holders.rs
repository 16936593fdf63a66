//! The processes that hold an attempt's GPUs, as the GPUs list them (NVML's
//! running processes; the simulated backend's `context` commands). A job
//! process that left its process group, cleared its environment and runs
//! where there is no cgroup (or escaped it) still holds a context on its GPU:
//! the attempt ends, and its GPUs are reported free, only once none of its
//! user's processes is listed there. Only the job's user's processes count:
//! another user's, or a monitoring daemon's, are never the job's.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::gpu::GpuBackend;
use crate::job::process::live_processes_of;

use super::AttemptKey;

/// How often a failure to list the GPUs' processes is logged (an ending
/// attempt looks every few milliseconds).
const SAY_EVERY: Duration = Duration::from_secs(60);

/// The node's GPU slots, asked for their processes.
#[derive(Clone)]
pub struct GpuHolders {
    gpus: Arc<dyn GpuBackend>,
    /// When a failure to list was last logged.
    said: Arc<Mutex<Option<Instant>>>,
}

impl std::fmt::Debug for GpuHolders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuHolders({})", self.gpus.kind())
    }
}

impl GpuHolders {
    /// The processes on `gpus`' slots.
    pub fn new(gpus: Arc<dyn GpuBackend>) -> Self {
        GpuHolders {
            gpus,
            said: Arc::default(),
        }
    }

    /// The UUIDs of GPU slots `slots` (a MIG instance's for an instance).
    pub fn uuids(&self, slots: &[u32]) -> Vec<String> {
        self.gpus
            .gpus()
            .into_iter()
            .filter(|info| slots.contains(&info.index))
            .map(|info| info.uuid)
            .collect()
    }

    /// The live processes of user `uid` listed on GPU slots `slots`
    /// (attempt `key`'s, named in the log when they cannot be listed: then
    /// none are found, and the other ways of finding them stand).
    pub fn of(&self, slots: &[u32], uid: u32, key: AttemptKey) -> Vec<i32> {
        self.on(
            &self.uuids(slots),
            uid,
            &format!("job {} attempt {}", key.0, key.1),
        )
    }

    /// The live processes of user `uid` listed on the GPUs (or instances)
    /// `uuids` (`whose` names them in the log when they cannot be listed).
    pub fn on(&self, uuids: &[String], uid: u32, whose: &str) -> Vec<i32> {
        if uuids.is_empty() {
            return Vec::new();
        }
        match self.gpus.processes() {
            Ok(listed) => live_processes_of(
                listed
                    .into_iter()
                    .filter(|p| uuids.contains(&p.uuid))
                    .map(|p| p.pid),
                uid,
            ),
            Err(e) => {
                let mut said = self.said.lock().unwrap_or_else(|p| p.into_inner());
                if said.is_some_and(|at| at.elapsed() < SAY_EVERY) {
                    return Vec::new();
                }
                *said = Some(Instant::now());
                tracing::warn!(
                    "cannot list the processes on the GPUs of {whose} ({e}): a process of it that left its process group and cgroup would be missed"
                );
                Vec::new()
            }
        }
    }
}
