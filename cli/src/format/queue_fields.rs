//! squeue's fields: each one's `-o` letter, `-O` name, header and value, as
//! Slurm 22.05 prints them (`(null)`, `N/A`, `NONE` where Slurm does), for a
//! job or for pending array tasks folded into one row (`12_[1-3]`). Values
//! corral does not keep (licenses, wckey, core specialisation) print as Slurm
//! prints them unset.

use std::collections::BTreeMap;

use corral_state::Timestamp;
use corral_state::job::{Job, JobState, PendingReason};
use corral_state::slurm::duration::TimeLimit;
use corral_state::slurm::hostlist;
use corral_state::slurm::memory::format_memory_mb;

use super::datetime::format_timestamp;
use super::elapsed::{job_elapsed_secs, squeue_time};
use super::job_fields::{attempt_nodes, dependency_text, end_time, job_id_text, output_path};
use super::reason::reason_name;

/// A squeue field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum QueueField {
    Account,
    ArrayJobId,
    ArrayTaskId,
    BatchHost,
    Command,
    Comment,
    Contiguous,
    CoreSpec,
    CoresPerSocket,
    Cpus,
    Dependency,
    EligibleTime,
    EndTime,
    ExcludedNodes,
    ExitCode,
    Features,
    GroupId,
    GroupName,
    JobId,
    JobIdRaw,
    Licenses,
    MinCpus,
    MinMemory,
    MinTmpDisk,
    Name,
    Nice,
    NodeList,
    Nodes,
    NumTasks,
    OverSubscribe,
    Partition,
    PendingTime,
    Priority,
    PriorityLong,
    Qos,
    Reason,
    ReasonList,
    RequiredNodes,
    Requeue,
    Reservation,
    RestartCount,
    SchedNodes,
    Sct,
    SocketsPerNode,
    StartTime,
    State,
    StateCompact,
    Stderr,
    Stdin,
    Stdout,
    SubmitTime,
    ThreadsPerCore,
    TimeLeft,
    TimeLimit,
    TimeUsed,
    TresPerNode,
    UserId,
    UserName,
    Wckey,
    WorkDir,
}

use QueueField as F;

/// `-o` letters.
const LETTERS: &[(char, QueueField)] = &[
    ('a', F::Account),
    ('A', F::JobIdRaw),
    ('b', F::TresPerNode),
    ('B', F::BatchHost),
    ('c', F::MinCpus),
    ('C', F::Cpus),
    ('d', F::MinTmpDisk),
    ('D', F::Nodes),
    ('e', F::EndTime),
    ('E', F::Dependency),
    ('f', F::Features),
    ('F', F::ArrayJobId),
    ('g', F::GroupName),
    ('G', F::GroupId),
    ('h', F::OverSubscribe),
    ('H', F::SocketsPerNode),
    ('i', F::JobId),
    ('I', F::CoresPerSocket),
    ('j', F::Name),
    ('J', F::ThreadsPerCore),
    ('k', F::Comment),
    ('K', F::ArrayTaskId),
    ('l', F::TimeLimit),
    ('L', F::TimeLeft),
    ('m', F::MinMemory),
    ('M', F::TimeUsed),
    ('n', F::RequiredNodes),
    ('N', F::NodeList),
    ('o', F::Command),
    ('O', F::Contiguous),
    ('p', F::Priority),
    ('P', F::Partition),
    ('q', F::Qos),
    ('Q', F::PriorityLong),
    ('r', F::Reason),
    ('R', F::ReasonList),
    ('S', F::StartTime),
    ('t', F::StateCompact),
    ('T', F::State),
    ('u', F::UserName),
    ('U', F::UserId),
    ('v', F::Reservation),
    ('V', F::SubmitTime),
    ('w', F::Wckey),
    ('W', F::Licenses),
    ('x', F::ExcludedNodes),
    ('X', F::CoreSpec),
    ('y', F::Nice),
    ('Y', F::SchedNodes),
    ('z', F::Sct),
    ('Z', F::WorkDir),
];

