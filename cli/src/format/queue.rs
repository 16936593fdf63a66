//! `corral queue` (and `squeue`): the job table in squeue's default look
//! (`%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R`), its `--long` look (the state's
//! name and the time limit, under a date line), its `--start` look, or the
//! columns `-o`/`-O` ask for: fields cut or padded to their widths, literal
//! text between them as written.

use super::datetime::ctime;
use super::format_spec::{Format, parse_letters, render_line};
use super::queue_fields::{QueueContext, QueueField, QueueRow, value};

/// squeue's default columns.
pub const DEFAULT_FORMAT: &str = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
/// squeue `--long`'s columns.
pub const LONG_FORMAT: &str = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
/// squeue `--start`'s columns.
pub const START_FORMAT: &str = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R";

/// How `queue_table` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueOptions {
    /// The columns.
    pub format: Format<QueueField>,
    /// Leave out the header line (`squeue --noheader`).
    pub noheader: bool,
    /// Print the date above the header, as `--long` does.
    pub date_line: bool,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            format: letters(DEFAULT_FORMAT),
            noheader: false,
            date_line: false,
        }
    }
}

/// A `-o` format of squeue's letters.
pub fn letters(format: &str) -> Format<QueueField> {
    parse_letters(format, QueueField::from_letter)
}

/// The rows as squeue prints them, in the order given.
pub fn queue_table(rows: &[QueueRow<'_>], ctx: &QueueContext, opts: &QueueOptions) -> String {
    let mut out = String::new();
    if !opts.noheader {
        if opts.date_line {
            out.push_str(&ctime(ctx.now));
            out.push('\n');
        }
        out.push_str(&render_line(&opts.format, |f| f.header().to_string()));
    }
    for row in rows {
        out.push_str(&render_line(&opts.format, |f| value(*f, row, ctx)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::format_spec::parse_names;
    use crate::format::queue_rows::{ListedJob, parse_sort, rows, sort};
    use crate::format::test_jobs::{jobs, now, scenario};

    fn listed() -> Vec<ListedJob> {
        jobs(&scenario())
            .into_iter()
            .map(|job| ListedJob {
                priority: 1000 - job.id.0 as i64,
                job,
                estimate: None,
            })
            .collect()
    }

    fn ctx() -> QueueContext {
        QueueContext {
            now: now(),
            ..QueueContext::default()
        }
    }

    #[test]
    fn default_columns_like_squeue_with_pending_array_tasks_folded() {
        let jobs = listed();
        let out = queue_table(&rows(&jobs, true), &ctx(), &QueueOptions::default());
        let expected =
            "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)
                 1       gpu    train    alice  R    1:00:00      2 n[1,4]
                 2       gpu     eval      bob CD      20:00      1 n3
                 3       gpu long-nam    alice PD       0:00      1 (Resources)
                 4       gpu    train      bob PD       0:00      1 (JobHeldUser)
           5_[1-2]       gpu    sweep    alice PD       0:00      1 (Priority)
";
        assert_eq!(out, expected);
        let one_per_task = queue_table(&rows(&jobs, false), &ctx(), &QueueOptions::default());
        assert!(one_per_task.contains("\n               5_1 "));
        assert!(one_per_task.contains("\n               5_2 "));
    }

    #[test]
    fn long_columns_under_a_date_line_and_noheader() {
        let jobs = listed();
        let mut opts = QueueOptions {
            format: letters(LONG_FORMAT),
            noheader: false,
            date_line: true,
        };
        let out = queue_table(&rows(&jobs[..2], true), &ctx(), &opts);
        let mut lines = out.lines();
        let date = lines.next().unwrap();
        assert!(date.ends_with(" 2026"), "{date}");
        assert_eq!(
            lines.next().unwrap(),
            "             JOBID PARTITION     NAME     USER    STATE       TIME TIME_LIMI  NODES NODELIST(REASON)"
        );
        opts.noheader = true;
        let out = queue_table(&rows(&jobs[..2], true), &ctx(), &opts);
        let expected = "                 1       gpu    train    alice  RUNNING    1:00:00   1:00:00      2 n[1,4]
                 2       gpu     eval      bob COMPLETE      20:00   1:00:00      1 n3
";
        assert_eq!(out, expected);
    }

    #[test]
    fn a_guide_format_with_gres_and_full_names() {
        let jobs = listed();
        let opts = QueueOptions {
            format: letters("%.18i %.9P %.30j %.8u %.8T %.10M %.6D %R %b"),
            ..QueueOptions::default()
        };
        let out = queue_table(&rows(&jobs[2..3], true), &ctx(), &opts);
        let expected = "             JOBID PARTITION                           NAME     USER    STATE       TIME  NODES NODELIST(REASON) TRES_PER_NODE
                 3       gpu                  long-name-job    alice  PENDING       0:00      1 (Resources) gres:gpu:8
";
        assert_eq!(out, expected);
    }

    #[test]
    fn named_fields_and_sorting() {
        let jobs = listed();
        let opts = QueueOptions {
            format: parse_names(
                "JobID:6,UserName:.8,StateCompact:3",
                20,
                QueueField::from_name,
            ),
            ..QueueOptions::default()
        };
        let mut rows = rows(&jobs, false);
        sort(&mut rows, &parse_sort("u,-i").unwrap(), &ctx());
        let out = queue_table(&rows, &ctx(), &opts);
        let expected = "JOBID     USERST 
6        alicePD 
5        alicePD 
3        alicePD 
1        aliceR  
4          bobPD 
2          bobCD 
";
        assert_eq!(out, expected);
        let mut by_default = super::super::queue_rows::rows(&jobs, true);
        sort(&mut by_default, &parse_sort("P,t,-p").unwrap(), &ctx());
        let ids: Vec<String> = by_default
            .iter()
            .map(|r| value(QueueField::JobId, r, &ctx()))
            .collect();
        // States sort by name, as squeue's: CD, PD, R.
        assert_eq!(ids, ["2", "3", "4", "5_[1-2]", "1"]);
    }
}
