//! Jobs: what the user asked for ([`JobSpec`]), what the cluster resolved it to
//! ([`ResourceRequest`]), its Slurm state and pending reason, and its attempts.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::ids::{AttemptNumber, JobId};
use crate::slurm::array::ArraySpec;
use crate::slurm::dependency::DependencySpec;
use crate::slurm::duration::TimeLimit;
use crate::slurm::gres::GpuRequest;
use crate::slurm::mail::MailTypes;
use crate::slurm::sbatch::SwitchesSpec;
use crate::slurm::signal::{Signal, SignalSpec};
use crate::time::Timestamp;

/// Memory asked for, in the form the user gave it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemoryRequest {
    /// Nothing asked: memory is not reserved.
    #[default]
    Unspecified,
    /// `--mem=N` (N > 0), MiB per node.
    PerNodeMb(u64),
    /// `--mem=0`: all of each node's memory.
    WholeNode,
    /// `--mem-per-cpu`, MiB.
    PerCpuMb(u64),
    /// `--mem-per-gpu`, MiB.
    PerGpuMb(u64),
}

/// The batch script and its environment. Stored once per submission, so an array
/// of a thousand tasks holds one copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchScript {
    /// The script text, starting with `#!`.
    pub script: String,
    /// Arguments given after the script path.
    pub argv: Vec<String>,
    /// The environment the job starts with (after `--export` was applied).
    pub environment: BTreeMap<String, String>,
}

/// Everything a user's `sbatch` asked for, resolved by the CLI from flags and
/// `#SBATCH` lines but not yet checked against the cluster. The script itself
/// travels beside it as a [`BatchScript`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpec {
    /// `--job-name`.
    pub name: String,
    /// The submitting user.
    pub user: String,
    /// The submitting user's uid, as the client claims it. The state machine cannot
    /// verify it; the node agent resolves `user` on its node and refuses to run a
    /// job whose uid does not match.
    pub uid: u32,
    /// The submitting user's gid, as the client claims it (checked like `uid`).
    pub gid: u32,
    /// The host `corral submit` ran on (`SLURM_SUBMIT_HOST`).
    pub submit_host: String,
    /// `--account`; the user's default account when `None`.
    pub account: Option<String>,
    /// `--partition`; the default partition when `None`.
    pub partition: Option<String>,
    /// `--qos`; the account's default QOS when `None`.
    pub qos: Option<String>,
    /// `--nodes` (default 1).
    pub nodes: u32,
    /// `--ntasks`.
    pub ntasks: Option<u32>,
    /// `--ntasks-per-node`.
    pub ntasks_per_node: Option<u32>,
    /// `--cpus-per-task` (default 1).
    pub cpus_per_task: u32,
    /// `--cpus-per-gpu`.
    pub cpus_per_gpu: Option<u32>,
    /// `--gpus-per-node` or `--gres=gpu:...`.
    pub gpus_per_node: Option<GpuRequest>,
    /// `--gpus`: GPUs for the whole job, spread evenly over its nodes.
    pub gpus_total: Option<GpuRequest>,
    /// `--gpus-per-task`.
    pub gpus_per_task: Option<GpuRequest>,
    /// Memory.
    pub memory: MemoryRequest,
    /// `--time`; the partition default when `None`.
    pub time_limit: Option<TimeLimit>,
    /// `--array`.
    pub array: Option<ArraySpec>,
    /// `--dependency`.
    pub dependency: Option<DependencySpec>,
    /// `--requeue` / `--no-requeue`: whether node failure or preemption requeues the job.
    pub requeue: bool,
    /// `--signal`.
    pub signal: Option<SignalSpec>,
    /// `--exclusive`.
    pub exclusive: bool,
    /// `--chdir` (absolute), the submit directory by default.
    pub workdir: String,
    /// The directory `corral submit` ran in (`SLURM_SUBMIT_DIR`).
    pub submit_dir: String,
    /// `--output` pattern; `slurm-%j.out` (arrays: `slurm-%A_%a.out`) when `None`.
    pub stdout: Option<String>,
    /// `--error` pattern; stdout's file when `None`.
    pub stderr: Option<String>,
    /// `--input` pattern; `/dev/null` when `None`.
    pub stdin: Option<String>,
    /// `--nice`.
    pub nice: i32,
    /// `--hold`.
    pub hold: bool,
    /// `--switches`.
    pub switches: Option<SwitchesSpec>,
    /// `--constraint`: features every node must have.
    pub features: Vec<String>,
    /// `--reservation`.
    pub reservation: Option<String>,
    /// `--nodelist`, expanded.
    pub required_nodes: Vec<String>,
    /// `--exclude`, expanded.
    pub excluded_nodes: Vec<String>,
    /// `--comment`.
    pub comment: Option<String>,
    // The fields below came with stored format 2. `serde(default)` serves the
    // JSON records an older controller sends a newer CLI; postcard (the log,
    // snapshots) always encodes them, and format 1 is read through
    // `format_v1`, never through these defaults.
    /// `--time-min`: the least time limit the job would accept (scontrol's
    /// `TimeMin`). Kept and shown; corral schedules with the time limit only.
    #[serde(default)]
    pub time_min: Option<TimeLimit>,
    /// `--mail-type`, repeated ones ORed.
    #[serde(default)]
    pub mail_type: MailTypes,
    /// `--mail-user`; the submitting user when `None`.
    #[serde(default)]
    pub mail_user: Option<String>,
    /// What scontrol shows as `Command=`: the batch script's path as sbatch
    /// names it, or `srun`'s program; `None` for `--wrap`, a script read from
    /// standard input and `salloc`.
    #[serde(default)]
    pub command: Option<String>,
    /// Whether `--cpus-per-task` was given (Slurm then sets
    /// `SLURM_CPUS_PER_TASK`, also for 1).
    #[serde(default)]
    pub cpus_per_task_given: bool,
    // The fields below came with stored format 3 (read format 2 through
    // `format_v2`).
    /// `--begin`: the job is not eligible before this leader time.
    #[serde(default)]
    pub begin_time: Option<Timestamp>,
    /// `--mincpus`: each node gives the job at least this many CPUs.
    #[serde(default)]
    pub min_cpus_per_node: Option<u32>,
}

