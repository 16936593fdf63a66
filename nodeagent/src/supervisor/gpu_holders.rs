//! The processes that hold an attempt's GPUs, as the GPUs list them (NVML's
//! running processes; the simulated backend's `context` commands). A job
//! process that left its process group, cleared its environment and runs
//! where there is no cgroup (or escaped it) still holds a context on its GPU:
//! the attempt ends, and its GPUs are reported free, only once none of its
//! user's processes is listed there. Only the job's user's processes count,
//! and not those whose environment names another job or attempt: another
//! user's, a monitoring daemon's, the same user's other job, are never the
//! job's. An agent in a PID namespace of its own (a container) does not look:
//! NVML's pids are the host's. NVML is asked by one caller at a time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::gpu::GpuBackend;
use crate::job::process::{in_child_pid_namespace, live_processes_of};

use super::AttemptKey;

/// How often a failure to list the GPUs' processes is logged (an ending
/// attempt looks every few milliseconds).
const SAY_EVERY: Duration = Duration::from_secs(60);

/// The node's GPU slots, asked for their processes.
#[derive(Clone)]
pub struct GpuHolders {
    /// `None` where NVML's pids are not this agent's (a PID namespace).
    gpus: Option<Arc<dyn GpuBackend>>,
    /// When a failure to list was last logged.
    said: Arc<Mutex<Option<Instant>>>,
    /// Held while the GPUs are asked (one caller at a time).
    asking: Arc<Mutex<()>>,
}

impl std::fmt::Debug for GpuHolders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.gpus {
            Some(gpus) => write!(f, "GpuHolders({})", gpus.kind()),
            None => f.write_str("GpuHolders(off)"),
        }
    }
}

impl GpuHolders {
    /// The processes on `gpus`' slots.
    pub fn new(gpus: Arc<dyn GpuBackend>) -> Self {
        let gpus = if in_child_pid_namespace() {
            tracing::warn!(
                "this agent runs in a PID namespace of its own: the GPUs' process lists (the host's pids) are not used to find a job's processes; run the agent in the host's PID namespace"
            );
            None
        } else {
            Some(gpus)
        };
        GpuHolders {
            gpus,
            said: Arc::default(),
            asking: Arc::default(),
        }
    }

    /// The UUIDs of GPU slots `slots` (a MIG instance's for an instance).
    pub fn uuids(&self, slots: &[u32]) -> Vec<String> {
        let Some(gpus) = &self.gpus else {
            return Vec::new();
        };
        gpus.gpus()
            .into_iter()
            .filter(|info| slots.contains(&info.index))
            .map(|info| info.uuid)
            .collect()
    }

    /// The live processes of user `uid` listed on GPU slots `slots` that
    /// may be attempt `key`'s (none when the GPUs cannot be listed: the
    /// other ways of finding them stand).
    pub fn of(&self, slots: &[u32], uid: u32, key: AttemptKey) -> Vec<i32> {
        self.on(&self.uuids(slots), uid, key)
    }

    /// The live processes of user `uid` listed on the GPUs (or instances)
    /// `uuids` that may be attempt `key`'s.
    pub fn on(&self, uuids: &[String], uid: u32, key: AttemptKey) -> Vec<i32> {
        let Some(gpus) = self.gpus.as_ref().filter(|_| !uuids.is_empty()) else {
            return Vec::new();
        };
        let listing = {
            let _one_at_a_time = self.asking.lock().unwrap_or_else(|p| p.into_inner());
            gpus.processes()
        };
        match listing {
            Ok(listed) => live_processes_of(
                listed
                    .into_iter()
                    .filter(|p| uuids.contains(&p.uuid))
                    .map(|p| p.pid),
                uid,
                (key.0.0, key.1),
            ),
            Err(e) => {
                let mut said = self.said.lock().unwrap_or_else(|p| p.into_inner());
                if said.is_some_and(|at| at.elapsed() < SAY_EVERY) {
                    return Vec::new();
                }
                *said = Some(Instant::now());
                tracing::warn!(
                    job = %key.0,
                    attempt = key.1,
                    "cannot list the processes on the attempt's GPUs ({e}): a process of it that left its process group and cgroup would be missed"
                );
                Vec::new()
            }
        }
    }
}
