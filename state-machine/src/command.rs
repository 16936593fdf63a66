//! Every change to the cluster state is a [`Command`]; this is what the Raft log
//! carries. Commands that need time carry the leader's timestamp.

use serde::{Deserialize, Serialize};

use crate::account::{Account, User};
use crate::config::ClusterConfig;
use crate::format_v1::JobSpecV1;
use crate::format_v2::{AccountV2, JobSpecV2, JobUpdateV2, UserV2};
use crate::ids::{Actor, AttemptNumber, JobId};
use crate::job::{BatchScript, ExitStatus, JobSpec, NodeAllocation, PendingReason};
use crate::job_update::JobUpdate;
use crate::node::NodeDefinition;
use crate::node_liveness::NodeLiveness;
use crate::partition::Partition;
use crate::qos::Qos;
use crate::reservation::Reservation;
use crate::slurm::signal::Signal;
use crate::time::Timestamp;
use crate::topology::Topology;

/// Which jobs a cancel applies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CancelTarget {
    /// One job, or every task of an array when the id is an array's id.
    Job(JobId),
    /// One task of an array (`123_4`).
    ArrayTask {
        /// The array's id.
        array_job_id: JobId,
        /// The task index.
        task_id: u32,
    },
    /// Every unfinished job of a user (`scancel -u`).
    User(String),
}

/// One gang placement proposed by the scheduler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedAllocation {
    /// The job.
    pub job: JobId,
    /// The attempt number it will run as (the job's next).
    pub attempt: AttemptNumber,
    /// Every node of the gang, batch host first.
    pub nodes: Vec<NodeAllocation>,
}

/// One preemption proposed by the scheduler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedPreemption {
    /// The victim.
    pub job: JobId,
    /// The victim's running attempt.
    pub attempt: AttemptNumber,
    /// Signal to send first.
    pub signal: Signal,
    /// Seconds between the signal and the kill.
    pub grace_seconds: u64,
    /// The job that needs the resources.
    pub for_job: JobId,
}

/// A change to the cluster state.
///
/// A variant's position is its encoding in the log: new variants go at the end,
/// and a variant's fields never change once a build has written it (format 1's
/// `Submit` is kept as [`Command::SubmitFormat1`], format 2's as
/// [`Command::SubmitFormat2`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)]
pub enum Command {
    // ---- jobs -------------------------------------------------------------
    /// Format 1's submission, as log entries written before format 2 hold it:
    /// applied as [`Command::Submit`] with the fields format 1 did not have at
    /// their defaults. This build never proposes it.
    SubmitFormat1 {
        /// What was asked, in format 1's shape.
        spec: Box<JobSpecV1>,
        /// As in `Submit`.
        batch: BatchScript,
        /// As in `Submit`.
        by: Actor,
        /// As in `Submit`.
        key: Option<String>,
        /// As in `Submit`.
        at: Timestamp,
    },
    /// Cancel jobs. Pending ones end at once; running ones go to COMPLETING.
    Cancel {
        /// Which.
        target: CancelTarget,
        /// Who asks.
        by: Actor,
        /// Leader time.
        at: Timestamp,
    },
    /// Hold a pending job.
    Hold {
        /// The job.
        job: JobId,
        /// Who asks.
        by: Actor,
    },
    /// Release a held job (or one in REQUEUE_HOLD).
    Release {
        /// The job.
        job: JobId,
        /// Who asks.
        by: Actor,
        /// Leader time.
        at: Timestamp,
    },
    /// Format 2's `UpdateJob`, as log entries written before format 3 hold
    /// it; applied as [`Command::UpdateJob`]. This build never proposes it.
    UpdateJobFormat2 {
        /// The job.
        job: JobId,
        /// What changes, in format 2's shape.
        update: JobUpdateV2,
        /// Who asks.
        by: Actor,
        /// Leader time.
        at: Timestamp,
    },
    /// Requeue a running job (`scontrol requeue`).
    Requeue {
        /// The job.
        job: JobId,
        /// Who asks.
        by: Actor,
        /// Leader time.
        at: Timestamp,
    },
    /// The scheduler's plan: allocations and preemptions, re-checked entry by entry.
    ApplyPlan {
        /// Gangs to start.
        allocations: Vec<PlannedAllocation>,
        /// Jobs to preempt.
        preemptions: Vec<PlannedPreemption>,
        /// Pending reasons that changed since the last plan.
        reasons: Vec<(JobId, PendingReason)>,
        /// Leader time.
        at: Timestamp,
    },
    /// Leader's clock tick: charges usage, decays it, and ends attempts past their
    /// time limit or preemption grace.
    Tick {
        /// Leader time.
        at: Timestamp,
    },

