//! sacct's fields: each one's name and default width (negative: left-aligned)
//! in Slurm 22.05's order, so that a prefix picks the same field Slurm picks
//! (`--format=jobid,elap` is JobID and Elapsed; `c` is Cluster, which corral
//! refuses by name), and its value for a job row,
//! a batch-step row (`N.batch`) or one of corral's attempt rows (`N#A`).
//! corral's additions: `AllocGRES`/`ReqGRES` (removed from Slurm in 20.11 but
//! still in guides, printed in their old `gpu:N` form), `AllocGPUS`,
//! `Restarts` and `FailedNode`.

use std::collections::BTreeMap;

use corral_state::Timestamp;
use corral_state::job::{Attempt, EndCause, Job, JobState, StepRecord};
use corral_state::slurm::duration::TimeLimit;
use corral_state::slurm::memory::format_memory_mb;

use super::acct_step_fields::step_value;
use super::datetime::format_timestamp;
use super::elapsed::{attempt_elapsed_secs, job_elapsed_secs, sacct_time};
use super::job_fields::{
    attempt_cause, attempt_nodes, exit_code_text, failed_node, job_failed_node, job_id_text,
};
use super::reason::reason_name;

/// A sacct field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcctField {
    Account,
    AllocCpus,
    AllocGpus,
    AllocGres,
    AllocNodes,
    AllocTres,
    Comment,
    Constraints,
    CpuTime,
    CpuTimeRaw,
    DerivedExitCode,
    Elapsed,
    ElapsedRaw,
    Eligible,
    End,
    ExitCode,
    FailedNode,
    Gid,
    Group,
    JobId,
    JobIdRaw,
    JobName,
    NCpus,
    NNodes,
    NodeList,
    NTasks,
    Partition,
    Priority,
    Qos,
    Reason,
    ReqCpus,
    ReqGres,
    ReqMem,
    ReqNodes,
    ReqTres,
    Reservation,
    Restarts,
    Start,
    State,
    Submit,
    Timelimit,
    TimelimitRaw,
    Uid,
    User,
    WorkDir,
}

use AcctField as F;

