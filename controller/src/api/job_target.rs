//! Job ids as users type them to `scancel`: `123`, `123_4` (one array task) and
//! `123_[1-3,7]` (several tasks of an array).

use corral_state::command::CancelTarget;
use corral_state::ids::JobId;
use corral_state::slurm::array::parse_array;

/// The most array tasks one `123_[...]` may name.
const MAX_TASKS_PER_TARGET: usize = 100_000;

/// The cancel targets `text` names, or an error saying what a job id looks like.
pub fn parse(text: &str) -> Result<Vec<CancelTarget>, String> {
    let text = text.trim();
    let bad = || {
        format!("'{text}' is not a job id; use 123, 123_4 (an array task) or 123_[1-3] (several)")
    };
    let Some((job, task)) = text.split_once('_') else {
        let id: u64 = text.parse().map_err(|_| bad())?;
        return Ok(vec![CancelTarget::Job(JobId(id))]);
    };
    let array_job_id = JobId(job.parse().map_err(|_| bad())?);
    let tasks = task
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(task);
    let spec = parse_array(tasks, MAX_TASKS_PER_TARGET).map_err(|e| format!("{}: {e}", bad()))?;
    Ok(spec
        .indices
        .into_iter()
        .map(|task_id| CancelTarget::ArrayTask {
            array_job_id,
            task_id,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_tasks_and_task_ranges() {
        assert_eq!(parse("12").unwrap(), vec![CancelTarget::Job(JobId(12))]);
        assert_eq!(
            parse("12_3").unwrap(),
            vec![CancelTarget::ArrayTask {
                array_job_id: JobId(12),
                task_id: 3
            }]
        );
        assert_eq!(parse("12_[1-3]").unwrap().len(), 3);
        assert!(parse("x").unwrap_err().contains("not a job id"));
        assert!(parse("12_[").is_err());
    }
}