/// `-O` names (lower case).
const NAMES: &[(&str, QueueField)] = &[
    ("account", F::Account),
    ("arrayjobid", F::ArrayJobId),
    ("arraytaskid", F::ArrayTaskId),
    ("batchhost", F::BatchHost),
    ("command", F::Command),
    ("comment", F::Comment),
    ("contiguous", F::Contiguous),
    ("cores", F::CoresPerSocket),
    ("corespec", F::CoreSpec),
    ("dependency", F::Dependency),
    ("eligibletime", F::EligibleTime),
    ("endtime", F::EndTime),
    ("exit_code", F::ExitCode),
    ("feature", F::Features),
    ("groupid", F::GroupId),
    ("groupname", F::GroupName),
    ("jobarrayid", F::JobId),
    ("jobid", F::JobIdRaw),
    ("licenses", F::Licenses),
    ("mincpus", F::MinCpus),
    ("minmemory", F::MinMemory),
    ("mintmpdisk", F::MinTmpDisk),
    ("name", F::Name),
    ("nice", F::Nice),
    ("nodelist", F::NodeList),
    ("numcpus", F::Cpus),
    ("numnodes", F::Nodes),
    ("numtasks", F::NumTasks),
    ("oversubscribe", F::OverSubscribe),
    ("partition", F::Partition),
    ("pendingtime", F::PendingTime),
    ("priority", F::Priority),
    ("prioritylong", F::PriorityLong),
    ("qos", F::Qos),
    ("reason", F::Reason),
    ("reasonlist", F::ReasonList),
    ("reqnodes", F::RequiredNodes),
    ("requeue", F::Requeue),
    ("reservation", F::Reservation),
    ("restartcnt", F::RestartCount),
    ("schednodes", F::SchedNodes),
    ("sct", F::Sct),
    ("sockets", F::SocketsPerNode),
    ("starttime", F::StartTime),
    ("state", F::State),
    ("statecompact", F::StateCompact),
    ("stderr", F::Stderr),
    ("stdin", F::Stdin),
    ("stdout", F::Stdout),
    ("submittime", F::SubmitTime),
    ("threads", F::ThreadsPerCore),
    ("timeleft", F::TimeLeft),
    ("timelimit", F::TimeLimit),
    ("timeused", F::TimeUsed),
    ("tres-per-node", F::TresPerNode),
    ("userid", F::UserId),
    ("username", F::UserName),
    ("wckey", F::Wckey),
    ("workdir", F::WorkDir),
];

impl QueueField {
    /// The field of an `-o` letter.
    pub fn from_letter(letter: char) -> Option<QueueField> {
        LETTERS.iter().find(|(l, _)| *l == letter).map(|(_, f)| *f)
    }

    /// The field of a lower-case `-O` name.
    pub fn from_name(name: &str) -> Option<QueueField> {
        NAMES.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
    }

