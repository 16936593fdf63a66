//! squeue's rows before they are printed: pending tasks of one array folded
//! into one row (`12_[1-3]`, unless `-r`), and the order `-S` asks for
//! (default `P,t,-p`: partition, state, then priority, highest first).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use corral_state::job::{Job, JobState, PendingReason};
use corral_state::slurm::duration::TimeLimit;

use super::elapsed::job_elapsed_secs;
use super::queue_fields::{QueueContext, QueueField, QueueRow, StartEstimate, value};

/// A job as listed, with what the scheduler says of it.
#[derive(Debug, Clone)]
pub struct ListedJob {
    /// The job.
    pub job: Job,
    /// Its multifactor priority.
    pub priority: i64,
    /// Its expected start, when asked for and known.
    pub estimate: Option<StartEstimate>,
}

/// One row per job, except that pending tasks of one array in one partition
/// share a row when `fold` (two or more of them), held tasks apart from the
/// others; the row shows the first task's reason, as squeue shows the array's
/// record before its tasks are split off.
pub fn rows(jobs: &[ListedJob], fold: bool) -> Vec<QueueRow<'_>> {
    let mut rows: Vec<QueueRow<'_>> = Vec::new();
    let mut groups: BTreeMap<(u64, &str, bool), usize> = BTreeMap::new();
    for listed in jobs {
        let job = &listed.job;
        let row = QueueRow {
            job,
            priority: listed.priority,
            estimate: listed.estimate.as_ref(),
            folded_tasks: Vec::new(),
        };
        let foldable = fold && job.state == JobState::Pending;
        let Some(task) = job.array.filter(|_| foldable) else {
            rows.push(row);
            continue;
        };
        let key = (task.array_job_id.0, job.partition.as_str(), held(job));
        match groups.get(&key) {
            Some(&at) => rows[at].folded_tasks.push(task.task_id),
            None => {
                groups.insert(key, rows.len());
                rows.push(QueueRow {
                    folded_tasks: vec![task.task_id],
                    ..row
                });
            }
        }
    }
    // A lone task keeps its own id (`12_4`).
    for row in &mut rows {
        if row.folded_tasks.len() == 1 {
            row.folded_tasks.clear();
        }
    }
    rows
}

/// True for a job held by its user, an operator or too many requeues.
fn held(job: &Job) -> bool {
    matches!(
        job.reason,
        PendingReason::JobHeldUser | PendingReason::JobHeldAdmin | PendingReason::JobHoldMaxRequeue
    )
}

/// One sort key of `-S`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortKey {
    /// The field sorted on.
    pub field: QueueField,
    /// Highest first.
    pub descending: bool,
}

/// Parses `-S` (`P,t,-p`, `+i`); an unknown letter is named in the error.
pub fn parse_sort(spec: &str) -> Result<Vec<SortKey>, String> {
    spec.split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(|key| {
            let (descending, letter) = match key.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, key.strip_prefix('+').unwrap_or(key)),
            };
            let mut chars = letter.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => QueueField::from_letter(c)
                    .map(|field| SortKey { field, descending })
                    .ok_or_else(|| format!("Invalid sort specification: {key}")),
                _ => Err(format!("Invalid sort specification: {key}")),
            }
        })
        .collect()
}

/// Sorts `rows` by `keys`, stably (ties keep the order given).
pub fn sort(rows: &mut [QueueRow<'_>], keys: &[SortKey], ctx: &QueueContext) {
    rows.sort_by(|a, b| {
        for key in keys {
            let (ka, kb) = (self::key(key.field, a, ctx), self::key(key.field, b, ctx));
            let order = match (&ka, &kb) {
                (Key::Unknown, Key::Unknown) => Ordering::Equal,
                (Key::Unknown, _) => return Ordering::Greater,
                (_, Key::Unknown) => return Ordering::Less,
                _ => ka.cmp(&kb),
            };
            let order = if key.descending {
                order.reverse()
            } else {
                order
            };
            if order != Ordering::Equal {
                return order;
            }
        }
        Ordering::Equal
    });
}

/// What a field sorts by: a number where the field is one, its text otherwise.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Number(i128),
    Text(String),
    /// No start time yet: last, whichever way the sort goes.
    Unknown,
}

fn key(field: QueueField, row: &QueueRow<'_>, ctx: &QueueContext) -> Key {
    let job = row.job;
    let number = |n: u64| Key::Number(i128::from(n));
    let start = || match (job.current_attempt(), row.estimate) {
        (Some(a), _) if job.state != JobState::Pending => Some(a.started_at.as_ms()),
        (_, Some(e)) => Some(e.start.as_ms()),
        _ => None,
    };
    match field {
        QueueField::JobId | QueueField::JobIdRaw => {
            number(job.array.map_or(job.id.0, |a| a.array_job_id.0))
                .with_task(job.array.map_or(0, |a| a.task_id))
        }
        QueueField::Priority | QueueField::PriorityLong => Key::Number(i128::from(row.priority)),
        // squeue compares the state names as text (CA < CD < CG < PD < R).
        QueueField::State => Key::Text(job.state.slurm_name().to_string()),
        QueueField::StateCompact => Key::Text(job.state.slurm_code().to_string()),
        QueueField::SubmitTime => number(job.submitted_at.as_ms()),
        QueueField::TimeUsed => number(job_elapsed_secs(job, ctx.now)),
        QueueField::StartTime => start().map_or(Key::Unknown, number),
        QueueField::TimeLimit => number(match job.time_limit {
            TimeLimit::Unlimited => u64::MAX,
            TimeLimit::Seconds(s) => s,
        }),
        QueueField::Nodes
        | QueueField::Cpus
        | QueueField::MinCpus
        | QueueField::Nice
        | QueueField::UserId
        | QueueField::GroupId
        | QueueField::ArrayJobId => value(field, row, ctx)
            .parse::<i128>()
            .map_or_else(|_| Key::Text(value(field, row, ctx)), Key::Number),
        _ => Key::Text(value(field, row, ctx)),
    }
}

impl Key {
    /// Job ids sort by array id, then task.
    fn with_task(self, task: u32) -> Key {
        match self {
            Key::Number(id) => Key::Number((id << 32) | i128::from(task)),
            text => text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_keys_take_signs_and_refuse_unknown_letters() {
        let keys = parse_sort("P,t,-p").unwrap();
        assert_eq!(keys.len(), 3);
        assert_eq!(keys[0].field, QueueField::Partition);
        assert!(keys[2].descending);
        assert!(!parse_sort("+i").unwrap()[0].descending);
        assert_eq!(
            parse_sort("P,!").unwrap_err(),
            "Invalid sort specification: !"
        );
    }
}