    // ---- agent reports ----------------------------------------------------
    /// An agent started the attempt's processes on its node.
    AttemptStarted {
        /// The job.
        job: JobId,
        /// The attempt.
        attempt: AttemptNumber,
        /// The reporting node.
        node: String,
        /// Leader time when the report arrived.
        at: Timestamp,
    },
    /// The batch script exited (reported by the batch host, which also confirms its
    /// own cleanup).
    BatchExited {
        /// The job.
        job: JobId,
        /// The attempt.
        attempt: AttemptNumber,
        /// The reporting node (must be the batch host).
        node: String,
        /// How the script ended.
        status: ExitStatus,
        /// Leader time.
        at: Timestamp,
    },
    /// A node confirms that every process of the ending attempt is gone.
    NodeReleased {
        /// The job.
        job: JobId,
        /// The attempt.
        attempt: AttemptNumber,
        /// The reporting node.
        node: String,
        /// Leader time.
        at: Timestamp,
    },
    /// A job committed a checkpoint.
    ReportCheckpoint {
        /// The job.
        job: JobId,
        /// The attempt that wrote it.
        attempt: AttemptNumber,
        /// The node whose agent reports it (must be in the attempt's allocation).
        node: String,
        /// Training step.
        step: u64,
        /// Where it is.
        path: String,
        /// Leader time.
        at: Timestamp,
    },

    // ---- nodes ------------------------------------------------------------
    /// An agent (re)registered. Attempts placed on the node that the agent does not
    /// list as running have lost their processes there.
    RegisterNode {
        /// The node.
        node: String,
        /// CPUs the agent found.
        cpus: u32,
        /// Memory the agent found, MiB.
        memory_mb: u64,
        /// GPUs the agent found: (index, type).
        gpus: Vec<(u32, String)>,
        /// Attempts the agent is still running.
        running: Vec<(JobId, AttemptNumber)>,
        /// Agent version.
        agent_version: String,
        /// Changes on every agent start.
        boot_id: String,
        /// Where the agent accepts job steps from other agents (`host:port`, UDP).
        #[serde(default)]
        step_address: Option<String>,
        /// Leader time.
        at: Timestamp,
    },
    /// The leader (lease expired) or an operator declares a node down; its attempts end.
    NodeDown {
        /// The node.
        node: String,
        /// Why.
        reason: String,
        /// Who (the leader acts as `corral`).
        by: Actor,
        /// Leader time.
        at: Timestamp,
    },
    /// Drain a node: no new work; running work finishes.
    DrainNode {
        /// The node.
        node: String,
        /// Why.
        reason: String,
        /// Who.
        by: Actor,
        /// Leader time.
        at: Timestamp,
    },
    /// Clear a node's drain.
    ResumeNode {
        /// The node.
        node: String,
        /// Who.
        by: Actor,
    },
    /// An agent reports a GPU fault (e.g. a critical XID); the GPU is drained and the
    /// attempt using it ends and is requeued.
    GpuFailed {
        /// The node.
        node: String,
        /// GPU index.
        gpu: u32,
        /// The XID, if any.
        xid: Option<u32>,
        /// What the agent saw.
        reason: String,
        /// Leader time.
        at: Timestamp,
    },
    /// Take one GPU out of service.
    DrainGpu {
        /// The node.
        node: String,
        /// GPU index.
        gpu: u32,
        /// Why.
        reason: String,
        /// Who.
        by: Actor,
        /// Leader time.
        at: Timestamp,
    },
    /// Return a GPU to service, marking it healthy.
    ResumeGpu {
        /// The node.
        node: String,
        /// GPU index.
        gpu: u32,
        /// Who.
        by: Actor,
    },

