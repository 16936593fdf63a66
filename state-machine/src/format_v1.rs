//! The shapes stored format 1 wrote, frozen: a snapshot of format 1 and a log
//! entry holding format 1's `Submit` decode into these, and are converted to
//! today's types with the fields format 1 did not have at their defaults.
//!
//! Never change a type here: format-1 data on disk and in other replicas' logs
//! is exactly these bytes (`tests/stored_formats.rs` reads fixtures written by
//! the format-1 build). Types that format 2 did not change are today's; a
//! format-1 `JobSpec` becomes today's directly, with every later field at its
//! default.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::accounting::Accounting;
use crate::config::ClusterConfig;
use crate::format_v2::{AccountV2, UserV2};
use crate::ids::JobId;
use crate::job::{
    ArrayTask, Attempt, BatchScript, Checkpoint, Hold, Job, JobSpec, JobState, MemoryRequest,
    PendingReason, ResourceRequest,
};
use crate::job_table::JobTable;
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

/// Format 1's [`JobSpec`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpecV1 {
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
}

impl From<JobSpecV1> for JobSpec {
    fn from(v1: JobSpecV1) -> JobSpec {
        let JobSpecV1 {
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
        } = v1;
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

/// Format 1's [`Job`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct JobV1 {
    id: JobId,
    spec: JobSpecV1,
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
}

impl From<JobV1> for Job {
    fn from(v1: JobV1) -> Job {
        let JobV1 {
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
        } = v1;
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
            steps: Vec::new(),
        }
    }
}

/// Format 1's [`ClusterState`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ClusterStateV1 {
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
    jobs: BTreeMap<JobId, JobV1>,
    scripts: BTreeMap<JobId, Arc<BatchScript>>,
    queued: BTreeSet<JobId>,
    active: BTreeSet<JobId>,
    accounting: Accounting,
    submit_keys: SubmitKeys,
}

impl From<ClusterStateV1> for ClusterState {
    fn from(v1: ClusterStateV1) -> ClusterState {
        let ClusterStateV1 {
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
        } = v1;
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
