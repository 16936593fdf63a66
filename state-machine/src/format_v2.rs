//! The shapes stored format 2 wrote, frozen: a snapshot of format 2 and a log
//! entry holding format 2's `Submit` decode into these, and are converted to
//! today's types with the fields format 2 did not have at their defaults.
//!
//! Never change a type here: format-2 data on disk and in other replicas' logs
//! is exactly these bytes (`tests/stored_formats.rs` reads fixtures written by
//! the format-2 build). Types that format 3 did not change are today's.
//! Format 3 added `--begin` and `--mincpus` to jobs, `StartTime=` to `scontrol
//! update`, and association limits to accounts and users.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::account::{Account, User};
use crate::accounting::Accounting;
use crate::config::ClusterConfig;
use crate::ids::JobId;
use crate::ids::Role;
use crate::job::{
    ArrayTask, Attempt, BatchScript, Checkpoint, Hold, Job, JobSpec, JobState, MemoryRequest,
    PendingReason, ResourceRequest, StepRecord,
};
use crate::job_table::JobTable;
use crate::job_update::JobUpdate;
use crate::node::Node;
use crate::partition::Partition;
use crate::qos::Qos;
use crate::reservation::Reservation;
use crate::slurm::array::ArraySpec;
use crate::slurm::dependency::DependencySpec;
use crate::slurm::duration::TimeLimit;
use crate::slurm::gres::GpuRequest;
use crate::slurm::mail::MailTypes;
use crate::slurm::sbatch::SwitchesSpec;
use crate::slurm::signal::SignalSpec;
use crate::state::ClusterState;
use crate::submit_keys::SubmitKeys;
use crate::time::Timestamp;
use crate::topology::Topology;

/// Format 2's [`JobSpec`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpecV2 {
    name: String,
    user: String,
    uid: u32,
    gid: u32,
    submit_host: String,
    account: Option<String>,
    partition: Option<String>,
    qos: Option<String>,
    nodes: u32,
    ntasks: Option<u32>,
    ntasks_per_node: Option<u32>,
    cpus_per_task: u32,
    cpus_per_gpu: Option<u32>,
    gpus_per_node: Option<GpuRequest>,
    gpus_total: Option<GpuRequest>,
    gpus_per_task: Option<GpuRequest>,
    memory: MemoryRequest,
    time_limit: Option<TimeLimit>,
    array: Option<ArraySpec>,
    dependency: Option<DependencySpec>,
    requeue: bool,
    signal: Option<SignalSpec>,
    exclusive: bool,
    workdir: String,
    submit_dir: String,
    stdout: Option<String>,
    stderr: Option<String>,
    stdin: Option<String>,
    nice: i32,
    hold: bool,
    switches: Option<SwitchesSpec>,
    features: Vec<String>,
    reservation: Option<String>,
    required_nodes: Vec<String>,
    excluded_nodes: Vec<String>,
    comment: Option<String>,
    #[serde(default)]
    time_min: Option<TimeLimit>,
    #[serde(default)]
    mail_type: MailTypes,
    #[serde(default)]
    mail_user: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    cpus_per_task_given: bool,
}

impl From<JobSpecV2> for JobSpec {
    fn from(v2: JobSpecV2) -> JobSpec {
        let JobSpecV2 {
            name,
            user,
            uid,
            gid,
            submit_host,
            account,
            partition,
            qos,
            nodes,
            ntasks,
            ntasks_per_node,
            cpus_per_task,
            cpus_per_gpu,
            gpus_per_node,
            gpus_total,
            gpus_per_task,
            memory,
            time_limit,
            array,
            dependency,
            requeue,
            signal,
            exclusive,
            workdir,
            submit_dir,
            stdout,
            stderr,
            stdin,
            nice,
            hold,
            switches,
            features,
            reservation,
            required_nodes,
            excluded_nodes,
            comment,
            time_min,
            mail_type,
            mail_user,
            command,
            cpus_per_task_given,
        } = v2;
        JobSpec {
            name,
            user,
            uid,
            gid,
            submit_host,
            account,
            partition,
            qos,
            nodes,
            ntasks,
            ntasks_per_node,
            cpus_per_task,
            cpus_per_gpu,
            gpus_per_node,
            gpus_total,
            gpus_per_task,
            memory,
            time_limit,
            array,
            dependency,
            requeue,
            signal,
            exclusive,
            workdir,
            submit_dir,
            stdout,
            stderr,
            stdin,
            nice,
            hold,
            switches,
            features,
            reservation,
            required_nodes,
            excluded_nodes,
            comment,
            time_min,
            mail_type,
            mail_user,
            command,
            cpus_per_task_given,
            begin_time: None,
            min_cpus_per_node: None,
        }
    }
}