impl JobSpec {
    /// The request sbatch makes with no options: one node, one task, one CPU, no
    /// GPUs, requeue allowed, everything else left to the cluster's defaults.
    pub fn sbatch_defaults(name: &str, user: &str, workdir: &str) -> JobSpec {
        JobSpec {
            name: name.to_string(),
            user: user.to_string(),
            uid: 0,
            gid: 0,
            submit_host: String::new(),
            account: None,
            partition: None,
            qos: None,
            nodes: 1,
            ntasks: None,
            ntasks_per_node: None,
            cpus_per_task: 1,
            cpus_per_gpu: None,
            gpus_per_node: None,
            gpus_total: None,
            gpus_per_task: None,
            memory: MemoryRequest::Unspecified,
            time_limit: None,
            array: None,
            dependency: None,
            requeue: true,
            signal: None,
            exclusive: false,
            workdir: workdir.to_string(),
            submit_dir: workdir.to_string(),
            stdout: None,
            stderr: None,
            stdin: None,
            nice: 0,
            hold: false,
            switches: None,
            features: Vec::new(),
            reservation: None,
            required_nodes: Vec::new(),
            excluded_nodes: Vec::new(),
            comment: None,
            time_min: None,
            mail_type: MailTypes::NONE,
            mail_user: None,
            command: None,
            cpus_per_task_given: false,
            begin_time: None,
            min_cpus_per_node: None,
        }
    }
}

/// What the cluster will allocate for each attempt, derived from the spec at
/// submission. The scheduler and the plan applier work from this alone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResourceRequest {
    /// Nodes in the gang.
    pub nodes: u32,
    /// GPUs on every node.
    pub gpus_per_node: u32,
    /// Required GPU type, if any.
    pub gpu_type: Option<String>,
    /// CPUs on every node.
    pub cpus_per_node: u32,
    /// Memory on every node, MiB; ignored when `whole_node_memory`.
    pub memory_per_node_mb: u64,
    /// `--mem=0`: the job takes all memory of each node.
    pub whole_node_memory: bool,
    /// Tasks in all.
    pub ntasks: u32,
    /// Whole nodes only.
    pub exclusive: bool,
    /// Features every node must have.
    pub features: Vec<String>,
    /// Nodes that must be part of the allocation.
    pub required_nodes: Vec<String>,
    /// Nodes that must not be used.
    pub excluded_nodes: BTreeSet<String>,
    /// Topology constraint.
    pub switches: Option<SwitchesSpec>,
}

impl ResourceRequest {
    /// GPUs across all nodes.
    pub fn total_gpus(&self) -> u64 {
        u64::from(self.nodes) * u64::from(self.gpus_per_node)
    }

