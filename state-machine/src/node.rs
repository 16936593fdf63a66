//! Compute nodes and their GPUs: hardware, availability, drain, and which job
//! attempt holds each GPU.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::ids::{AttemptNumber, JobId};
use crate::time::Timestamp;

/// The most GPUs one node may have (the scheduler tracks free GPUs in a 64-bit mask).
pub const MAX_GPUS_PER_NODE: usize = 64;

/// A node as configured by an administrator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeDefinition {
    /// Host name, e.g. `gpu-node001`.
    pub name: String,
    /// Schedulable CPUs.
    pub cpus: u32,
    /// Schedulable memory in MiB.
    pub memory_mb: u64,
    /// GPUs by index; `gpus[i].index == i`.
    pub gpus: Vec<GpuDefinition>,
    /// Features for `--constraint`, e.g. `ib`, `h100`.
    pub features: BTreeSet<String>,
}

/// One GPU slot as configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuDefinition {
    /// Index on the node (the `CUDA_VISIBLE_DEVICES` ordinal).
    pub index: u32,
    /// Type name used by typed requests, e.g. `h100` or `a100_3g.20gb`.
    pub gpu_type: String,
}

/// Why a node or GPU is out of service, and since when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateReason {
    /// Human-readable reason, shown by `corral nodes`.
    pub reason: String,
    /// When it was set.
    pub since: Timestamp,
    /// Who set it (`corral` for automatic changes).
    pub by: String,
}

/// Whether the node's agent is known to be alive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Availability {
    /// The agent registered and its lease has not lapsed.
    Up {
        /// When the node last came up.
        since: Timestamp,
    },
    /// The agent never registered, or the leader declared the node down.
    Down(StateReason),
}

/// The health of one GPU as last reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum GpuHealth {
    /// No fault reported since the GPU was last resumed.
    Healthy,
    /// A fault (an XID error, ECC errors, a lost device) was reported.
    Unhealthy {
        /// The last XID reported, if the fault was an XID error.
        xid: Option<u32>,
        /// What was reported.
        reason: String,
        /// When.
        since: Timestamp,
    },
}

/// One GPU of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gpu {
    /// Index on the node.
    pub index: u32,
    /// Type name.
    pub gpu_type: String,
    /// Last reported health.
    pub health: GpuHealth,
    /// Set when the GPU is taken out of service (automatically after a fault, or by
    /// an operator); cleared by resume.
    pub drain: Option<StateReason>,
    /// The live attempt holding this GPU.
    pub allocated_to: Option<(JobId, AttemptNumber)>,
}

impl Gpu {
    /// True when the GPU may be given to a new attempt.
    pub fn is_free_and_usable(&self) -> bool {
        self.allocated_to.is_none() && self.drain.is_none() && self.health == GpuHealth::Healthy
    }
}

/// What one live attempt holds on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeUse {
    /// The attempt.
    pub attempt: AttemptNumber,
    /// CPUs held.
    pub cpus: u32,
    /// Memory held, MiB.
    pub memory_mb: u64,
    /// Whether the attempt holds the node exclusively.
    pub exclusive: bool,
}

/// What an agent reported about its hardware when it registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    /// When it registered.
    pub at: Timestamp,
    /// The agent's version string.
    pub agent_version: String,
    /// An id that changes on every agent start; lets the leader spot restarts.
    pub boot_id: String,
    /// Where the agent accepts job steps from other agents (`host:port`, UDP).
    #[serde(default)]
    pub step_address: Option<String>,
}

/// A node with its live state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Host name.
    pub name: String,
    /// Schedulable CPUs.
    pub cpus: u32,
    /// Schedulable memory, MiB.
    pub memory_mb: u64,
    /// Features for `--constraint`.
    pub features: BTreeSet<String>,
    /// GPUs by index.
    pub gpus: Vec<Gpu>,
    /// Whether the agent is alive.
    pub availability: Availability,
    /// Set while the node is drained (no new work); running work may finish.
    pub drain: Option<StateReason>,
    /// Live attempts on this node, by job.
    pub allocations: BTreeMap<JobId, NodeUse>,
    /// The agent's last registration.
    pub registration: Option<Registration>,
}

/// How a node shows to operators (Slurm's base state plus the drain flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeStateView {
    /// Up, nothing allocated.
    Idle,
    /// Up, some resources allocated.
    Mixed,
    /// Up, every GPU (or the whole node) allocated.
    Allocated,
    /// Drain requested, jobs still running.
    Draining,
    /// Drained and empty.
    Drained,
    /// Agent not alive.
    Down,
}

impl Node {
    /// A node as configured, down until its agent registers.
    pub fn from_definition(def: NodeDefinition, at: Timestamp) -> Self {
        Node {
            name: def.name,
            cpus: def.cpus,
            memory_mb: def.memory_mb,
            features: def.features,
            gpus: def
                .gpus
                .into_iter()
                .map(|g| Gpu {
                    index: g.index,
                    gpu_type: g.gpu_type,
                    health: GpuHealth::Healthy,
                    drain: None,
                    allocated_to: None,
                })
                .collect(),
            availability: Availability::Down(StateReason {
                reason: "agent has not registered".into(),
                since: at,
                by: "corral".into(),
            }),
            drain: None,
            allocations: BTreeMap::new(),
            registration: None,
        }
    }

    /// True when the agent is alive.
    pub fn is_up(&self) -> bool {
        matches!(self.availability, Availability::Up { .. })
    }

    /// True when new work may be placed here.
    pub fn accepts_work(&self) -> bool {
        self.is_up() && self.drain.is_none()
    }

    /// CPUs not held by live attempts.
    pub fn free_cpus(&self) -> u32 {
        let used: u32 = self.allocations.values().map(|u| u.cpus).sum();
        self.cpus.saturating_sub(used)
    }

    /// Memory not held by live attempts, MiB.
    pub fn free_memory_mb(&self) -> u64 {
        let used: u64 = self.allocations.values().map(|u| u.memory_mb).sum();
        self.memory_mb.saturating_sub(used)
    }

    /// True when some live attempt holds the node exclusively.
    pub fn is_held_exclusively(&self) -> bool {
        self.allocations.values().any(|u| u.exclusive)
    }

    /// The state operators see.
    pub fn state_view(&self) -> NodeStateView {
        if !self.is_up() {
            return NodeStateView::Down;
        }
        let busy = !self.allocations.is_empty();
        if self.drain.is_some() {
            return if busy {
                NodeStateView::Draining
            } else {
                NodeStateView::Drained
            };
        }
        let all_gpus_used =
            !self.gpus.is_empty() && self.gpus.iter().all(|g| g.allocated_to.is_some());
        if !busy {
            NodeStateView::Idle
        } else if self.is_held_exclusively() || all_gpus_used || self.free_cpus() == 0 {
            NodeStateView::Allocated
        } else {
            NodeStateView::Mixed
        }
    }
}