    // ---- configuration (admin) ---------------------------------------------
    /// Replace cluster-wide settings.
    SetConfig {
        /// The settings.
        config: ClusterConfig,
        /// Who.
        by: Actor,
    },
    /// Add nodes, or change the hardware of nodes without live attempts.
    DefineNodes {
        /// The nodes.
        nodes: Vec<NodeDefinition>,
        /// Who.
        by: Actor,
        /// Leader time.
        at: Timestamp,
    },
    /// Remove a node with no live attempts and no partition listing it.
    RemoveNode {
        /// The node.
        node: String,
        /// Who.
        by: Actor,
    },
    /// Add or replace a partition.
    SetPartition {
        /// The partition.
        partition: Partition,
        /// Who.
        by: Actor,
    },
    /// Remove a partition with no unfinished jobs.
    RemovePartition {
        /// The name.
        name: String,
        /// Who.
        by: Actor,
    },
    /// Format 2's `SetAccount`, as log entries written before format 3 hold
    /// it; applied as [`Command::SetAccount`] without limits. This build never
    /// proposes it.
    SetAccountFormat2 {
        /// The account, in format 2's shape.
        account: AccountV2,
        /// Who.
        by: Actor,
    },
    /// Remove an account with no children, users or unfinished jobs.
    RemoveAccount {
        /// The name.
        name: String,
        /// Who.
        by: Actor,
    },
    /// Format 2's `SetUser`, as log entries written before format 3 hold it;
    /// applied as [`Command::SetUser`] without limits. This build never
    /// proposes it.
    SetUserFormat2 {
        /// The user, in format 2's shape.
        user: UserV2,
        /// Who.
        by: Actor,
    },
    /// Remove a user with no unfinished jobs.
    RemoveUser {
        /// The name.
        name: String,
        /// Who.
        by: Actor,
    },
    /// Add or replace a QOS.
    SetQos {
        /// The QOS.
        qos: Qos,
        /// Who.
        by: Actor,
    },
    /// Remove a QOS no unfinished job uses.
    RemoveQos {
        /// The name.
        name: String,
        /// Who.
        by: Actor,
    },
    /// Replace the topology.
    SetTopology {
        /// The topology.
        topology: Topology,
        /// Who.
        by: Actor,
    },
    /// Create or replace a reservation.
    SetReservation {
        /// The reservation.
        reservation: Reservation,
        /// Who.
        by: Actor,
    },
    /// Delete a reservation.
    DeleteReservation {
        /// The name.
        name: String,
        /// Who.
        by: Actor,
    },

    // ---- agent reports (appended: a variant's position is its log encoding) --
    /// An application XID (e.g. 13, 31, 43) on a GPU of the attempt: the agent
    /// killed the attempt's processes using it. The attempt ends and the job is
    /// requeued as after a GPU failure, but the GPU stays in service.
    ApplicationXid {
        /// The job.
        job: JobId,
        /// The attempt the agent killed (must be the live, running one).
        attempt: AttemptNumber,
        /// The reporting node (must be in the attempt's allocation).
        node: String,
        /// GPU index (must be allocated to the attempt on that node).
        gpu: u32,
        /// The XID.
        xid: u32,
        /// Leader time.
        at: Timestamp,
    },
    /// A node's agent lost an attempt's processes without the job's own doing
    /// (its lease lapsed and it fenced them, the agent restarted or was
    /// stopped): they are gone from that node. A running attempt ends as a
    /// node failure there (its other nodes are killed, the job is requeued if
    /// it may be); an ending one counts that node released.
    AttemptLost {
        /// The job.
        job: JobId,
        /// The attempt (must be the job's live one).
        attempt: AttemptNumber,
        /// The reporting node (must be in the attempt's allocation).
        node: String,
        /// What happened, for the job's record.
        reason: String,
        /// Leader time.
        at: Timestamp,
    },

    // ---- format 2 ----------------------------------------------------------
    /// Format 2's submission, as log entries written before format 3 hold it:
    /// applied as [`Command::Submit`] with the fields format 2 did not have at
    /// their defaults. This build never proposes it.
    SubmitFormat2 {
        /// What was asked, in format 2's shape.
        spec: Box<JobSpecV2>,
        /// As in `Submit`.
        batch: BatchScript,
        /// As in `Submit`.
        by: Actor,
        /// As in `Submit`.
        key: Option<String>,
        /// As in `Submit`.
        at: Timestamp,
    },
    /// An `srun` step started in the attempt (reported by the agent that
    /// coordinates it). A step already recorded, or one past
    /// [`crate::job::MAX_STEP_RECORDS`], changes nothing.
    StepStarted {
        /// The job.
        job: JobId,
        /// The attempt (must be the live one).
        attempt: AttemptNumber,
        /// The reporting node (must be in the attempt's allocation).
        node: String,
        /// The step's number.
        step: u32,
        /// The program.
        name: String,
        /// The step's nodes.
        nodes: Vec<String>,
        /// Its tasks.
        ntasks: u32,
        /// The CPUs its tasks hold.
        cpus: u32,
        /// Leader time.
        at: Timestamp,
    },
    /// A recorded `srun` step ended (known by its attempt, node and number);
    /// one not recorded, or already ended, changes nothing.
    StepEnded {
        /// The job.
        job: JobId,
        /// The attempt it ran in.
        attempt: AttemptNumber,
        /// The reporting node.
        node: String,
        /// The step's number.
        step: u32,
        /// Its worst task's status.
        status: ExitStatus,
        /// Leader time.
        at: Timestamp,
    },

