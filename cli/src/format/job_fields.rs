//! Small per-job values several views print alike: the JOBID text (`123_4` for
//! array tasks), exit codes (`code:signal`), an attempt's node list and why an
//! attempt ended.

use corral_state::job::{Attempt, EndCause, ExitStatus, Job};
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