/// Slurm 22.05's sacct fields in its own order, so that a prefix picks the
/// field Slurm picks, each with its default width and corral's field (`None`:
/// a field corral does not keep, refused by name).
const SLURM_FIELDS: &[(&str, i32, Option<AcctField>)] = &[
    ("Account", 10, Some(F::Account)),
    ("AdminComment", 15, None),
    ("AllocCPUS", 10, Some(F::AllocCpus)),
    ("AllocNodes", 10, Some(F::AllocNodes)),
    ("AllocTRES", 10, Some(F::AllocTres)),
    ("AssocID", 7, None),
    ("AveCPU", 10, None),
    ("AveCPUFreq", 10, None),
    ("AveDiskRead", 14, None),
    ("AveDiskWrite", 14, None),
    ("AvePages", 10, None),
    ("AveRSS", 10, None),
    ("AveVMSize", 10, None),
    ("BlockID", 16, None),
    ("Cluster", 10, None),
    ("Comment", 14, Some(F::Comment)),
    ("Constraints", 19, Some(F::Constraints)),
    ("ConsumedEnergy", 14, None),
    ("ConsumedEnergyRaw", 17, None),
    ("Container", 19, None),
    ("CPUTime", 10, Some(F::CpuTime)),
    ("CPUTimeRAW", 10, Some(F::CpuTimeRaw)),
    ("DBIndex", -10, None),
    ("DerivedExitCode", 15, Some(F::DerivedExitCode)),
    ("Elapsed", 10, Some(F::Elapsed)),
    ("ElapsedRaw", 10, Some(F::ElapsedRaw)),
    ("Eligible", 19, Some(F::Eligible)),
    ("End", 19, Some(F::End)),
    ("ExitCode", 8, Some(F::ExitCode)),
    ("Flags", 19, None),
    ("GID", 6, Some(F::Gid)),
    ("Group", 9, Some(F::Group)),
    ("JobID", -12, Some(F::JobId)),
    ("JobIDRaw", -12, Some(F::JobIdRaw)),
    ("JobName", 10, Some(F::JobName)),
    ("Layout", 9, None),
    ("MaxDiskRead", 12, None),
    ("MaxDiskReadNode", 15, None),
    ("MaxDiskReadTask", 15, None),
    ("MaxDiskWrite", 12, None),
    ("MaxDiskWriteNode", 16, None),
    ("MaxDiskWriteTask", 16, None),
    ("MaxPages", 8, None),
    ("MaxPagesNode", 12, None),
    ("MaxPagesTask", 14, None),
    ("MaxRSS", 10, None),
    ("MaxRSSNode", 10, None),
    ("MaxRSSTask", 10, None),
    ("MaxVMSize", 10, None),
    ("MaxVMSizeNode", 14, None),
    ("MaxVMSizeTask", 14, None),
    ("McsLabel", 12, None),
    ("MinCPU", 10, None),
    ("MinCPUNode", 10, None),
    ("MinCPUTask", 10, None),
    ("NCPUS", 10, Some(F::NCpus)),
    ("NNodes", 8, Some(F::NNodes)),
    ("NodeList", 15, Some(F::NodeList)),
    ("NTasks", 8, Some(F::NTasks)),
    ("Partition", 10, Some(F::Partition)),
    ("Priority", 10, Some(F::Priority)),
    ("QOS", 10, Some(F::Qos)),
    ("QOSRAW", 6, None),
    ("Reason", 22, Some(F::Reason)),
    ("ReqCPUFreq", 10, None),
    ("ReqCPUFreqGov", 13, None),
    ("ReqCPUFreqMax", 13, None),
    ("ReqCPUFreqMin", 13, None),
    ("ReqCPUS", 8, Some(F::ReqCpus)),
    ("ReqMem", 10, Some(F::ReqMem)),
    ("ReqNodes", 8, Some(F::ReqNodes)),
    ("ReqTRES", 10, Some(F::ReqTres)),
    ("Reservation", 20, Some(F::Reservation)),
    ("ReservationId", 8, None),
    ("Reserved", 10, None),
    ("ResvCPU", 10, None),
    ("ResvCPURAW", 10, None),
    ("Start", 19, Some(F::Start)),
    ("State", 10, Some(F::State)),
    ("Submit", 19, Some(F::Submit)),
    ("SubmitLine", 20, None),
    ("Suspended", 10, None),
    ("SystemComment", 15, None),
    ("SystemCPU", 10, None),
    ("Timelimit", 10, Some(F::Timelimit)),
    ("TimelimitRaw", 10, Some(F::TimelimitRaw)),
    ("TotalCPU", 10, None),
    ("TRESUsageInAve", 14, None),
    ("TRESUsageInMax", 14, None),
    ("TRESUsageInMaxNode", 18, None),
    ("TRESUsageInMaxTask", 18, None),
    ("TRESUsageInMin", 14, None),
    ("TRESUsageInMinNode", 18, None),
    ("TRESUsageInMinTask", 18, None),
    ("TRESUsageInTot", 14, None),
    ("TRESUsageOutAve", 15, None),
    ("TRESUsageOutMax", 15, None),
    ("TRESUsageOutMaxNode", 19, None),
    ("TRESUsageOutMaxTask", 19, None),
    ("TRESUsageOutMin", 15, None),
    ("TRESUsageOutMinNode", 19, None),
    ("TRESUsageOutMinTask", 19, None),
    ("TRESUsageOutTot", 15, None),
    ("UID", 6, Some(F::Uid)),
    ("User", 9, Some(F::User)),
    ("UserCPU", 10, None),
    ("WCKey", 10, None),
    ("WCKeyID", 10, None),
    ("WorkDir", 20, Some(F::WorkDir)),
];

/// corral's own fields, matched only when no Slurm field has the prefix.
const CORRAL_FIELDS: &[(&str, i32, AcctField)] = &[
    ("AllocGPUS", 9, F::AllocGpus),
    ("AllocGRES", 12, F::AllocGres),
    ("FailedNode", 10, F::FailedNode),
    ("ReqGRES", 12, F::ReqGres),
    ("Restarts", 8, F::Restarts),
];

/// The names `--helpformat` lists: the fields corral prints.
pub fn field_names() -> impl Iterator<Item = &'static str> {
    SLURM_FIELDS
        .iter()
        .filter(|(_, _, f)| f.is_some())
        .map(|(name, _, _)| *name)
        .chain(CORRAL_FIELDS.iter().map(|(name, _, _)| *name))
}