    // ---- format 3 ----------------------------------------------------------
    /// Submit a job (an array becomes one job per task).
    Submit {
        /// What was asked; `spec.user` must be the actor.
        spec: JobSpec,
        /// The script and environment, stored once for all tasks of an array.
        batch: BatchScript,
        /// The authenticated submitter.
        by: Actor,
        /// The client's idempotency key: a second `Submit` by the same user with
        /// the same key within [`crate::submit_keys::SUBMIT_KEY_RETENTION_MS`]
        /// changes nothing and answers with the first one's jobs, so a client may
        /// retry a submission whose answer it lost.
        key: Option<String>,
        /// Leader time.
        at: Timestamp,
    },
    /// The stored format of the build that leads, proposed by each leader when
    /// its term starts, before any plan: it changes nothing. A replica on a
    /// build that cannot read this variant (format 2) or whose format is older
    /// than `format` stops at this entry, naming the format, until it is
    /// upgraded; so no replica ever applies a newer leader's entries by older
    /// rules, whatever order the controllers are upgraded in.
    StoredFormat {
        /// The leader's [`crate::snapshot::FORMAT_VERSION`].
        format: u32,
    },
    /// Add or replace an account.
    SetAccount {
        /// The account.
        account: Account,
        /// Who.
        by: Actor,
    },
    /// Add or replace a user.
    SetUser {
        /// The user.
        user: User,
        /// Who.
        by: Actor,
    },
    /// Change a job (`scontrol update JobId=N ...`).
    UpdateJob {
        /// The job.
        job: JobId,
        /// What changes.
        update: JobUpdate,
        /// Who asks.
        by: Actor,
        /// Leader time.
        at: Timestamp,
    },
    /// Set the agents' heartbeat and lease and the down margin (format 5).
    SetLiveness {
        /// The settings.
        liveness: NodeLiveness,
        /// Who.
        by: Actor,
        /// Leader time: the replaced settings count for a while after it.
        at: Timestamp,
    },
}

/// The leader time a command carries, by reference: one list of the commands
/// that carry one, for shared and mutable borrows alike.
macro_rules! time_slot {
    ($command:expr) => {{
        use Command::*;
        match $command {
            Submit { at, .. }
            | SubmitFormat1 { at, .. }
            | SubmitFormat2 { at, .. }
            | Cancel { at, .. }
            | Release { at, .. }
            | Requeue { at, .. }
            | UpdateJob { at, .. }
            | UpdateJobFormat2 { at, .. }
            | ApplyPlan { at, .. }
            | Tick { at }
            | AttemptStarted { at, .. }
            | BatchExited { at, .. }
            | NodeReleased { at, .. }
            | ReportCheckpoint { at, .. }
            | RegisterNode { at, .. }
            | NodeDown { at, .. }
            | DrainNode { at, .. }
            | GpuFailed { at, .. }
            | DrainGpu { at, .. }
            | DefineNodes { at, .. }
            | ApplicationXid { at, .. }
            | AttemptLost { at, .. }
            | StepStarted { at, .. }
            | StepEnded { at, .. }
            | SetLiveness { at, .. } => Some(at),
            Hold { .. }
            | ResumeNode { .. }
            | ResumeGpu { .. }
            | SetConfig { .. }
            | RemoveNode { .. }
            | SetPartition { .. }
            | RemovePartition { .. }
            | SetAccount { .. }
            | SetAccountFormat2 { .. }
            | RemoveAccount { .. }
            | SetUser { .. }
            | SetUserFormat2 { .. }
            | RemoveUser { .. }
            | SetQos { .. }
            | RemoveQos { .. }
            | SetTopology { .. }
            | SetReservation { .. }
            | DeleteReservation { .. }
            | StoredFormat { .. } => None,
        }
    }};
}
impl Command {
    /// The leader time the command carries, if it carries one.
    pub fn time(&self) -> Option<Timestamp> {
        self.time_slot().copied()
    }

    /// Sets the leader time the command carries (commands without one are
    /// left alone). Only the leader stamps time: whichever replica a client
    /// reached, the leader's proposer stamps each command with its own clock
    /// before it enters the log, so a replica with a wrong clock cannot move
    /// the cluster's time.
    pub fn stamp(&mut self, at: Timestamp) {
        if let Some(slot) = self.time_slot_mut() {
            *slot = at;
        }
    }

    fn time_slot(&self) -> Option<&Timestamp> {
        time_slot!(self)
    }

    fn time_slot_mut(&mut self) -> Option<&mut Timestamp> {
        time_slot!(self)
    }
}

/// What an accepted command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// Accepted; nothing more to say.
    Done,
    /// Jobs were created: `count` consecutive ids from `first`.
    Submitted {
        /// The first id (the array's id for arrays).
        first: JobId,
        /// How many.
        count: u32,
    },
    /// These jobs changed state (cancelled, ending, requeued, released).
    Jobs(Vec<JobId>),
    /// A plan was applied entry by entry.
    Plan(PlanOutcome),
}

/// The result of applying a plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanOutcome {
    /// Allocations that started.
    pub started: Vec<JobId>,
    /// Preemptions that began.
    pub preempting: Vec<JobId>,
    /// Entries refused because state moved on; the scheduler plans them again.
    pub rejected: Vec<(JobId, String)>,
}
