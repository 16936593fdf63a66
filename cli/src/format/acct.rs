//! `corral acct`: job records in sacct's look (fixed widths, a `+` marking a cut
//! value, a rule under the header), with corral's `Restarts` and `FailedNode`
//! columns; optionally one extra row per attempt, as sacct lists steps.

use corral_state::Timestamp;
use corral_state::job::{Attempt, Job, JobState};

use super::elapsed::{attempt_elapsed_secs, job_elapsed_secs, sacct_time};
use super::job_fields::{attempt_cause, exit_code_text, failed_node, job_failed_node, job_id_text};
use super::table::{Align, Column, Style, Width, render};

/// How `acct_table` prints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AcctOptions {
    /// Under each job, one row per attempt, with JobID `ID#ATTEMPT`.
    pub attempts: bool,
    /// Leave out the header and its rule (`sacct --noheader`).
    pub noheader: bool,
}

const COLUMNS: [Column; 10] = [
    Column::new("JobID", Align::Left, Width::Plus(12)),
    Column::new("JobName", Align::Right, Width::Plus(10)),
    Column::new("Partition", Align::Right, Width::Plus(10)),
    Column::new("Account", Align::Right, Width::Plus(10)),
    Column::new("AllocGPUS", Align::Right, Width::Plus(9)),
    Column::new("State", Align::Right, Width::Plus(10)),
    Column::new("ExitCode", Align::Right, Width::Plus(8)),
    Column::new("Elapsed", Align::Right, Width::Plus(10)),
    Column::new("Restarts", Align::Right, Width::Plus(8)),
    Column::new("FailedNode", Align::Right, Width::Fit),
];

/// The jobs as sacct prints them, in the order given. A job's row describes its
/// newest attempt (GPUs allocated, exit code, run time at `now`; zeros while the
/// job waits in the queue); Restarts counts requeues and FailedNode names the node of the
/// latest node or GPU failure (or application XID) under any attempt. An attempt's row shows its own
/// GPUs, final state (`REQUEUED` for one that went back to the queue, the job's
/// state while it runs), exit code, run time and failed node.
pub fn acct_table(jobs: &[Job], now: Timestamp, opts: &AcctOptions) -> String {
    let mut rows = Vec::new();
    for job in jobs {
        rows.push(job_row(job, now));
        if opts.attempts {
            rows.extend(job.attempts.iter().map(|a| attempt_row(job, a, now)));
        }
    }
    render(
        &COLUMNS,
        &rows,
        Style {
            header: !opts.noheader,
            rule: true,
        },
    )
}

fn job_row(job: &Job, now: Timestamp) -> Vec<String> {
    let waiting = matches!(job.state, JobState::Pending | JobState::RequeueHold);
    let attempt = job.current_attempt().filter(|_| !waiting);
    let gpus = attempt.map_or(0, Attempt::gpu_count);
    vec![
        job_id_text(job),
        job.spec.name.clone(),
        job.partition.clone(),
        job.account.clone(),
        gpus.to_string(),
        job.state.slurm_name().to_string(),
        exit_code_text(attempt.and_then(|a| a.batch_exit.as_ref())),
        sacct_time(job_elapsed_secs(job, now)),
        job.requeue_count.to_string(),
        job_failed_node(job).unwrap_or("").to_string(),
    ]
}

fn attempt_row(job: &Job, attempt: &Attempt, now: Timestamp) -> Vec<String> {
    let state = attempt.end.as_ref().map_or(job.state, |end| end.state);
    vec![
        format!("{}#{}", job_id_text(job), attempt.number),
        job.spec.name.clone(),
        job.partition.clone(),
        job.account.clone(),
        attempt.gpu_count().to_string(),
        state.slurm_name().to_string(),
        exit_code_text(attempt.batch_exit.as_ref()),
        sacct_time(attempt_elapsed_secs(attempt, now)),
        attempt.number.saturating_sub(1).to_string(),
        attempt_cause(attempt)
            .and_then(failed_node)
            .unwrap_or("")
            .to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::test_jobs::{jobs, now, scenario};

    #[test]
    fn jobs_with_restarts_failed_node_and_attempts() {
        let opts = AcctOptions {
            attempts: true,
            noheader: false,
        };
        let out = acct_table(&jobs(&scenario())[..3], now(), &opts);
        let expected = "\
JobID           JobName  Partition    Account AllocGPUS      State ExitCode    Elapsed Restarts FailedNode
------------ ---------- ---------- ---------- --------- ---------- -------- ---------- -------- ----------
1                 train        gpu         ml        16    RUNNING      0:0   01:00:00        1         n2
1#1               train        gpu         ml        16   REQUEUED      0:0   00:14:00        0         n2
1#2               train        gpu         ml        16    RUNNING      0:0   01:00:00        1
2                  eval        gpu         ml         4  COMPLETED      0:0   00:20:00        0
2#1                eval        gpu         ml         4  COMPLETED      0:0   00:20:00        0
3            long-name+        gpu         ml         0    PENDING      0:0   00:00:00        0
";
        assert_eq!(out, expected);
    }

    #[test]
    fn one_row_per_job_without_header() {
        let opts = AcctOptions {
            attempts: false,
            noheader: true,
        };
        let out = acct_table(&jobs(&scenario()), now(), &opts);
        assert_eq!(out.lines().count(), 6);
        assert!(out.starts_with("1 "));
    }
}
