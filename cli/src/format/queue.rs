//! `corral queue`: the job table in squeue's default look
//! (`%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R`), or its `--long` look
//! (`%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R`): right-aligned fixed widths
//! with longer values cut, and the node list or `(Reason)` last.

use corral_state::Timestamp;
use corral_state::job::{Job, JobState};
use corral_state::slurm::duration::format_time_limit;

use super::elapsed::{job_elapsed_secs, squeue_time};
use super::job_fields::{attempt_nodes, job_id_text};
use super::reason::reason_name;
use super::table::{Align, Column, Style, Width, render};

/// How `queue_table` prints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueOptions {
    /// Leave out the header line (`squeue --noheader`).
    pub noheader: bool,
    /// squeue's `--long` columns: the state's full name and the time limit.
    pub long: bool,
}

const RIGHT: Align = Align::Right;

/// The jobs as squeue prints them, one line each, in the order given. TIME is
/// the current attempt's run time at `now` (`0:00` while pending); the last
/// column holds the allocation's nodes (hostlist-compressed) or, for a waiting
/// job, its reason in parentheses.
pub fn queue_table(jobs: &[Job], now: Timestamp, opts: &QueueOptions) -> String {
    let mut columns = vec![
        Column::new("JOBID", RIGHT, Width::Cut(18)),
        Column::new("PARTITION", RIGHT, Width::Cut(9)),
        Column::new("NAME", RIGHT, Width::Cut(8)),
        Column::new("USER", RIGHT, Width::Cut(8)),
    ];
    if opts.long {
        columns.extend([
            Column::new("STATE", RIGHT, Width::Cut(8)),
            Column::new("TIME", RIGHT, Width::Cut(10)),
            Column::new("TIME_LIMI", RIGHT, Width::Cut(9)),
        ]);
    } else {
        columns.extend([
            Column::new("ST", RIGHT, Width::Cut(2)),
            Column::new("TIME", RIGHT, Width::Cut(10)),
        ]);
    }
    columns.extend([
        Column::new("NODES", RIGHT, Width::Cut(6)),
        Column::new("NODELIST(REASON)", Align::Left, Width::Fit),
    ]);
    let rows: Vec<Vec<String>> = jobs.iter().map(|job| row(job, now, opts.long)).collect();
    render(
        &columns,
        &rows,
        Style {
            header: !opts.noheader,
            rule: false,
        },
    )
}

fn row(job: &Job, now: Timestamp, long: bool) -> Vec<String> {
    let waiting = matches!(job.state, JobState::Pending | JobState::RequeueHold);
    let attempt = job.current_attempt().filter(|_| !waiting);
    let (nodes, last) = match attempt {
        Some(attempt) => (attempt.allocation.len(), attempt_nodes(attempt)),
        None if waiting => (
            job.resources.nodes as usize,
            format!("({})", reason_name(job.reason)),
        ),
        None => (job.resources.nodes as usize, String::new()),
    };
    let mut row = vec![
        job_id_text(job),
        job.partition.clone(),
        job.spec.name.clone(),
        job.spec.user.clone(),
    ];
    if long {
        row.push(job.state.slurm_name().to_string());
        row.push(squeue_time(job_elapsed_secs(job, now)));
        row.push(format_time_limit(job.time_limit));
    } else {
        row.push(job.state.slurm_code().to_string());
        row.push(squeue_time(job_elapsed_secs(job, now)));
    }
    row.push(nodes.to_string());
    row.push(last);
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::test_jobs::{jobs, now, scenario};

    #[test]
    fn default_columns_like_squeue() {
        let out = queue_table(&jobs(&scenario()), now(), &QueueOptions::default());
        let expected =
            "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)
                 1       gpu    train    alice  R    1:00:00      2 n[1,4]
                 2       gpu     eval      bob CD      20:00      1 n3
                 3       gpu long-nam    alice PD       0:00      1 (Resources)
                 4       gpu    train      bob PD       0:00      1 (JobHeldUser)
               5_1       gpu    sweep    alice PD       0:00      1 (Priority)
               5_2       gpu    sweep    alice PD       0:00      1 (Priority)
";
        assert_eq!(out, expected);
    }

    #[test]
    fn long_columns_and_noheader() {
        let opts = QueueOptions {
            noheader: true,
            long: true,
        };
        let out = queue_table(&jobs(&scenario())[..2], now(), &opts);
        let expected = "                 1       gpu    train    alice  RUNNING    1:00:00  01:00:00      2 n[1,4]
                 2       gpu     eval      bob COMPLETE      20:00  01:00:00      1 n3
";
        assert_eq!(out, expected);
    }

    #[test]
    fn empty_queue_is_just_the_header() {
        let out = queue_table(&[], now(), &QueueOptions::default());
        assert_eq!(out.lines().count(), 1);
        let none = QueueOptions {
            noheader: true,
            long: false,
        };
        assert_eq!(queue_table(&[], now(), &none), "");
    }
}
