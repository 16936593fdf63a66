//! `corral.toml`: this replica's identity and addresses, the other replicas, TLS
//! files, Raft timing, the leader loop's intervals, and the cluster definition
//! (partitions, nodes, topology, accounts, users, QOS, priority settings).
//!
//! [`load`] reads, parses and validates a file; a bad one is refused with the
//! file, the key path and the reason. [`ConfigFile`] is the schema as written
//! (what `corral local up` builds and serializes); [`ControllerConfig`] is the
//! checked result, and [`ClusterDefinition::bootstrap_commands`] turns its
//! cluster part into the commands that create it. `corral.example.toml` beside
//! the crate's manifest documents every key.

mod controller;
mod definition;
mod error;
mod file;
mod validate;

use std::path::Path;

pub use controller::{
    ControllerConfig, LeaderSettings, ListenAddrs, RaftSettings, ReplicaEntry, TlsPaths,
};
pub use definition::{ClusterDefinition, NODES_PER_COMMAND};
pub use error::ConfigError;
pub use file::{
    AccountSection, BlockSection, ConfigFile, LeaderSection, LimitsSection, ListenSection,
    LivenessSection, NodeSection, PartitionSection, PartitionStateName, PreemptModeName,
    PrioritySection, QosSection, RaftSection, ReplicaSection, ReservationSection, RoleName,
    SchedulingSection, SwitchSection, TlsSection, TopologySection, UserSection,
};

/// Reads, parses and validates the configuration at `path`.
pub fn load(path: &Path) -> Result<ControllerConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        file: path.to_path_buf(),
        source,
    })?;
    parse(&text, path)
}

/// Parses and validates `text`; `source` names the file in errors and anchors
/// relative paths.
pub fn parse(text: &str, source: &Path) -> Result<ControllerConfig, ConfigError> {
    parse_file(text, source)?.validate(source)
}

/// Parses `text` into the schema without validating values.
pub fn parse_file(text: &str, source: &Path) -> Result<ConfigFile, ConfigError> {
    let document = toml::Deserializer::parse(text)
        .map_err(|e| ConfigError::from_toml(source, text, None, e))?;
    serde_path_to_error::deserialize(document).map_err(|e| {
        let key = e.path().to_string();
        let key = if key == "." { String::new() } else { key };
        ConfigError::from_toml(source, text, Some(key), e.into_inner())
    })
}