/// Format 2's [`Job`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct JobV2 {
    id: JobId,
    spec: JobSpecV2,
    script_id: JobId,
    array: Option<ArrayTask>,
    account: String,
    partition: String,
    qos: Option<String>,
    time_limit: TimeLimit,
    resources: ResourceRequest,
    state: JobState,
    reason: PendingReason,
    hold: Option<Hold>,
    submitted_at: Timestamp,
    eligible_since: Timestamp,
    attempts: Vec<Attempt>,
    requeue_count: u32,
    last_checkpoint: Option<Checkpoint>,
    ended_at: Option<Timestamp>,
    #[serde(default)]
    steps: Vec<StepRecord>,
}

impl From<JobV2> for Job {
    fn from(v2: JobV2) -> Job {
        let JobV2 {
            id,
            spec,
            script_id,
            array,
            account,
            partition,
            qos,
            time_limit,
            resources,
            state,
            reason,
            hold,
            submitted_at,
            eligible_since,
            attempts,
            requeue_count,
            last_checkpoint,
            ended_at,
            steps,
        } = v2;
        Job {
            id,
            spec: spec.into(),
            script_id,
            array,
            account,
            partition,
            qos,
            time_limit,
            resources,
            state,
            reason,
            hold,
            submitted_at,
            eligible_since,
            attempts,
            requeue_count,
            last_checkpoint,
            ended_at,
            steps,
        }
    }
}

/// Format 2's [`Account`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountV2 {
    name: String,
    parent: Option<String>,
    shares: u32,
    default_qos: Option<String>,
    description: String,
}

impl From<AccountV2> for Account {
    fn from(v2: AccountV2) -> Account {
        let AccountV2 {
            name,
            parent,
            shares,
            default_qos,
            description,
        } = v2;
        Account {
            name,
            parent,
            shares,
            default_qos,
            description,
            limits: Default::default(),
        }
    }
}

/// Format 2's [`User`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserV2 {
    name: String,
    default_account: String,
    accounts: BTreeSet<String>,
    role: Role,
}

impl From<UserV2> for User {
    fn from(v2: UserV2) -> User {
        let UserV2 {
            name,
            default_account,
            accounts,
            role,
        } = v2;
        User {
            name,
            default_account,
            accounts,
            role,
            limits: Default::default(),
        }
    }
}

/// Format 2's [`JobUpdate`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobUpdateV2 {
    name: Option<String>,
    comment: Option<String>,
    time_limit: Option<TimeLimit>,
    partition: Option<String>,
    account: Option<String>,
    qos: Option<String>,
    nice: Option<i32>,
    dependency: Option<Option<DependencySpec>>,
    nodes: Option<u32>,
    features: Option<Vec<String>>,
    excluded_nodes: Option<Vec<String>>,
}

impl From<JobUpdateV2> for JobUpdate {
    fn from(v2: JobUpdateV2) -> JobUpdate {
        let JobUpdateV2 {
            name,
            comment,
            time_limit,
            partition,
            account,
            qos,
            nice,
            dependency,
            nodes,
            features,
            excluded_nodes,
        } = v2;
        JobUpdate {
            name,
            comment,
            time_limit,
            partition,
            account,
            qos,
            nice,
            dependency,
            nodes,
            features,
            excluded_nodes,
            begin_time: None,
        }
    }
}

/// Format 2's [`ClusterState`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ClusterStateV2 {
    config: ClusterConfig,
    clock: Timestamp,
    next_job_id: u64,
    nodes: BTreeMap<String, Node>,
    partitions: BTreeMap<String, Partition>,
    accounts: BTreeMap<String, AccountV2>,
    users: BTreeMap<String, UserV2>,
    qos: BTreeMap<String, Qos>,
    topology: Topology,
    reservations: BTreeMap<String, Reservation>,
    jobs: BTreeMap<JobId, JobV2>,
    scripts: BTreeMap<JobId, Arc<BatchScript>>,
    queued: BTreeSet<JobId>,
    active: BTreeSet<JobId>,
    accounting: Accounting,
    submit_keys: SubmitKeys,
}

impl From<ClusterStateV2> for ClusterState {
    fn from(v2: ClusterStateV2) -> ClusterState {
        let ClusterStateV2 {
            config,
            clock,
            next_job_id,
            nodes,
            partitions,
            accounts,
            users,
            qos,
            topology,
            reservations,
            jobs,
            scripts,
            queued,
            active,
            accounting,
            submit_keys,
        } = v2;
        ClusterState {
            config,
            clock,
            next_job_id,
            nodes,
            partitions,
            accounts: accounts.into_iter().map(|(k, a)| (k, a.into())).collect(),
            users: users.into_iter().map(|(k, u)| (k, u.into())).collect(),
            qos,
            topology,
            reservations,
            jobs: JobTable::from_jobs(jobs.into_iter().map(|(id, job)| (id, job.into())).collect()),
            scripts,
            queued,
            active,
            accounting,
            submit_keys,
            unfinished_index: Default::default(),
            liveness: None,
        }
    }
}