/// The field a name or prefix picks (case-insensitive), with its name and
/// default width: the first of Slurm's fields with that prefix, else the
/// first of corral's. `Err` says why it is refused, in sacct's words.
pub fn lookup(prefix: &str) -> Result<(&'static str, i32, AcctField), String> {
    let lower = prefix.to_ascii_lowercase();
    let starts = |name: &str| !lower.is_empty() && name.to_ascii_lowercase().starts_with(&lower);
    if let Some((name, width, field)) = SLURM_FIELDS.iter().find(|(name, _, _)| starts(name)) {
        return field.map(|f| (*name, *width, f)).ok_or_else(|| {
            format!("Invalid field requested: \"{prefix}\" (corral does not keep {name})")
        });
    }
    CORRAL_FIELDS
        .iter()
        .find(|(name, _, _)| starts(name))
        .copied()
        .ok_or_else(|| format!("Invalid field requested: \"{prefix}\""))
}

/// What one row of sacct describes.
#[derive(Debug, Clone, Copy)]
pub enum AcctRow<'a> {
    /// The job (its newest attempt).
    Job(&'a Job),
    /// The batch step of the job's newest attempt (`N.batch`).
    Batch(&'a Job, &'a Attempt),
    /// One attempt (corral's `N#A`, sacct's `--duplicates`).
    Attempt(&'a Job, &'a Attempt),
    /// An `srun` step of the job's newest attempt (`N.0`).
    Step(&'a Job, &'a Attempt, &'a StepRecord),
}

/// What values need besides the row.
#[derive(Debug, Clone, Default)]
pub struct AcctContext {
    /// The state's clock the records were read at.
    pub now: Timestamp,
    /// Group names by gid (from the group database where the CLI runs).
    pub group_names: BTreeMap<u32, String>,
}

fn waiting(job: &Job) -> bool {
    matches!(job.state, JobState::Pending | JobState::RequeueHold)
}

/// The attempt a row's figures come from.
fn attempt_of<'a>(row: Record<'a>) -> Option<&'a Attempt> {
    match row {
        Record::Job(job) => job.current_attempt().filter(|_| !waiting(job)),
        Record::Batch(_, attempt) | Record::Attempt(_, attempt) => Some(attempt),
    }
}

fn cpus(attempt: &Attempt) -> u64 {
    attempt.allocation.iter().map(|n| u64::from(n.cpus)).sum()
}

/// An attempt's state as sacct shows a job record: how it ended, with an
/// attempt preempted and requeued shown PREEMPTED (as Slurm records it), or
/// the job's state while it lasts.
fn attempt_state(job: &Job, attempt: &Attempt) -> JobState {
    match &attempt.end {
        Some(end) if matches!(end.cause, EndCause::Preempted { .. }) => JobState::Preempted,
        Some(end) => end.state,
        None => job.state,
    }
}

/// The batch step's state: how its shell ended, or the job's state while it runs.
fn batch_state(job: &Job, attempt: &Attempt) -> JobState {
    match &attempt.batch_exit {
        Some(exit) if exit.signal.is_some() => JobState::Cancelled,
        Some(exit) if exit.code == 0 => JobState::Completed,
        Some(_) => JobState::Failed,
        None if attempt.end.is_none() && !job.state.is_terminal() => JobState::Running,
        None => JobState::Cancelled,
    }
}

/// AllocTRES/ReqTRES text: `billing=C,cpu=C[,gres/gpu=G][,mem=M],node=N`.
pub fn tres(cpus: u64, memory_mb: u64, nodes: u64, gpus: u64) -> String {
    let mut text = format!("billing={cpus},cpu={cpus}");
    if gpus > 0 {
        text.push_str(&format!(",gres/gpu={gpus}"));
    }
    // Slurm leaves out a TRES of zero (no memory asked for or configured).
    if memory_mb > 0 {
        text.push_str(&format!(",mem={}", format_memory_mb(memory_mb)));
    }
    text.push_str(&format!(",node={nodes}"));
    text
}

