//! The validated configuration the daemon starts from: this replica's identity and
//! addresses, the initial voters, files, timing, and the cluster definition.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_consensus::{RaftTiming, ReplicaAddr};
use corral_state::node_liveness::NodeLiveness;

use super::definition::ClusterDefinition;
use super::error::ConfigError;

/// A checked `corral.toml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// The file read.
    pub source: PathBuf,
    /// The cluster's name (also `cluster.config.cluster_name` and Raft's cluster name).
    pub cluster_name: String,
    /// This replica's id.
    pub id: u64,
    /// Every initial voter, this one included, in the file's order.
    pub replicas: Vec<ReplicaEntry>,
    /// Where this replica listens.
    pub listen: ListenAddrs,
    /// This replica's data directory.
    pub data_dir: PathBuf,
    /// TLS files.
    pub tls: TlsPaths,
    /// Raft timing.
    pub raft: RaftSettings,
    /// Leader loop intervals.
    pub leader: LeaderSettings,
    /// Node liveness timeouts as this file gives them: proposed by the first
    /// leader of a cluster that has none replicated; after that the cluster's
    /// (`corral admin liveness`) are the ones used.
    pub liveness: NodeLiveness,
    /// Partitions, nodes, topology, accounts, users, QOS, settings.
    pub cluster: ClusterDefinition,
}

/// One replica of the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaEntry {
    /// Replica id.
    pub id: u64,
    /// `host:port` of its Raft service.
    pub peer: String,
    /// `host:port` of its client API.
    pub api: String,
}

/// Socket addresses this replica binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenAddrs {
    /// The Raft service.
    pub peer: SocketAddr,
    /// The client API.
    pub api: SocketAddr,
    /// Where connections to the other replicas come from, when given.
    pub source: Option<IpAddr>,
    /// The metrics endpoint, when one is served.
    pub metrics: Option<SocketAddr>,
}

/// TLS files, resolved against the configuration file's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsPaths {
    /// The controllers' CA certificate.
    pub ca: PathBuf,
    /// This replica's certificate chain.
    pub cert: PathBuf,
    /// This replica's private key.
    pub key: PathBuf,
}

/// Raft timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftSettings {
    /// Leader heartbeat period, ms (default 30).
    pub heartbeat_ms: u64,
    /// Election timeout lower bound, ms (default 100).
    pub election_min_ms: u64,
    /// Election timeout upper bound, ms (default 200).
    pub election_max_ms: u64,
    /// Snapshot after this many entries (default 10,000).
    pub snapshot_every_entries: u64,
    /// Proposal commit timeout, ms (default 5,000).
    pub propose_timeout_ms: u64,
}

impl RaftSettings {
    /// The consensus crate's timing, with its defaults for what the file omits.
    pub fn timing(&self) -> RaftTiming {
        RaftTiming {
            heartbeat_ms: self.heartbeat_ms,
            election_min_ms: self.election_min_ms,
            election_max_ms: self.election_max_ms,
            snapshot_every_entries: self.snapshot_every_entries,
            propose_timeout: Duration::from_millis(self.propose_timeout_ms),
            ..RaftTiming::default()
        }
    }
}

/// The leader loop's intervals, and how it ends attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderSettings {
    /// Period of scheduling passes, ms (default 1,000).
    pub schedule_interval_ms: u64,
    /// Period of `Tick` commands, ms (default 1,000).
    pub tick_interval_ms: u64,
    /// Between SIGTERM and SIGKILL when an attempt is ended (Slurm's KillWait),
    /// ms (default 10,000; 0 sends SIGKILL at once).
    pub kill_wait_ms: u64,
    /// The mail program (Slurm's MailProg); no mail without one.
    pub mail_program: Option<PathBuf>,
    /// Slurm's `SlurmctldParameters=preempt_send_user_signal`: a preempted
    /// job submitted with `--signal` gets that signal as its notice instead
    /// of SIGTERM (default false, as in Slurm).
    pub preempt_send_user_signal: bool,
}

impl ControllerConfig {
    /// This replica's entry.
    ///
    /// # Panics
    ///
    /// When `id` is not among `replicas`, which validation rules out.
    pub fn this_replica(&self) -> &ReplicaEntry {
        self.replicas
            .iter()
            .find(|r| r.id == self.id)
            .expect("validated: this replica's id is among the replicas")
    }

    /// The initial voters as the consensus crate takes them.
    pub fn members(&self) -> BTreeMap<u64, ReplicaAddr> {
        self.replicas
            .iter()
            .map(|r| {
                let addr = ReplicaAddr {
                    peer: r.peer.clone(),
                    api: r.api.clone(),
                };
                (r.id, addr)
            })
            .collect()
    }

    /// Checks that the TLS files exist, naming the key of the first that does not.
    /// Call it at start; parsing alone reads nothing but the configuration.
    pub fn check_files(&self) -> Result<(), ConfigError> {
        let files: [(&str, &Path); 3] = [
            ("tls.ca", &self.tls.ca),
            ("tls.cert", &self.tls.cert),
            ("tls.key", &self.tls.key),
        ];
        for (key, path) in files {
            if !path.is_file() {
                return Err(ConfigError::Invalid {
                    file: self.source.clone(),
                    key: key.to_string(),
                    reason: format!(
                        "{} is not a readable file; create it from the cluster CA or fix the path",
                        path.display()
                    ),
                });
            }
        }
        Ok(())
    }
}
