//! The job list squeue's and sacct's `-j` take: `12`, `12_3` (task 3 of array
//! 12), comma-separated. The controller is asked for the ids (an array's id
//! covers its tasks); [`JobSelection::keeps`] then narrows an array to the
//! tasks named, keeping every task of an array (or job) named alone.

use corral_state::job::Job;

/// A parsed `-j` list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobSelection {
    /// The ids to ask the controller for (the array's id for `N_T`).
    pub ids: Vec<u64>,
    /// `(array, task)` pairs named as `N_T`.
    pub tasks: Vec<(u64, u32)>,
}

impl JobSelection {
    /// Parses the `-j` values (each may hold a comma list; `N.batch` names
    /// job N); `Err` is the word that is not a job id.
    pub fn parse(values: &[String]) -> Result<JobSelection, String> {
        let mut selection = JobSelection::default();
        for word in values.iter().flat_map(|v| v.split(',')) {
            let id = word.trim().trim_end_matches(".batch");
            let parsed =
                match id.split_once('_') {
                    Some((array, task)) => {
                        array.parse::<u64>().ok().zip(task.parse::<u32>().ok()).map(
                            |(array, task)| {
                                selection.tasks.push((array, task));
                                array
                            },
                        )
                    }
                    None => id.parse::<u64>().ok(),
                };
            selection.ids.push(parsed.ok_or_else(|| id.to_string())?);
        }
        Ok(selection)
    }

    /// True when `job` is one the list names: any job when no task was named;
    /// otherwise a job or array named alone (all its tasks), or a task named.
    pub fn keeps(&self, job: &Job) -> bool {
        let named_alone =
            |id: u64| self.ids.contains(&id) && !self.tasks.iter().any(|(array, _)| *array == id);
        self.tasks.is_empty()
            || named_alone(job.id.0)
            || job.array.is_some_and(|a| {
                named_alone(a.array_job_id.0)
                    || self
                        .tasks
                        .iter()
                        .any(|(array, task)| a.array_job_id.0 == *array && a.task_id == *task)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_tasks_and_bad_words() {
        let words = ["7,8_1".to_string(), "9.batch".to_string()];
        let selection = JobSelection::parse(&words).unwrap();
        assert_eq!(selection.ids, [7, 8, 9]);
        assert_eq!(selection.tasks, [(8, 1)]);
        assert_eq!(
            JobSelection::parse(&["x_1".to_string()]),
            Err("x_1".to_string())
        );
        assert_eq!(
            JobSelection::parse(&["3_y".to_string()]),
            Err("3_y".to_string())
        );
    }
}
