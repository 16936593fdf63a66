//! The daemon's own sections of `corral.toml`, as written: the replicas and their
//! addresses, where to listen, TLS files, Raft timing, the leader loop's intervals
//! and kill wait, and node liveness timeouts.

use std::path::PathBuf;

use corral_consensus::RaftTiming;
use corral_state::slurm::duration::{TimeLimit, format_time_limit};
use serde::{Deserialize, Serialize};

/// One initial voter (`[[replicas]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaSection {
    /// Its replica id, unique in the cluster.
    pub id: u64,
    /// `host:port` where the other replicas reach its Raft service.
    pub peer: String,
    /// `host:port` where clients reach its API.
    pub api: String,
}

/// Where this replica listens (`[listen]`); each defaults to this replica's own
/// address: the same IP when it is written as one (`localhost` as 127.0.0.1),
/// otherwise every interface (`0.0.0.0`) on the same port.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenSection {
    /// Socket address of the Raft service, e.g. `0.0.0.0:7100`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// Socket address of the client API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// The IP address this replica's connections to the other replicas come
    /// from (the kernel's choice when not given). `corral local up
    /// --fault-proxy` gives each replica its own loopback address, so the
    /// proxy between them knows who calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Socket address of the metrics endpoint (`GET /metrics`, Prometheus'
    /// text format), e.g. `0.0.0.0:9180`; no endpoint when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<String>,
}

/// TLS files (`[tls]`); relative paths are relative to the configuration file's
/// directory. Defaults: `tls/ca.crt`, `tls/replica-<id>.crt`, `tls/replica-<id>.key`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    /// The controllers' CA certificate (PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<PathBuf>,
    /// This replica's certificate chain (PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<PathBuf>,
    /// This replica's private key (PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
}

/// Raft timing (`[raft]`); defaults are the consensus crate's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RaftSection {
    /// Leader heartbeat period, ms.
    pub heartbeat_ms: u64,
    /// Election timeout lower bound, ms; above `heartbeat_ms`.
    pub election_min_ms: u64,
    /// Election timeout upper bound, ms; above `election_min_ms`.
    pub election_max_ms: u64,
    /// Take a snapshot after this many log entries.
    pub snapshot_every_entries: u64,
    /// How long a proposal may wait for commit before its outcome is unknown, ms.
    pub propose_timeout_ms: u64,
}

impl Default for RaftSection {
    fn default() -> Self {
        let timing = RaftTiming::default();
        RaftSection {
            heartbeat_ms: timing.heartbeat_ms,
            election_min_ms: timing.election_min_ms,
            election_max_ms: timing.election_max_ms,
            snapshot_every_entries: timing.snapshot_every_entries,
            propose_timeout_ms: u64::try_from(timing.propose_timeout.as_millis())
                .unwrap_or(u64::MAX),
        }
    }
}

/// The leader loop (`[leader]`) and how the leader ends attempts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LeaderSection {
    /// Period of scheduling passes, ms.
    pub schedule_interval_ms: u64,
    /// Period of `Tick` commands (usage, time limits, preemption grace), ms.
    pub tick_interval_ms: u64,
    /// Slurm's KillWait: between SIGTERM and SIGKILL when an attempt is ended
    /// (cancel, time limit, requeue, node failure of a gang), as a Slurm
    /// duration (`00:00:30`; a bare number is minutes).
    pub kill_wait: String,
    /// Slurm's MailProg: the program the leader runs for `--mail-type`
    /// notices, as `PROGRAM -s SUBJECT RECIPIENT` (an absolute path, e.g.
    /// `/usr/bin/mail`). Without it no mail is sent.
    pub mail_program: Option<String>,
    /// Slurm's `SlurmctldParameters=preempt_send_user_signal`. A job selected
    /// for preemption gets SIGCONT and SIGTERM, and at the end of the grace
    /// time SIGCONT, SIGTERM and (after `kill_wait`) SIGKILL; with this set,
    /// a job submitted with `--signal=[B:]SIG` gets SIG instead of the first
    /// SIGTERM (to its batch shell with `B:`, else to its steps).
    pub preempt_send_user_signal: bool,
}

/// `kill_wait`'s default, seconds.
pub const DEFAULT_KILL_WAIT_SECONDS: u64 = 10;

impl Default for LeaderSection {
    fn default() -> Self {
        LeaderSection {
            schedule_interval_ms: 1_000,
            tick_interval_ms: 1_000,
            kill_wait: format_time_limit(TimeLimit::Seconds(DEFAULT_KILL_WAIT_SECONDS)),
            mail_program: None,
            preempt_send_user_signal: false,
        }
    }
}

/// Node liveness (`[liveness]`): agents renew a lease by heartbeats and fence
/// themselves when they cannot; the leader declares a node down after the lease
/// plus a margin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LivenessSection {
    /// Agent heartbeat period, ms.
    pub agent_heartbeat_ms: u64,
    /// Agent lease, ms: an agent that cannot renew it this long kills its jobs.
    /// At least four heartbeats (an agent looks for a new leader after two
    /// unacknowledged ones, and must reattach before the lease runs out).
    pub agent_lease_ms: u64,
    /// Extra wait after a lapsed lease before the node is declared down, ms.
    pub down_margin_ms: u64,
}

impl Default for LivenessSection {
    fn default() -> Self {
        LivenessSection {
            agent_heartbeat_ms: 500,
            agent_lease_ms: 10_000,
            down_margin_ms: 5_000,
        }
    }
}
