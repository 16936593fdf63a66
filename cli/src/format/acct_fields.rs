//! sacct's fields: each one's name and default width (negative: left-aligned)
//! in Slurm 22.05's order, so that a prefix picks the same field Slurm picks
//! (`--format=jobid,elap` is JobID and Elapsed), and its value for a job row,
//! a batch-step row (`N.batch`) or one of corral's attempt rows (`N#A`).
//! corral's additions: `AllocGRES`/`ReqGRES` (removed from Slurm in 20.11 but
//! still in guides, printed in their old `gpu:N` form), `AllocGPUS`,
//! `Restarts` and `FailedNode`.

use std::collections::BTreeMap;

use corral_state::Timestamp;
use corral_state::job::{Attempt, Job, JobState};
use corral_state::slurm::duration::TimeLimit;
use corral_state::slurm::memory::format_memory_mb;

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

/// Every field, in Slurm's order (prefixes match the first), with its default
/// width.
pub const FIELDS: &[(&str, i32, AcctField)] = &[
    ("Account", 10, F::Account),
    ("AllocCPUS", 10, F::AllocCpus),
    ("AllocGPUS", 9, F::AllocGpus),
    ("AllocGRES", 12, F::AllocGres),
    ("AllocNodes", 10, F::AllocNodes),
    ("AllocTRES", 10, F::AllocTres),
    ("Comment", 14, F::Comment),
    ("Constraints", 19, F::Constraints),
    ("CPUTime", 10, F::CpuTime),
    ("CPUTimeRAW", 10, F::CpuTimeRaw),
    ("DerivedExitCode", 15, F::DerivedExitCode),
    ("Elapsed", 10, F::Elapsed),
    ("ElapsedRaw", 10, F::ElapsedRaw),
    ("Eligible", 19, F::Eligible),
    ("End", 19, F::End),
    ("ExitCode", 8, F::ExitCode),
    ("FailedNode", 10, F::FailedNode),
    ("GID", 6, F::Gid),
    ("Group", 9, F::Group),
    ("JobID", -12, F::JobId),
    ("JobIDRaw", -12, F::JobIdRaw),
    ("JobName", 10, F::JobName),
    ("NCPUS", 10, F::NCpus),
    ("NNodes", 8, F::NNodes),
    ("NodeList", 15, F::NodeList),
    ("NTasks", 8, F::NTasks),
    ("Partition", 10, F::Partition),
    ("Priority", 10, F::Priority),
    ("QOS", 10, F::Qos),
    ("Reason", 22, F::Reason),
    ("ReqCPUS", 8, F::ReqCpus),
    ("ReqGRES", 12, F::ReqGres),
    ("ReqMem", 10, F::ReqMem),
    ("ReqNodes", 8, F::ReqNodes),
    ("ReqTRES", 10, F::ReqTres),
    ("Reservation", 20, F::Reservation),
    ("Restarts", 8, F::Restarts),
    ("Start", 19, F::Start),
    ("State", 10, F::State),
    ("Submit", 19, F::Submit),
    ("Timelimit", 10, F::Timelimit),
    ("TimelimitRaw", 10, F::TimelimitRaw),
    ("UID", 6, F::Uid),
    ("User", 9, F::User),
    ("WorkDir", 20, F::WorkDir),
];

/// The field a name or prefix picks (case-insensitive), with its name and
/// default width.
pub fn lookup(prefix: &str) -> Option<(&'static str, i32, AcctField)> {
    let prefix = prefix.to_ascii_lowercase();
    FIELDS
        .iter()
        .find(|(name, _, _)| name.to_ascii_lowercase().starts_with(&prefix))
        .copied()
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
fn attempt_of<'a>(row: AcctRow<'a>) -> Option<&'a Attempt> {
    match row {
        AcctRow::Job(job) => job.current_attempt().filter(|_| !waiting(job)),
        AcctRow::Batch(_, attempt) | AcctRow::Attempt(_, attempt) => Some(attempt),
    }
}