    /// Whether `count` GPUs on one node are what this request is given:
    /// exactly `gpus_per_node`, or with `exclusive` at least that many (an
    /// exclusive job gets every GPU of its nodes, as in Slurm).
    pub fn gpu_count_fits(&self, count: usize) -> bool {
        let wanted = self.gpus_per_node as usize;
        if self.exclusive {
            count >= wanted
        } else {
            count == wanted
        }
    }
}

/// A job's state, as Slurm names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum JobState {
    /// Waiting for resources, dependencies, a hold or priority.
    Pending,
    /// An attempt holds resources.
    Running,
    /// The attempt is ending; its nodes have not all confirmed their processes are gone.
    Completing,
    /// Exited with code zero.
    Completed,
    /// Exited non-zero or was killed by a signal.
    Failed,
    /// Cancelled by a user or operator.
    Cancelled,
    /// Reached its time limit.
    Timeout,
    /// A node failed under a job that may not be requeued.
    NodeFail,
    /// Preempted out of a partition whose mode is cancel.
    Preempted,
    /// Only as an attempt's final state: the attempt ended and the job went back to the queue.
    Requeued,
    /// Requeued more often than `max_requeue`: held until released.
    RequeueHold,
}

impl JobState {
    /// True for states a job never leaves.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Completed
                | JobState::Failed
                | JobState::Cancelled
                | JobState::Timeout
                | JobState::NodeFail
                | JobState::Preempted
        )
    }

    /// True while the job holds resources.
    pub fn holds_resources(self) -> bool {
        matches!(self, JobState::Running | JobState::Completing)
    }

    /// Slurm's long name (`PENDING`).
    pub fn slurm_name(self) -> &'static str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Running => "RUNNING",
            JobState::Completing => "COMPLETING",
            JobState::Completed => "COMPLETED",
            JobState::Failed => "FAILED",
            JobState::Cancelled => "CANCELLED",
            JobState::Timeout => "TIMEOUT",
            JobState::NodeFail => "NODE_FAIL",
            JobState::Preempted => "PREEMPTED",
            JobState::Requeued => "REQUEUED",
            JobState::RequeueHold => "REQUEUE_HOLD",
        }
    }

    /// Slurm's compact code for squeue's ST column (`PD`).
    pub fn slurm_code(self) -> &'static str {
        match self {
            JobState::Pending => "PD",
            JobState::Running => "R",
            JobState::Completing => "CG",
            JobState::Completed => "CD",
            JobState::Failed => "F",
            JobState::Cancelled => "CA",
            JobState::Timeout => "TO",
            JobState::NodeFail => "NF",
            JobState::Preempted => "PR",
            JobState::Requeued => "RQ",
            JobState::RequeueHold => "RH",
        }
    }
}

/// Why a pending job is not running, as squeue's NODELIST(REASON) shows it.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum PendingReason {
    /// Not yet considered by the scheduler.
    #[default]
    None,
    /// Jobs of higher priority are ahead.
    Priority,
    /// Not enough free resources.
    Resources,
    /// Waiting on another job.
    Dependency,
    /// A dependency can no longer be satisfied.
    DependencyNeverSatisfied,
    /// Held by its user.
    JobHeldUser,
    /// Held by an operator.
    JobHeldAdmin,
    /// Requeued more often than allowed.
    JobHoldMaxRequeue,
    /// Its begin time has not come.
    BeginTime,
    /// Its time limit exceeds the partition's.
    PartitionTimeLimit,
    /// Its partition is down.
    PartitionDown,
    /// Its account's QOS GPU limit is reached.
    QosGrpGpuLimit,
    /// Its account's QOS GPU-minutes are used up.
    QosGrpGpuRunMinutes,
    /// Its user's QOS GPU limit is reached.
    QosMaxGpuPerUser,
    /// Its user's QOS job limit is reached.
    QosMaxJobsPerUser,
    /// Requested nodes are down, drained or reserved.
    ReqNodeNotAvail,
    /// Waiting for its reservation to start, or reserved nodes are in use.
    Reservation,
    /// Waiting for a placement that meets `--switches`.
    Topology,
    /// Array throttle (`%N`) reached.
    JobArrayTaskLimit,
    /// The reservation the job asked for was deleted or ended; the job is held
    /// until its user releases it (to run outside any reservation) or cancels it.
    ReservationDeleted,
    /// Its association's running-job group limit is reached (`GrpJobs`).
    AssocGrpJobsLimit,
    /// Its user's running-job limit in its account is reached (`MaxJobs`).
    AssocMaxJobsLimit,
    /// Its association's GPU group limit is reached (`GrpTRES=gres/gpu`).
    AssocGrpGpuLimit,
    /// Its time limit exceeds its association's `MaxWall`.
    AssocMaxWallDurationPerJobLimit,
}