    /// The column header squeue prints.
    pub fn header(self) -> &'static str {
        match self {
            F::Account => "ACCOUNT",
            F::ArrayJobId => "ARRAY_JOB_ID",
            F::ArrayTaskId => "ARRAY_TASK_ID",
            F::BatchHost => "EXEC_HOST",
            F::Command => "COMMAND",
            F::Comment => "COMMENT",
            F::Contiguous => "CONTIGUOUS",
            F::CoreSpec => "CORE_SPEC",
            F::CoresPerSocket => "CORES_PER_SOCKET",
            F::Cpus => "CPUS",
            F::Dependency => "DEPENDENCY",
            F::EligibleTime => "ELIGIBLE_TIME",
            F::EndTime => "END_TIME",
            F::ExcludedNodes => "EXC_NODES",
            F::ExitCode => "EXIT_CODE",
            F::Features => "FEATURES",
            F::GroupId | F::GroupName => "GROUP",
            F::JobId | F::JobIdRaw => "JOBID",
            F::Licenses => "LICENSES",
            F::MinCpus => "MIN_CPUS",
            F::MinMemory => "MIN_MEMORY",
            F::MinTmpDisk => "MIN_TMP_DISK",
            F::Name => "NAME",
            F::Nice => "NICE",
            F::NodeList => "NODELIST",
            F::Nodes => "NODES",
            F::NumTasks => "NUM_TASKS",
            F::OverSubscribe => "OVER_SUBSCRIBE",
            F::Partition => "PARTITION",
            F::PendingTime => "PENDING_TIME",
            F::Priority | F::PriorityLong => "PRIORITY",
            F::Qos => "QOS",
            F::Reason => "REASON",
            F::ReasonList => "NODELIST(REASON)",
            F::RequiredNodes => "REQ_NODES",
            F::Requeue => "REQUEUE",
            F::Reservation => "RESERVATION",
            F::RestartCount => "RESTART_COUNT",
            F::SchedNodes => "SCHEDNODES",
            F::Sct => "S:C:T",
            F::SocketsPerNode => "SOCKETS_PER_NODE",
            F::StartTime => "START_TIME",
            F::State => "STATE",
            F::StateCompact => "ST",
            F::Stderr => "STDERR",
            F::Stdin => "STDIN",
            F::Stdout => "STDOUT",
            F::SubmitTime => "SUBMIT_TIME",
            F::ThreadsPerCore => "THREADS_PER_CORE",
            F::TimeLeft => "TIME_LEFT",
            F::TimeLimit => "TIME_LIMIT",
            F::TimeUsed => "TIME",
            F::TresPerNode => "TRES_PER_NODE",
            F::UserId => "UID",
            F::UserName => "USER",
            F::Wckey => "WCKEY",
            F::WorkDir => "WORK_DIR",
        }
    }
}

/// When and where the scheduler expects a pending job to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartEstimate {
    /// The expected start.
    pub start: Timestamp,
    /// The nodes it would start on.
    pub nodes: Vec<String>,
}

/// One row of the queue: a job, or pending tasks of one array folded together.
#[derive(Debug, Clone)]
pub struct QueueRow<'a> {
    /// The job (the first of the folded tasks).
    pub job: &'a Job,
    /// Its multifactor priority.
    pub priority: i64,
    /// Its expected start, if the scheduler knows one.
    pub estimate: Option<&'a StartEstimate>,
    /// The task ids folded into this row (empty: the job alone).
    pub folded_tasks: Vec<u32>,
}

/// What a row's values need besides the row.
#[derive(Debug, Clone, Default)]
pub struct QueueContext {
    /// The state's clock the jobs were read at.
    pub now: Timestamp,
    /// Group names by gid (from the group database where the CLI runs).
    pub group_names: BTreeMap<u32, String>,
}

const NULL: &str = "(null)";

fn or_null(value: Option<&str>) -> String {
    match value {
        Some(v) if !v.is_empty() => v.to_string(),
        _ => NULL.to_string(),
    }
}

fn waiting(job: &Job) -> bool {
    matches!(job.state, JobState::Pending | JobState::RequeueHold)
}