/// The value of `field` in `row`; `None` where sacct leaves the cell blank.
pub fn value(field: AcctField, row: AcctRow<'_>, ctx: &AcctContext) -> Option<String> {
    let record = match row {
        AcctRow::Job(job) => Record::Job(job),
        AcctRow::Batch(job, attempt) => Record::Batch(job, attempt),
        AcctRow::Attempt(job, attempt) => Record::Attempt(job, attempt),
        AcctRow::Step(job, attempt, step) => return step_value(field, (job, attempt, step), ctx),
    };
    record_value(field, record, ctx)
}

/// A row about the job or its attempts (a step's row has its own fields:
/// [`step_value`]).
#[derive(Debug, Clone, Copy)]
enum Record<'a> {
    Job(&'a Job),
    Batch(&'a Job, &'a Attempt),
    Attempt(&'a Job, &'a Attempt),
}

fn record_value(field: AcctField, row: Record<'_>, ctx: &AcctContext) -> Option<String> {
    let (job, step) = match row {
        Record::Job(job) | Record::Attempt(job, _) => (job, false),
        Record::Batch(job, _) => (job, true),
    };
    let attempt = attempt_of(row);
    let elapsed = match row {
        Record::Job(job) => job_elapsed_secs(job, ctx.now),
        Record::Batch(_, a) | Record::Attempt(_, a) => attempt_elapsed_secs(a, ctx.now),
    };
    let job_only = |text: String| if step { None } else { Some(text) };
    let r = &job.resources;
    Some(match field {
        F::Account => job.account.clone(),
        F::AllocCpus | F::NCpus => attempt.map_or(0, cpus).to_string(),
        F::AllocGpus => attempt.map_or(0, Attempt::gpu_count).to_string(),
        F::AllocGres => match attempt.map_or(0, Attempt::gpu_count) {
            0 => return None,
            n => format!("gpu:{n}"),
        },
        F::AllocNodes | F::NNodes => {
            let nodes = match (row, attempt) {
                (Record::Batch(..), _) => 1,
                (_, Some(a)) => a.allocation.len() as u64,
                (_, None) if field == F::NNodes => u64::from(r.nodes),
                (_, None) => 0,
            };
            nodes.to_string()
        }
        F::AllocTres => {
            let a = attempt?;
            let memory = a.allocation.iter().map(|n| n.memory_mb).sum();
            match row {
                Record::Batch(..) => {
                    let first = a.allocation.first()?;
                    tres(
                        u64::from(first.cpus),
                        first.memory_mb,
                        1,
                        first.gpus.len() as u64,
                    )
                }
                _ => tres(cpus(a), memory, a.allocation.len() as u64, a.gpu_count()),
            }
        }
        F::Comment => job_only(job.spec.comment.clone().unwrap_or_default())?,
        F::Constraints => job_only(job.spec.features.join("&"))?,
        F::CpuTime => sacct_time(elapsed * attempt.map_or(0, cpus)),
        F::CpuTimeRaw => (elapsed * attempt.map_or(0, cpus)).to_string(),
        F::DerivedExitCode => job_only("0:0".into())?,
        F::Elapsed => sacct_time(elapsed),
        F::ElapsedRaw => elapsed.to_string(),
        F::Eligible => job_only(format_timestamp(job.eligible_time()))?,
        F::End => match row {
            Record::Job(job) if job.ended_at.is_some() => {
                job.ended_at.map(format_timestamp).unwrap_or_default()
            }
            Record::Job(_) => "Unknown".into(),
            Record::Batch(_, a) | Record::Attempt(_, a) => a
                .end
                .as_ref()
                .map_or_else(|| "Unknown".into(), |e| format_timestamp(e.at)),
        },
        F::ExitCode => exit_code_text(attempt.and_then(|a| a.batch_exit.as_ref())),
        F::FailedNode => match row {
            Record::Job(job) => job_failed_node(job).unwrap_or("").to_string(),
            Record::Batch(..) => return None,
            Record::Attempt(_, a) => attempt_cause(a)
                .and_then(failed_node)
                .unwrap_or("")
                .to_string(),
        },
        F::Gid => job_only(job.spec.gid.to_string())?,
        F::Group => job_only(
            ctx.group_names
                .get(&job.spec.gid)
                .cloned()
                .unwrap_or_else(|| job.spec.gid.to_string()),
        )?,
        F::JobId => match row {
            Record::Job(job) => job_id_text(job),
            Record::Batch(job, _) => format!("{}.batch", job_id_text(job)),
            Record::Attempt(job, a) => format!("{}#{}", job_id_text(job), a.number),
        },
        F::JobIdRaw => match row {
            Record::Job(job) => job.id.to_string(),
            Record::Batch(job, _) => format!("{}.batch", job.id),
            Record::Attempt(job, a) => format!("{}#{}", job.id, a.number),
        },
        F::JobName => {
            if step {
                "batch".into()
            } else {
                job.spec.name.clone()
            }
        }
        F::NodeList => match (row, attempt) {
            (Record::Batch(_, a), _) => a.batch_host()?.to_string(),
            (_, Some(a)) => attempt_nodes(a),
            (_, None) => "None assigned".into(),
        },
        F::NTasks => {
            if step {
                "1".into()
            } else {
                return None;
            }
        }
        F::Partition => job_only(job.partition.clone())?,
        F::Priority => return None,
        F::Qos => job_only(job.qos.clone().unwrap_or_default())?,
        F::Reason => job_only(if waiting(job) {
            reason_name(job.reason).to_string()
        } else {
            "None".into()
        })?,
        F::ReqCpus => job_only((u64::from(r.nodes) * u64::from(r.cpus_per_node)).to_string())?,
        F::ReqGres => match r.total_gpus() {
            0 => return None,
            n if !step => format!("gpu:{n}"),
            _ => return None,
        },
        F::ReqMem => job_only(if r.whole_node_memory {
            "0".into()
        } else {
            format_memory_mb(r.memory_per_node_mb)
        })?,
        F::ReqNodes => job_only(r.nodes.to_string())?,
        F::ReqTres => job_only(tres(
            u64::from(r.nodes) * u64::from(r.cpus_per_node),
            u64::from(r.nodes) * r.memory_per_node_mb,
            u64::from(r.nodes),
            r.total_gpus(),
        ))?,
        F::Reservation => job_only(job.spec.reservation.clone().unwrap_or_default())?,
        F::Restarts => match row {
            Record::Job(job) => job.requeue_count.to_string(),
            Record::Batch(..) => return None,
            Record::Attempt(_, a) => a.number.saturating_sub(1).to_string(),
        },
        F::Start => attempt.map_or_else(|| "Unknown".into(), |a| format_timestamp(a.started_at)),
        F::State => match row {
            Record::Job(job) => job.state.slurm_name().to_string(),
            Record::Batch(job, a) => batch_state(job, a).slurm_name().to_string(),
            Record::Attempt(job, a) => attempt_state(job, a).slurm_name().to_string(),
        },
        F::Submit => format_timestamp(job.submitted_at),
        F::Timelimit => job_only(match job.time_limit {
            TimeLimit::Unlimited => "UNLIMITED".into(),
            limit => corral_state::slurm::duration::format_time_limit(limit),
        })?,
        F::TimelimitRaw => job_only(match job.time_limit {
            TimeLimit::Unlimited => "UNLIMITED".into(),
            TimeLimit::Seconds(s) => s.div_ceil(60).to_string(),
        })?,
        F::Uid => job_only(job.spec.uid.to_string())?,
        F::User => job_only(job.spec.user.clone())?,
        F::WorkDir => job_only(job.spec.workdir.clone())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_pick_the_first_field_in_slurms_order() {
        let field = |p: &str| lookup(p).map(|f| f.2);
        assert_eq!(field("jobid"), Ok(F::JobId));
        assert_eq!(field("JobIDRaw"), Ok(F::JobIdRaw));
        assert_eq!(field("elap"), Ok(F::Elapsed));
        assert_eq!(field("ElapsedRaw"), Ok(F::ElapsedRaw));
        assert_eq!(field("alloc"), Ok(F::AllocCpus));
        assert_eq!(field("AllocGRES"), Ok(F::AllocGres));
        assert_eq!(field("state"), Ok(F::State));
        assert!(field("f").unwrap_err().contains("Flags"));
        // Slurm's own fields win a prefix, also those corral does not keep.
        assert!(
            field("c")
                .unwrap_err()
                .contains("corral does not keep Cluster")
        );
        assert!(field("reqc").unwrap_err().contains("ReqCPUFreq"));
        assert_eq!(field("fail"), Ok(F::FailedNode));
        assert_eq!(
            field("bogus"),
            Err("Invalid field requested: \"bogus\"".into())
        );
    }
}
