//! The agent channel: messages between a node agent and the leading controller
//! over one QUIC bidirectional stream (mutual TLS; the agent's certificate names
//! its node), as length-prefixed postcard frames.
//!
//! The leader keeps liveness in memory from heartbeats and turns committed state
//! into launches and kills by reconciliation; the agent reports what happened,
//! each report carrying the attempt number, and resends a report until the leader
//! acknowledges that it was committed (or refused as stale).

use std::collections::BTreeMap;

use corral_state::ids::{AttemptNumber, JobId};
use corral_state::job::{BatchScript, ExitStatus, Job};
use corral_state::slurm::signal::Signal;
use corral_state::topology::TopologyAddress;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::agent_protocol::{self, ProtocolRange};
use crate::roster::{Roster, RosterDigest};

/// The largest frame either side accepts (a launch carries the batch script).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// What the agent found on its node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeResources {
    /// CPUs.
    pub cpus: u32,
    /// Memory, MiB.
    pub memory_mb: u64,
    /// GPUs: (index, type).
    pub gpus: Vec<(u32, String)>,
}

/// One GPU's health in a heartbeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuHealthSample {
    /// Index.
    pub index: u32,
    /// Healthy as far as the agent can tell.
    pub healthy: bool,
    /// Temperature, °C.
    pub temperature_c: Option<u32>,
    /// Utilization, percent.
    pub utilization_pct: Option<u32>,
    /// What is wrong, when unhealthy.
    pub problem: Option<String>,
}

/// What an agent says of itself in its hello.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentHello {
    /// The node (must match the certificate's name).
    pub node: String,
    /// Changes on every agent start.
    pub boot_id: String,
    /// The agent's build (corral's version).
    pub version: String,
    /// What the agent found.
    pub resources: NodeResources,
    /// Attempts whose processes still run here.
    pub running: Vec<(JobId, AttemptNumber)>,
    /// Where this agent accepts job steps from other agents (`host:port`,
    /// UDP), when it does.
    pub step_address: Option<String>,
}

/// What the leader tells an agent it accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentWelcome {
    /// Heartbeat every this many ms.
    pub heartbeat_ms: u64,
    /// Without an acknowledged heartbeat for this long, kill every job.
    pub lease_ms: u64,
    /// `SLURM_CLUSTER_NAME`.
    pub cluster_name: String,
}

/// Agent → controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AgentMessage {
    /// First message on a connection, in agent protocol 1 (see
    /// [`crate::agent_protocol`]); [`AgentMessage::HelloV2`] since.
    Hello {
        /// The node (must match the certificate's name).
        node: String,
        /// Changes on every agent start.
        boot_id: String,
        /// Agent version.
        version: String,
        /// What the agent found.
        resources: NodeResources,
        /// Attempts whose processes still run here.
        running: Vec<(JobId, AttemptNumber)>,
        /// Where this agent accepts job steps from other agents (`host:port`,
        /// UDP), when it does.
        step_address: Option<String>,
    },
    /// Liveness and health; answered with `HeartbeatAck` (which renews the lease).
    Heartbeat {
        /// Increases by one per heartbeat.
        seq: u64,
        /// Attempts whose processes run here now.
        running: Vec<(JobId, AttemptNumber)>,
        /// GPU health.
        gpus: Vec<GpuHealthSample>,
    },
    /// Something happened; resent until acknowledged.
    Report {
        /// Unique per agent run.
        id: u64,
        /// What.
        report: AgentReport,
    },
    /// A heartbeat that also says how this agent stands with the leader: what
    /// agents of this build send (a controller still takes `Heartbeat` from
    /// older ones, and counts them as not confirming the round trip).
    HeartbeatV2 {
        /// Increases by one per heartbeat.
        seq: u64,
        /// Attempts whose processes run here now.
        running: Vec<(JobId, AttemptNumber)>,
        /// GPU health.
        gpus: Vec<GpuHealthSample>,
        /// The newest acknowledgement this session received: the leader,
        /// knowing when it sent it, learns that the way back works.
        last_ack: Option<u64>,
        /// The roster this agent holds (none yet: `None`).
        roster: Option<RosterDigest>,
    },
    /// First message on a connection, from protocol 2 on: the agent's
    /// protocol range, then what [`AgentMessage::Hello`] said.
    HelloV2 {
        /// The agent protocols the agent speaks.
        protocol: ProtocolRange,
        /// The agent.
        hello: AgentHello,
    },
}