/// The value of `field` for `row`, as squeue prints it.
pub fn value(field: QueueField, row: &QueueRow<'_>, ctx: &QueueContext) -> String {
    let job = row.job;
    let spec = &job.spec;
    let attempt = job.current_attempt().filter(|_| !waiting(job));
    match field {
        F::Account => job.account.clone(),
        F::ArrayJobId => job.array.map_or(job.id.0, |a| a.array_job_id.0).to_string(),
        F::ArrayTaskId => match (&job.array, row.folded_tasks.is_empty()) {
            (None, _) => "N/A".into(),
            (Some(task), true) => task.task_id.to_string(),
            (Some(_), false) => task_ranges(&row.folded_tasks, throttle(job)),
        },
        F::BatchHost => attempt
            .and_then(|a| a.batch_host())
            .unwrap_or("n/a")
            .to_string(),
        F::Command => NULL.into(),
        F::Comment => or_null(spec.comment.as_deref()),
        F::Contiguous => "0".into(),
        F::CoreSpec => "N/A".into(),
        F::CoresPerSocket | F::SocketsPerNode | F::ThreadsPerCore => "*".into(),
        F::Cpus => match attempt {
            Some(a) => a
                .allocation
                .iter()
                .map(|n| u64::from(n.cpus))
                .sum::<u64>()
                .to_string(),
            None => (u64::from(job.resources.nodes) * u64::from(job.resources.cpus_per_node))
                .to_string(),
        },
        F::Dependency => match &spec.dependency {
            None => NULL.into(),
            Some(dependency) => {
                let status = match job.reason {
                    corral_state::job::PendingReason::DependencyNeverSatisfied => "(failed)",
                    _ if waiting(job) => "(unfulfilled)",
                    _ => "",
                };
                format!("{}{status}", dependency_text(dependency))
            }
        },
        F::EligibleTime => format_timestamp(job.eligible_time()),
        F::EndTime => {
            if waiting(job) {
                "N/A".into()
            } else {
                end_time(job, attempt).map_or_else(|| "NONE".into(), format_timestamp)
            }
        }
        F::ExcludedNodes => node_names(&spec.excluded_nodes),
        F::ExitCode => attempt
            .and_then(|a| a.batch_exit.as_ref())
            .map_or(0, |e| e.code)
            .to_string(),
        F::Features => {
            if spec.features.is_empty() {
                NULL.into()
            } else {
                spec.features.join("&")
            }
        }
        F::GroupId => spec.gid.to_string(),
        F::GroupName => ctx
            .group_names
            .get(&spec.gid)
            .cloned()
            .unwrap_or_else(|| spec.gid.to_string()),
        F::JobId => {
            if row.folded_tasks.is_empty() {
                job_id_text(job)
            } else {
                format!(
                    "{}_[{}]",
                    array_id(job),
                    task_ranges(&row.folded_tasks, throttle(job))
                )
            }
        }
        F::JobIdRaw => {
            if row.folded_tasks.is_empty() {
                job.id.to_string()
            } else {
                array_id(job).to_string()
            }
        }
        F::Licenses | F::Wckey => NULL.into(),
        F::MinCpus => job.resources.cpus_per_node.to_string(),
        F::MinMemory => {
            if job.resources.whole_node_memory {
                "0".into()
            } else {
                format_memory_mb(job.resources.memory_per_node_mb)
            }
        }
        F::MinTmpDisk => "0".into(),
        F::Name => spec.name.clone(),
        F::Nice => spec.nice.to_string(),
        F::NodeList => attempt.map(attempt_nodes).unwrap_or_default(),
        F::Nodes => attempt
            .map_or(job.resources.nodes as usize, |a| a.allocation.len())
            .to_string(),
        F::NumTasks => job.resources.ntasks.to_string(),
        F::OverSubscribe => if job.resources.exclusive { "NO" } else { "OK" }.into(),
        F::Partition => job.partition.clone(),
        F::PendingTime => {
            let until = attempt.map_or(ctx.now, |a| a.started_at);
            until.secs_since(job.eligible_time()).to_string()
        }
        F::Priority => format!("{:.14}", row.priority.max(0) as f64 / f64::from(u32::MAX)),
        F::PriorityLong => row.priority.max(0).to_string(),
        F::Qos => or_null(job.qos.as_deref()),
        F::Reason => {
            if waiting(job) {
                reason_name(job.reason).to_string()
            } else {
                "None".into()
            }
        }
        F::ReasonList => match attempt {
            Some(a) => attempt_nodes(a),
            None if waiting(job) => format!("({})", reason_name(job.reason)),
            None => String::new(),
        },
        F::RequiredNodes => node_names(&spec.required_nodes),
        F::Requeue => u8::from(spec.requeue).to_string(),
        F::Reservation => or_null(spec.reservation.as_deref()),
        F::RestartCount => job.requeue_count.to_string(),
        F::SchedNodes => match row.estimate {
            Some(e) if !e.nodes.is_empty() => {
                let names: Vec<&str> = e.nodes.iter().map(String::as_str).collect();
                hostlist::compress(&names)
            }
            _ => NULL.into(),
        },
        F::Sct => "*:*:*".into(),
        F::StartTime => match (attempt, row.estimate) {
            (Some(a), _) => format_timestamp(a.started_at),
            // Waiting for its --begin time: expected then at the earliest.
            (None, _) if job.reason == PendingReason::BeginTime && spec.begin_time.is_some() => {
                format_timestamp(job.eligible_time())
            }
            (None, Some(e)) if waiting(job) => format_timestamp(e.start),
            _ => "N/A".into(),
        },
        F::State => job.state.slurm_name().to_string(),
        F::StateCompact => job.state.slurm_code().to_string(),
        F::Stderr => output_path(
            job,
            attempt,
            spec.stderr.as_deref().or(spec.stdout.as_deref()),
        ),
        F::Stdin => spec.stdin.clone().unwrap_or_else(|| "/dev/null".into()),
        F::Stdout => output_path(job, attempt, spec.stdout.as_deref()),
        F::SubmitTime => format_timestamp(job.submitted_at),
        F::TimeLeft => match job.time_limit {
            TimeLimit::Unlimited => "UNLIMITED".into(),
            TimeLimit::Seconds(limit) => {
                squeue_time(limit.saturating_sub(job_elapsed_secs(job, ctx.now)))
            }
        },
        F::TimeLimit => match job.time_limit {
            TimeLimit::Unlimited => "UNLIMITED".into(),
            TimeLimit::Seconds(limit) => squeue_time(limit),
        },
        F::TimeUsed => squeue_time(job_elapsed_secs(job, ctx.now)),
        F::TresPerNode => match &spec.gpus_per_node {
            Some(gpus) => match &gpus.gpu_type {
                Some(t) => format!("gres:gpu:{t}:{}", gpus.count),
                None => format!("gres:gpu:{}", gpus.count),
            },
            None => "N/A".into(),
        },
        F::UserId => spec.uid.to_string(),
        F::UserName => spec.user.clone(),
        F::WorkDir => spec.workdir.clone(),
    }
}

