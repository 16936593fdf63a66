//! Small per-job values several views print alike: the JOBID text (`123_4` for
//! array tasks), exit codes (`code:signal`), an attempt's node list and why an
//! attempt ended, the end time, the dependency as written and output paths.

use corral_state::Timestamp;
use corral_state::job::{Attempt, EndCause, ExitStatus, Job};
use corral_state::slurm::dependency::DependencySpec;
use corral_state::slurm::duration::TimeLimit;
use corral_state::slurm::filename_pattern::{PatternValues, expand_pattern};
use corral_state::slurm::hostlist;

/// The id as Slurm prints it: `123`, or `ARRAYID_TASK` (`123_4`) for an array task.
pub fn job_id_text(job: &Job) -> String {
    match &job.array {
        Some(task) => format!("{}_{}", task.array_job_id, task.task_id),
        None => job.id.to_string(),
    }
}

/// sacct's ExitCode: `code:signal`, `0:0` when nothing was reported.
pub fn exit_code_text(status: Option<&ExitStatus>) -> String {
    match status {
        Some(status) => format!(
            "{}:{}",
            status.code,
            status.signal.map_or(0, |signal| signal.0)
        ),
        None => "0:0".to_string(),
    }
}

/// The attempt's nodes, hostlist-compressed (`n[1-4]`).
pub fn attempt_nodes(attempt: &Attempt) -> String {
    let names: Vec<&str> = attempt.allocation.iter().map(|a| a.node.as_str()).collect();
    hostlist::compress(&names)
}

/// Why an attempt ended or is ending, if it is.
pub fn attempt_cause(attempt: &Attempt) -> Option<&EndCause> {
    attempt
        .end
        .as_ref()
        .map(|end| &end.cause)
        .or_else(|| attempt.ending.as_ref().map(|ending| &ending.cause))
}

/// The node where an attempt failed: a node or GPU failure's node, or where an
/// application XID killed it.
pub fn failed_node(cause: &EndCause) -> Option<&str> {
    match cause {
        EndCause::NodeFailure { node, .. }
        | EndCause::GpuFailure { node, .. }
        | EndCause::ApplicationXid { node, .. } => Some(node),
        _ => None,
    }
}

/// The node blamed for the job's latest failure, over all its attempts.
pub fn job_failed_node(job: &Job) -> Option<&str> {
    job.attempts
        .iter()
        .rev()
        .filter_map(attempt_cause)
        .find_map(failed_node)
}

/// Why an attempt ended, in words.
pub fn cause_text(cause: &EndCause) -> String {
    match cause {
        EndCause::Exited(status) => match status.signal {
            Some(signal) => format!("killed by signal {}", signal.name()),
            None => format!("exited with code {}", status.code),
        },
        EndCause::Cancelled { by } => format!("cancelled by {by}"),
        EndCause::TimeLimit => "reached its time limit".to_string(),
        EndCause::NodeFailure { node, reason } => format!("node {node} failed: {reason}"),
        EndCause::GpuFailure { node, gpu, xid } => match xid {
            Some(xid) => format!("GPU {gpu} of node {node} failed (XID {xid})"),
            None => format!("GPU {gpu} of node {node} failed"),
        },
        EndCause::Preempted { for_job } => format!("preempted for job {for_job}"),
        EndCause::RequeueRequested { by } => format!("requeued by {by}"),
        EndCause::ApplicationXid { node, gpu, xid } => {
            format!(
                "application error on GPU {gpu} of node {node} (XID {xid}; GPU kept in service)"
            )
        }
    }
}

/// When the job ended, is ending, or (while it runs) will reach its time limit.
pub fn end_time(job: &Job, current: Option<&Attempt>) -> Option<Timestamp> {
    if let Some(at) = job.ended_at {
        return Some(at);
    }
    let attempt = current?;
    if let Some(ending) = &attempt.ending {
        return Some(ending.at);
    }
    match job.time_limit {
        TimeLimit::Seconds(secs) => Some(attempt.started_at.plus_secs(secs)),
        TimeLimit::Unlimited => None,
    }
}

/// `afterok:12:13,singleton`, as written to `--dependency` (`?` for any-of).
pub fn dependency_text(dependency: &DependencySpec) -> String {
    let mut parts: Vec<String> = dependency
        .conditions
        .iter()
        .map(|c| {
            let mut text = format!("{}:{}", c.kind.keyword(), c.job_id);
            if let Some(task) = c.array_task {
                text.push_str(&format!("_{task}"));
            }
            if c.delay_minutes > 0 {
                text.push_str(&format!("+{}", c.delay_minutes));
            }
            text
        })
        .collect();
    if dependency.singleton {
        parts.push("singleton".to_string());
    }
    parts.join(if dependency.any_of { "?" } else { "," })
}

/// An output file as the job sees it: sbatch's default name when none was given,
/// patterns expanded (`%N` as the batch host), relative to the working directory.
/// A pattern that does not expand is shown as written.
pub fn output_path(job: &Job, current: Option<&Attempt>, pattern: Option<&str>) -> String {
    let pattern = pattern.unwrap_or(if job.array.is_some() {
        "slurm-%A_%a.out"
    } else {
        "slurm-%j.out"
    });
    let values = PatternValues {
        job_id: job.id.0,
        array_job_id: job.array.map(|t| t.array_job_id.0),
        array_task_id: job.array.map(|t| t.task_id),
        job_name: &job.spec.name,
        user: &job.spec.user,
        node: current.and_then(Attempt::batch_host).unwrap_or(""),
        node_id: 0,
        task_id: 0,
        step: None,
    };
    let path = expand_pattern(pattern, &values).unwrap_or_else(|_| pattern.to_string());
    if path.starts_with('/') {
        path
    } else {
        format!("{}/{path}", job.spec.workdir.trim_end_matches('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::JobId;
    use corral_state::slurm::signal::Signal;

    #[test]
    fn exit_codes() {
        assert_eq!(exit_code_text(None), "0:0");
        let failed = ExitStatus {
            code: 3,
            signal: None,
        };
        assert_eq!(exit_code_text(Some(&failed)), "3:0");
        let killed = ExitStatus {
            code: 0,
            signal: Some(Signal::KILL),
        };
        assert_eq!(exit_code_text(Some(&killed)), "0:9");
        assert_eq!(
            cause_text(&EndCause::Exited(killed)),
            "killed by signal KILL"
        );
    }

    #[test]
    fn causes_name_the_failed_node() {
        let gpu = EndCause::GpuFailure {
            node: "n2".into(),
            gpu: 3,
            xid: Some(79),
        };
        assert_eq!(failed_node(&gpu), Some("n2"));
        assert_eq!(cause_text(&gpu), "GPU 3 of node n2 failed (XID 79)");
        let preempted = EndCause::Preempted { for_job: JobId(9) };
        assert_eq!(failed_node(&preempted), None);
        assert_eq!(cause_text(&preempted), "preempted for job 9");
        let application = EndCause::ApplicationXid {
            node: "n1".into(),
            gpu: 2,
            xid: 31,
        };
        assert_eq!(failed_node(&application), Some("n1"));
        assert_eq!(
            cause_text(&application),
            "application error on GPU 2 of node n1 (XID 31; GPU kept in service)"
        );
    }
}