impl AgentMessage {
    /// The hello of protocol 1, which a controller of the previous release
    /// reads.
    pub fn unversioned_hello(hello: AgentHello) -> AgentMessage {
        AgentMessage::Hello {
            node: hello.node,
            boot_id: hello.boot_id,
            version: hello.version,
            resources: hello.resources,
            running: hello.running,
            step_address: hello.step_address,
        }
    }

    /// The hello this is, with the protocols its sender speaks (a
    /// protocol-1 hello names none: 1 alone), or `None` for another message.
    pub fn into_hello(self) -> Option<(ProtocolRange, AgentHello)> {
        match self {
            AgentMessage::Hello {
                node,
                boot_id,
                version,
                resources,
                running,
                step_address,
            } => Some((
                ProtocolRange::only(agent_protocol::UNVERSIONED),
                AgentHello {
                    node,
                    boot_id,
                    version,
                    resources,
                    running,
                    step_address,
                },
            )),
            AgentMessage::HelloV2 { protocol, hello } => Some((protocol, hello)),
            _ => None,
        }
    }
}

/// An agent's report about an attempt or a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AgentReport {
    /// The attempt's processes started here (or, on a node that runs no batch
    /// script, the allocation is ready).
    Started {
        /// The job.
        job: JobId,
        /// The attempt.
        attempt: AttemptNumber,
    },
    /// The batch script ended and every process of its group is gone.
    BatchExited {
        /// The job.
        job: JobId,
        /// The attempt.
        attempt: AttemptNumber,
        /// How it ended.
        status: ExitStatus,
    },
    /// Every process of the attempt on this node is gone.
    Released {
        /// The job.
        job: JobId,
        /// The attempt.
        attempt: AttemptNumber,
    },
    /// The job wrote a checkpoint.
    Checkpoint {
        /// The job.
        job: JobId,
        /// The attempt.
        attempt: AttemptNumber,
        /// Training step.
        step: u64,
        /// Where.
        path: String,
    },
    /// A GPU failed (e.g. a critical XID); the agent already killed the job using it.
    GpuFailed {
        /// GPU index.
        gpu: u32,
        /// The XID, if any.
        xid: Option<u32>,
        /// What the agent saw.
        reason: String,
        /// The fault needs the whole node out of service (e.g. XID 79: the GPU
        /// fell off the bus; the node needs a reboot).
        drain_node: bool,
    },
    /// An application-level XID (e.g. 13, 31, 43): the agent killed the attempts
    /// using the GPU; the GPU itself stays in service. The attempts are requeued.
    XidKilled {
        /// GPU index.
        gpu: u32,
        /// The XID.
        xid: u32,
        /// The attempts killed.
        attempts: Vec<(JobId, AttemptNumber)>,
        /// What the agent saw.
        reason: String,
    },
    /// The attempt's processes here are gone without the job's own doing: the
    /// agent fenced them (its lease lapsed), was restarted, or was stopped.
    /// The leader fails the attempt over as a node failure.
    Lost {
        /// The job.
        job: JobId,
        /// The attempt.
        attempt: AttemptNumber,
        /// What happened.
        reason: String,
    },
    /// Processes of the attempt survived SIGKILL for the unkillable timeout
    /// (Slurm's UnkillableStepTimeout): the leader drains the node, naming
    /// them, and fails the attempt over as a node failure.
    Unkillable {
        /// The job.
        job: JobId,
        /// The attempt.
        attempt: AttemptNumber,
        /// The processes still there.
        pids: Vec<i32>,
        /// How long after SIGKILL, seconds.
        after_s: u64,
    },
    /// An `srun` step this agent coordinates started (sacct's `N.S` row).
    StepStarted {
        /// The job.
        job: JobId,
        /// The attempt.
        attempt: AttemptNumber,
        /// The step's number.
        step: u32,
        /// The program.
        name: String,
        /// Its nodes.
        nodes: Vec<String>,
        /// Its tasks.
        ntasks: u32,
        /// The CPUs its tasks hold.
        cpus: u32,
    },
    /// That step ended.
    StepEnded {
        /// The job.
        job: JobId,
        /// The attempt.
        attempt: AttemptNumber,
        /// The step's number.
        step: u32,
        /// Its worst task's status.
        status: ExitStatus,
    },
}