impl PendingReason {
    /// True while the job is not yet eligible because of a dependency or begin time.
    pub fn waits_on_dependency(self) -> bool {
        matches!(
            self,
            PendingReason::Dependency
                | PendingReason::DependencyNeverSatisfied
                | PendingReason::BeginTime
        )
    }

    /// True for the reasons the scheduler reports in plans; the others are set by
    /// the state machine itself (holds, requeue limit, deleted reservation).
    pub fn is_set_by_scheduler(self) -> bool {
        !matches!(
            self,
            PendingReason::JobHeldUser
                | PendingReason::JobHeldAdmin
                | PendingReason::JobHoldMaxRequeue
                | PendingReason::ReservationDeleted
        )
    }
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitStatus {
    /// Exit code (0 when killed by a signal).
    pub code: i32,
    /// The signal that killed it, if any.
    pub signal: Option<Signal>,
}

impl ExitStatus {
    /// True for exit code zero without a signal.
    pub fn is_success(&self) -> bool {
        self.code == 0 && self.signal.is_none()
    }
}

/// A checkpoint a job reported; the next attempt resumes from the last one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The attempt that wrote it.
    pub attempt: AttemptNumber,
    /// The training step (monotonic within the job).
    pub step: u64,
    /// Where it is (`CORRAL_RESUME_FROM`).
    pub path: String,
    /// When it was committed.
    pub at: Timestamp,
}

/// Why an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndCause {
    /// The batch script exited.
    Exited(ExitStatus),
    /// Cancelled.
    Cancelled {
        /// Who cancelled it.
        by: String,
    },
    /// Reached its time limit.
    TimeLimit,
    /// A node of the allocation was declared down or lost the attempt's processes.
    NodeFailure {
        /// The node.
        node: String,
        /// What happened.
        reason: String,
    },
    /// A GPU of the allocation failed.
    GpuFailure {
        /// The node.
        node: String,
        /// The GPU's index.
        gpu: u32,
        /// The XID error, if one was reported.
        xid: Option<u32>,
    },
    /// Preempted for a higher-priority job: its grace period ran out, or its
    /// batch script ended (however: on the notice, with an error, by a
    /// signal) while the grace period ran.
    Preempted {
        /// The job it made room for.
        for_job: JobId,
    },
    /// Requeued on request (`scontrol requeue`).
    RequeueRequested {
        /// Who asked.
        by: String,
    },
    /// An application error on a GPU of the allocation (an XID such as 13, 31 or
    /// 43): the agent killed the attempt; the GPU stays in service.
    ApplicationXid {
        /// The node.
        node: String,
        /// The GPU's index.
        gpu: u32,
        /// The XID.
        xid: u32,
    },
}

/// An attempt that is ending: waiting for its nodes to confirm cleanup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ending {
    /// Why.
    pub cause: EndCause,
    /// When the end was decided; accounting stops here.
    pub at: Timestamp,
    /// Nodes that have not yet confirmed that the attempt's processes are gone.
    pub unreleased: BTreeSet<String>,
}

/// What one attempt holds on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAllocation {
    /// The node.
    pub node: String,
    /// GPU indices on that node.
    pub gpus: Vec<u32>,
    /// CPUs.
    pub cpus: u32,
    /// Memory, MiB.
    pub memory_mb: u64,
}

/// A preemption in progress: the victim was signalled and must end by `deadline`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreemptNotice {
    /// The signal sent.
    pub signal: Signal,
    /// When the grace period ends.
    pub deadline: Timestamp,
    /// The job that needs the resources.
    pub for_job: JobId,
}

/// One run of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// 1 for the first run.
    pub number: AttemptNumber,
    /// Nodes and GPUs, batch host first.
    pub allocation: Vec<NodeAllocation>,
    /// When the plan that started it committed.
    pub started_at: Timestamp,
    /// Nodes whose agents reported the attempt started.
    pub started_on: BTreeSet<String>,
    /// The last checkpoint this attempt committed.
    pub checkpoint: Option<Checkpoint>,
    /// Usage was charged up to here.
    pub charged_until: Timestamp,
    /// GPU-milliseconds charged so far.
    pub gpu_ms: u64,
    /// Set while a preemption's grace period runs.
    pub preemption: Option<PreemptNotice>,
    /// Set once the attempt is ending.
    pub ending: Option<Ending>,
    /// The batch script's exit status, once reported.
    pub batch_exit: Option<ExitStatus>,
    /// Set once every node confirmed cleanup.
    pub end: Option<AttemptEnd>,
}

