//! The variables of an array task: its array's id, its index, and the array's
//! size, bounds and step. None of them are set outside an array.

use corral_state::job::Job;

use super::{Env, set};

/// Sets `SLURM_ARRAY_JOB_ID` and `SLURM_ARRAY_TASK_ID`, and from the array's
/// indices `SLURM_ARRAY_TASK_COUNT`, `_MIN`, `_MAX` and, when the indices are
/// evenly spaced (or just one), `SLURM_ARRAY_TASK_STEP`.
pub(super) fn add(env: &mut Env, job: &Job) {
    let Some(task) = job.array else {
        return;
    };
    set(env, "SLURM_ARRAY_JOB_ID", task.array_job_id);
    set(env, "SLURM_ARRAY_TASK_ID", task.task_id);
    let Some(indices) = job.spec.array.as_ref().map(|a| a.indices.as_slice()) else {
        return;
    };
    let (Some(first), Some(last)) = (indices.iter().min(), indices.iter().max()) else {
        return;
    };
    set(env, "SLURM_ARRAY_TASK_COUNT", indices.len());
    set(env, "SLURM_ARRAY_TASK_MIN", first);
    set(env, "SLURM_ARRAY_TASK_MAX", last);
    if let Some(step) = even_step(indices) {
        set(env, "SLURM_ARRAY_TASK_STEP", step);
    }
}

/// The common difference of ascending `indices` (1 for a single index), or
/// `None` when they are not evenly spaced.
fn even_step(indices: &[u32]) -> Option<u32> {
    let mut steps = indices.windows(2).map(|w| w[1].checked_sub(w[0]));
    match steps.next() {
        None => Some(1),
        Some(first) => {
            let first = first.filter(|s| *s > 0)?;
            steps.all(|s| s == Some(first)).then_some(first)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::even_step;

    #[test]
    fn step_of_even_and_uneven_indices() {
        assert_eq!(even_step(&[7]), Some(1));
        assert_eq!(even_step(&[0, 1, 2, 3]), Some(1));
        assert_eq!(even_step(&[1, 3, 5, 7]), Some(2));
        assert_eq!(even_step(&[1, 2, 4]), None);
        assert_eq!(even_step(&[3, 3]), None);
    }
}
