//! Job ids as users type them to `scancel`: `123`, `123_4` (one array task) and
//! `123_[1-3,7]` (several tasks of an array), and `-u USER`.

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

/// The targets that `jobs` (ids as typed) and `user` (empty for none) name, each
/// with the text that named it; ids that do not parse become error lines.
pub fn parse_all(jobs: &[String], user: &str) -> (Vec<(String, CancelTarget)>, Vec<String>) {
    let mut targets = Vec::new();
    let mut errors = Vec::new();
    for text in jobs {
        match parse(text) {
            Ok(found) => targets.extend(found.into_iter().map(|t| (text.clone(), t))),
            Err(e) => errors.push(e),
        }
    }
    if !user.is_empty() {
        targets.push((format!("user {user}"), CancelTarget::User(user.to_string())));
    }
    (targets, errors)
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

    #[test]
    fn every_id_and_the_user_become_targets_and_bad_ids_errors() {
        let (targets, errors) = parse_all(&["1".into(), "x".into(), "2_[0-1]".into()], "bob");
        assert_eq!(targets.len(), 4);
        assert_eq!(targets[0], ("1".into(), CancelTarget::Job(JobId(1))));
        assert_eq!(
            targets[3],
            ("user bob".into(), CancelTarget::User("bob".into()))
        );
        assert_eq!(errors.len(), 1);
        assert!(parse_all(&[], "").0.is_empty());
    }
}