fn node_names(names: &[String]) -> String {
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    hostlist::compress(&names)
}

fn array_id(job: &Job) -> u64 {
    job.array.map_or(job.id.0, |a| a.array_job_id.0)
}

fn throttle(job: &Job) -> Option<u32> {
    job.spec.array.as_ref().and_then(|a| a.throttle)
}

/// `1-3,5,7-9` (and `%N` for a throttled array), as squeue folds pending tasks.
pub fn task_ranges(tasks: &[u32], throttle: Option<u32>) -> String {
    let mut sorted = tasks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let first = sorted[i];
        let mut last = first;
        while i + 1 < sorted.len() && sorted[i + 1] == last + 1 {
            i += 1;
            last = sorted[i];
        }
        parts.push(if first == last {
            first.to_string()
        } else {
            format!("{first}-{last}")
        });
        i += 1;
    }
    let mut text = parts.join(",");
    if let Some(n) = throttle {
        text.push_str(&format!("%{n}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_letter_and_name_has_one_field() {
        for (letter, field) in LETTERS {
            assert_eq!(QueueField::from_letter(*letter), Some(*field));
        }
        for (name, field) in NAMES {
            assert_eq!(QueueField::from_name(name), Some(*field));
            assert_eq!(*name, name.to_ascii_lowercase());
        }
        assert_eq!(QueueField::from_letter('!'), None);
    }

    #[test]
    fn task_ranges_fold_runs() {
        assert_eq!(task_ranges(&[1, 2, 3], None), "1-3");
        assert_eq!(task_ranges(&[7, 1, 3, 2, 9, 8], Some(2)), "1-3,7-9%2");
        assert_eq!(task_ranges(&[4], None), "4");
    }
}