/// Controller → agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ControllerMessage {
    /// The leader accepted the agent, in protocol 1 ([`ControllerMessage::WelcomeV2`]
    /// since).
    Welcome {
        /// Heartbeat every this many ms.
        heartbeat_ms: u64,
        /// Without an acknowledged heartbeat for this long, kill every job.
        lease_ms: u64,
        /// `SLURM_CLUSTER_NAME`.
        cluster_name: String,
    },
    /// This controller does not lead; try the one named (its client address; the
    /// agent channel listens on the same port over UDP).
    NotLeader {
        /// The leader, when known.
        leader: Option<String>,
    },
    /// The agent may not join (unknown node, wrong certificate); the reason says why.
    Refused {
        /// Why.
        reason: String,
    },
    /// A heartbeat was received; the lease is renewed from when it was sent.
    HeartbeatAck {
        /// The heartbeat's sequence number.
        seq: u64,
    },
    /// A report was committed (or refused as stale): stop resending it.
    ReportDone {
        /// The report's id.
        id: u64,
        /// False when the cluster refused it (stale, or too large) rather
        /// than committed it.
        committed: bool,
    },
    /// Start an attempt on this node.
    Launch(Box<Launch>),
    /// Send a signal to an attempt's processes (preemption notice, `--signal`,
    /// `scancel --signal`).
    Signal {
        /// The job.
        job: JobId,
        /// The attempt.
        attempt: AttemptNumber,
        /// Which.
        signal: Signal,
        /// Which of the attempt's processes.
        scope: SignalScope,
    },
    /// End an attempt here: SIGTERM (or `signal`), SIGKILL after `grace_ms`, then
    /// report `Released` (or `BatchExited` on the batch host).
    Kill {
        /// The job.
        job: JobId,
        /// The attempt.
        attempt: AttemptNumber,
        /// The first signal.
        signal: Signal,
        /// Between the first signal and SIGKILL.
        grace_ms: u64,
    },
    /// Every node of the cluster and where its agent answers: sent once the
    /// agent's heartbeats show it takes it (`HeartbeatV2`), and again on
    /// every change.
    Roster(Roster),
    /// The leader accepted the agent (protocol 2 on): the version the
    /// session speaks and the controller's build, then what `Welcome` said.
    WelcomeV2 {
        /// The agent protocol of this session.
        protocol: u32,
        /// The controller's build (corral's version).
        controller_build: String,
        /// The session's settings.
        welcome: AgentWelcome,
    },
}

impl ControllerMessage {
    /// The welcome for a session of agent protocol `protocol`.
    pub fn welcome(protocol: u32, controller_build: &str, welcome: AgentWelcome) -> Self {
        if protocol <= agent_protocol::UNVERSIONED {
            ControllerMessage::Welcome {
                heartbeat_ms: welcome.heartbeat_ms,
                lease_ms: welcome.lease_ms,
                cluster_name: welcome.cluster_name,
            }
        } else {
            ControllerMessage::WelcomeV2 {
                protocol,
                controller_build: controller_build.to_string(),
                welcome,
            }
        }
    }
}

/// Which processes of an attempt a signal reaches, as Slurm decides it: by
/// default the tasks of the job's steps (`srun`) and not the batch shell;
/// `B:` in `--signal` and `scancel --batch` mean the batch shell only (with
/// everything it started in its process group); `scancel --full` means both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum SignalScope {
    /// The batch script's process group.
    Batch,
    /// The tasks of the job's steps.
    Steps,
    /// Both.
    Full,
}

impl SignalScope {
    /// Whether the batch script's process group is signalled.
    pub fn includes_batch(self) -> bool {
        matches!(self, SignalScope::Batch | SignalScope::Full)
    }

    /// Whether the steps' tasks are signalled.
    pub fn includes_steps(self) -> bool {
        matches!(self, SignalScope::Steps | SignalScope::Full)
    }
}

