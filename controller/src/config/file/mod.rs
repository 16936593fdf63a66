//! The schema of `corral.toml` as written: operator-friendly strings where Slurm
//! has a format (time limits `7-00:00:00`, memory `512G`, hostlists `gpu[01-16]`),
//! unknown keys refused. `ConfigFile::validate` turns it into a
//! [`ControllerConfig`](super::ControllerConfig); `toml::to_string` writes it back,
//! which is how `corral local up` generates per-replica files.

mod accounts;
mod daemon;
mod nodes;
mod partitions;
mod reservations;
mod settings;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use accounts::{AccountSection, QosSection, RoleName, UserSection};
pub use daemon::{
    LeaderSection, ListenSection, LivenessSection, RaftSection, ReplicaSection, TlsSection,
};
pub use nodes::{BlockSection, NodeSection, SwitchSection, TopologySection};
pub use partitions::{PartitionSection, PartitionStateName, PreemptModeName};
pub use reservations::ReservationSection;
pub use settings::{LimitsSection, PrioritySection, SchedulingSection};

/// The whole file. Plain keys come first, then tables, then arrays of tables, so
/// `toml::to_string` writes a valid document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// The cluster's name (`SLURM_CLUSTER_NAME`); letters, digits, `-`, `_`, `.`.
    pub cluster_name: String,
    /// This replica's id; may be left out when only one replica is listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// This replica's data directory (Raft log, snapshots); default
    /// `data/replica-<id>`, relative to the file's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// Where this replica listens.
    #[serde(default, skip_serializing_if = "is_default")]
    pub listen: ListenSection,
    /// TLS files.
    #[serde(default, skip_serializing_if = "is_default")]
    pub tls: TlsSection,
    /// Raft timing.
    #[serde(default)]
    pub raft: RaftSection,
    /// Leader loop intervals.
    #[serde(default)]
    pub leader: LeaderSection,
    /// Node liveness timeouts.
    #[serde(default)]
    pub liveness: LivenessSection,
    /// Multifactor priority weights.
    #[serde(default)]
    pub priority: PrioritySection,
    /// Scheduling policy.
    #[serde(default)]
    pub scheduling: SchedulingSection,
    /// Limits on the state.
    #[serde(default)]
    pub limits: LimitsSection,
    /// Network topology; absent means flat.
    #[serde(default, skip_serializing_if = "TopologySection::is_empty")]
    pub topology: TopologySection,
    /// Every initial voter, this replica included.
    pub replicas: Vec<ReplicaSection>,
    /// Compute nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeSection>,
    /// Partitions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<PartitionSection>,
    /// QOS.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qos: Vec<QosSection>,
    /// Accounts below `root`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accounts: Vec<AccountSection>,
    /// Users.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<UserSection>,
    /// Advance reservations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<ReservationSection>,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}