/// How an attempt finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptEnd {
    /// When the end was decided.
    pub at: Timestamp,
    /// The attempt's final state: a terminal state, or `Requeued`.
    pub state: JobState,
    /// Why.
    pub cause: EndCause,
}

impl Attempt {
    /// GPUs across the allocation.
    pub fn gpu_count(&self) -> u64 {
        self.allocation.iter().map(|a| a.gpus.len() as u64).sum()
    }

    /// The node that runs the batch script.
    pub fn batch_host(&self) -> Option<&str> {
        self.allocation.first().map(|a| a.node.as_str())
    }

    /// True until every node confirmed cleanup.
    pub fn is_live(&self) -> bool {
        self.end.is_none()
    }
}

/// An array task's place in its array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayTask {
    /// The array's job id (its first task's id).
    pub array_job_id: JobId,
    /// This task's index.
    pub task_id: u32,
}

/// Who holds a pending job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hold {
    /// The owner.
    User,
    /// An operator; the owner cannot release it.
    Admin,
}

/// A job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Id.
    pub id: JobId,
    /// What was asked.
    pub spec: JobSpec,
    /// Where the batch script is stored (the array's id for array tasks).
    pub script_id: JobId,
    /// Set for array tasks.
    pub array: Option<ArrayTask>,
    /// The account charged.
    pub account: String,
    /// The partition.
    pub partition: String,
    /// The QOS, if any.
    pub qos: Option<String>,
    /// The time limit in force.
    pub time_limit: TimeLimit,
    /// What each attempt is allocated.
    pub resources: ResourceRequest,
    /// Current state.
    pub state: JobState,
    /// Why it is pending (`None` otherwise).
    pub reason: PendingReason,
    /// A hold, if any.
    pub hold: Option<Hold>,
    /// When it was submitted.
    pub submitted_at: Timestamp,
    /// When it last became eligible (submission, release or requeue): age counts from here.
    pub eligible_since: Timestamp,
    /// Runs so far, oldest first.
    pub attempts: Vec<Attempt>,
    /// Times requeued (`SLURM_RESTART_COUNT`).
    pub requeue_count: u32,
    /// The last checkpoint of any attempt (`CORRAL_RESUME_FROM`).
    pub last_checkpoint: Option<Checkpoint>,
    /// When it reached a terminal state.
    pub ended_at: Option<Timestamp>,
    /// Its `srun` steps, oldest first, at most [`MAX_STEP_RECORDS`] (sacct's
    /// `N.0`, `N.1`, ... rows).
    #[serde(default)]
    pub steps: Vec<StepRecord>,
}

/// How many `srun` steps of each attempt a job's record keeps; later ones
/// run, unrecorded.
pub const MAX_STEP_RECORDS: usize = 512;

/// One `srun` step, as the agent that coordinated it reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRecord {
    /// The attempt it ran in.
    pub attempt: AttemptNumber,
    /// Its number within the attempt (`SLURM_STEP_ID`).
    pub step: u32,
    /// The node whose agent coordinated it (and numbered it).
    pub node: String,
    /// The program it ran (sacct's JobName of a step).
    pub name: String,
    /// Its nodes, as a compressed hostlist (`gpu[01-64]`).
    pub nodes: String,
    /// How many.
    pub node_count: u32,
    /// Its tasks.
    pub ntasks: u32,
    /// The CPUs its tasks hold.
    pub cpus: u32,
    /// When it started (leader time of the report).
    pub started_at: Timestamp,
    /// When it ended, once reported.
    pub ended_at: Option<Timestamp>,
    /// Its worst task's status, once ended.
    pub exit: Option<ExitStatus>,
}

impl Job {
    /// When the job became (or becomes) eligible to start, as Slurm's
    /// `EligibleTime`: its begin time when that is later than when it last
    /// became eligible otherwise.
    pub fn eligible_time(&self) -> Timestamp {
        self.spec
            .begin_time
            .map_or(self.eligible_since, |begin| begin.max(self.eligible_since))
    }

    /// The newest attempt, if any.
    pub fn current_attempt(&self) -> Option<&Attempt> {
        self.attempts.last()
    }

    /// The number the next attempt will get.
    pub fn next_attempt_number(&self) -> AttemptNumber {
        self.attempts
            .last()
            .map_or(1, |a| a.number.saturating_add(1))
    }

    /// The attempt holding resources, when the job is running or completing.
    pub fn live_attempt(&self) -> Option<&Attempt> {
        self.attempts.last().filter(|a| a.is_live())
    }
}