/// What an agent needs to start an attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    /// The job as committed (its current attempt is the one to run).
    pub job: Job,
    /// The attempt.
    pub attempt: AttemptNumber,
    /// The batch script and its environment.
    pub script: BatchScript,
    /// Where the agents of the attempt's nodes accept job steps: node → `host:port`.
    pub step_peers: BTreeMap<String, String>,
    /// The leader that sent it: its replica id and term (the job sees it as
    /// `CORRAL_DISPATCHED_BY=ID:TERM`; the chaos suite checks one leader per
    /// term from it).
    pub dispatched_by: (u64, u64),
    /// Where each node of the attempt sits in the switch tree
    /// (`SLURM_TOPOLOGY_ADDR`); a node left out is addressed by its name alone.
    pub topology: BTreeMap<String, TopologyAddress>,
}

/// A frame could not be sent or read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The stream failed.
    #[error("agent channel: {0}")]
    Io(#[from] std::io::Error),
    /// A frame could not be encoded or decoded.
    #[error("agent channel: malformed message: {0}")]
    Codec(#[from] postcard::Error),
    /// A frame was larger than [`MAX_FRAME_BYTES`].
    #[error("agent channel: a {0}-byte message is larger than the limit")]
    TooLarge(usize),
}

/// Writes one frame.
pub async fn write_frame<W, T>(writer: &mut W, message: &T) -> Result<(), FrameError>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    let body = postcard::to_stdvec(message)?;
    if body.len() > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge(body.len()));
    }
    let length = u32::try_from(body.len()).map_err(|_| FrameError::TooLarge(body.len()))?;
    writer.write_all(&length.to_le_bytes()).await?;
    writer.write_all(&body).await?;
    writer.flush().await?;
    Ok(())
}

/// Reads one frame; `None` at a clean end of stream.
pub async fn read_frame<R, T>(reader: &mut R) -> Result<Option<T>, FrameError>
where
    R: tokio::io::AsyncRead + Unpin,
    T: DeserializeOwned,
{
    read_frame_limited(reader, MAX_FRAME_BYTES).await
}

/// Reads one frame of at most `max_bytes` (and at most [`MAX_FRAME_BYTES`]);
/// `None` at a clean end of stream.
pub async fn read_frame_limited<R, T>(
    reader: &mut R,
    max_bytes: usize,
) -> Result<Option<T>, FrameError>
where
    R: tokio::io::AsyncRead + Unpin,
    T: DeserializeOwned,
{
    let mut length = [0u8; 4];
    match reader.read_exact(&mut length).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let length = u32::from_le_bytes(length) as usize;
    if length > max_bytes.min(MAX_FRAME_BYTES) {
        return Err(FrameError::TooLarge(length));
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).await?;
    Ok(Some(postcard::from_bytes(&body)?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_protocol_1_session_is_welcomed_in_the_only_welcome_protocol_1_reads() {
        let welcome = AgentWelcome {
            heartbeat_ms: 500,
            lease_ms: 10_000,
            cluster_name: "c".to_string(),
        };
        assert!(matches!(
            ControllerMessage::welcome(1, "0.1.0", welcome.clone()),
            ControllerMessage::Welcome {
                heartbeat_ms: 500,
                lease_ms: 10_000,
                ..
            }
        ));
        assert!(matches!(
            ControllerMessage::welcome(2, "0.1.0", welcome),
            ControllerMessage::WelcomeV2 { protocol: 2, .. }
        ));
    }

    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_end_cleanly() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let sent = AgentMessage::Heartbeat {
            seq: 7,
            running: vec![(JobId(3), 1)],
            gpus: vec![],
        };
        write_frame(&mut a, &sent).await.unwrap();
        drop(a);
        let got: Option<AgentMessage> = read_frame(&mut b).await.unwrap();
        assert_eq!(got, Some(sent));
        let end: Option<AgentMessage> = read_frame(&mut b).await.unwrap();
        assert_eq!(end, None);
    }

    #[tokio::test]
    async fn an_oversized_length_is_refused_before_reading() {
        let (mut a, mut b) = tokio::io::duplex(64);
        a.write_all(&u32::MAX.to_le_bytes()).await.unwrap();
        let got: Result<Option<AgentMessage>, _> = read_frame(&mut b).await;
        assert!(matches!(got, Err(FrameError::TooLarge(_))));
    }
}