fn cpus(attempt: &Attempt) -> u64 {
    attempt.allocation.iter().map(|n| u64::from(n.cpus)).sum()
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

fn tres(cpus: u64, memory_mb: u64, nodes: u64, gpus: u64) -> String {
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
    let (job, step) = match row {
        AcctRow::Job(job) | AcctRow::Attempt(job, _) => (job, false),
        AcctRow::Batch(job, _) => (job, true),
    };
    let attempt = attempt_of(row);
    let elapsed = match row {
        AcctRow::Job(job) => job_elapsed_secs(job, ctx.now),
        AcctRow::Batch(_, a) | AcctRow::Attempt(_, a) => attempt_elapsed_secs(a, ctx.now),
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
                (AcctRow::Batch(..), _) => 1,
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
                AcctRow::Batch(..) => {
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
        F::Eligible => job_only(format_timestamp(job.eligible_since))?,
        F::End => match row {
            AcctRow::Job(job) if job.ended_at.is_some() => {
                job.ended_at.map(format_timestamp).unwrap_or_default()
            }
            AcctRow::Job(_) => "Unknown".into(),
            AcctRow::Batch(_, a) | AcctRow::Attempt(_, a) => a
                .end
                .as_ref()
                .map_or_else(|| "Unknown".into(), |e| format_timestamp(e.at)),
        },
        F::ExitCode => exit_code_text(attempt.and_then(|a| a.batch_exit.as_ref())),
        F::FailedNode => match row {
            AcctRow::Job(job) => job_failed_node(job).unwrap_or("").to_string(),
            AcctRow::Batch(..) => return None,
            AcctRow::Attempt(_, a) => attempt_cause(a)
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
            AcctRow::Job(job) => job_id_text(job),
            AcctRow::Batch(job, _) => format!("{}.batch", job_id_text(job)),
            AcctRow::Attempt(job, a) => format!("{}#{}", job_id_text(job), a.number),
        },
        F::JobIdRaw => match row {
            AcctRow::Job(job) => job.id.to_string(),
            AcctRow::Batch(job, _) => format!("{}.batch", job.id),
            AcctRow::Attempt(job, a) => format!("{}#{}", job.id, a.number),
        },
        F::JobName => {
            if step {
                "batch".into()
            } else {
                job.spec.name.clone()
            }
        }
        F::NodeList => match (row, attempt) {
            (AcctRow::Batch(_, a), _) => a.batch_host()?.to_string(),
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
        F::Qos => job_only(job.qos.clone().unwrap_or_else(|| "normal".into()))?,
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
            AcctRow::Job(job) => job.requeue_count.to_string(),
            AcctRow::Batch(..) => return None,
            AcctRow::Attempt(_, a) => a.number.saturating_sub(1).to_string(),
        },
        F::Start => attempt.map_or_else(|| "Unknown".into(), |a| format_timestamp(a.started_at)),
        F::State => match row {
            AcctRow::Job(job) => job.state.slurm_name().to_string(),
            AcctRow::Batch(job, a) => batch_state(job, a).slurm_name().to_string(),
            AcctRow::Attempt(job, a) => a
                .end
                .as_ref()
                .map_or(job.state, |end| end.state)
                .slurm_name()
                .to_string(),
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
        assert_eq!(lookup("jobid").map(|f| f.2), Some(F::JobId));
        assert_eq!(lookup("JobIDRaw").map(|f| f.2), Some(F::JobIdRaw));
        assert_eq!(lookup("elap").map(|f| f.2), Some(F::Elapsed));
        assert_eq!(lookup("ElapsedRaw").map(|f| f.2), Some(F::ElapsedRaw));
        assert_eq!(lookup("alloc").map(|f| f.2), Some(F::AllocCpus));
        assert_eq!(lookup("AllocGRES").map(|f| f.2), Some(F::AllocGres));
        assert_eq!(lookup("state").map(|f| f.2), Some(F::State));
        assert_eq!(lookup("bogus"), None);
    }
}
