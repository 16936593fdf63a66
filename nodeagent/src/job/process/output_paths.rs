//! Where a job's output goes: sbatch's `--output` / `--error` patterns
//! (`slurm-%j.out` by default, `slurm-%A_%a.out` for array tasks; standard error
//! follows standard output unless `--error` was given), expanded and taken from
//! the working directory.

use std::path::{Path, PathBuf};

use corral_proto::step::{TaskFiles, TaskStream};
use corral_state::job::Job;
use corral_state::slurm::filename_pattern::{PatternValues, expand_pattern};

use crate::job::environment::layout::NodeLayout;

/// sbatch's default output pattern.
const DEFAULT_OUTPUT: &str = "slurm-%j.out";
/// sbatch's default output pattern for array tasks.
const DEFAULT_ARRAY_OUTPUT: &str = "slurm-%A_%a.out";

/// The job's standard output and standard error files when opened on `node`
/// (`%N`; `%n` is the node's index in the current attempt), relative patterns
/// taken from `workdir`. A pattern that does not expand (an unknown `%q`) is
/// used as written, as `corral show job` prints it.
pub fn output_paths(job: &Job, node: &str, workdir: &Path) -> (PathBuf, PathBuf) {
    let default = if job.array.is_some() {
        DEFAULT_ARRAY_OUTPUT
    } else {
        DEFAULT_OUTPUT
    };
    let stdout_pattern = job.spec.stdout.as_deref().unwrap_or(default);
    let stderr_pattern = job.spec.stderr.as_deref().unwrap_or(stdout_pattern);
    let values = pattern_values(job, node, 0, None);
    let path = |pattern: &str| {
        let expanded = expand_pattern(pattern, &values).unwrap_or_else(|_| pattern.to_string());
        workdir.join(expanded)
    };
    (path(stdout_pattern), path(stderr_pattern))
}

/// Where a task of `srun -o/-e` writes on `node` (`%t` its rank, `%s` the
/// step, `%n` the node's index in the attempt), relative patterns taken from
/// `workdir`: a file, `/dev/null` for a stream discarded, or `None` for one
/// that goes to `srun`. A pattern that does not expand is used as written.
pub fn task_output_paths(
    job: &Job,
    files: &TaskFiles,
    (node, step, task): (&str, u32, u32),
    workdir: &Path,
) -> (Option<PathBuf>, Option<PathBuf>) {
    let values = pattern_values(job, node, task, Some(step));
    let path = |stream: &TaskStream| match stream {
        TaskStream::Srun => None,
        TaskStream::OnlyTask(only) if *only == task => None,
        TaskStream::Discard | TaskStream::OnlyTask(_) => Some(PathBuf::from("/dev/null")),
        TaskStream::NodeFile(pattern) => {
            let expanded = expand_pattern(pattern, &values).unwrap_or_else(|_| pattern.clone());
            Some(workdir.join(expanded))
        }
    };
    (path(&files.stdout), path(&files.stderr))
}

/// What `job`'s patterns refer to on `node` (`%n`: its index in the current
/// attempt), for task `task` of `step` (`None`: the batch script).
fn pattern_values<'a>(
    job: &'a Job,
    node: &'a str,
    task: u32,
    step: Option<u32>,
) -> PatternValues<'a> {
    let node_id = job
        .current_attempt()
        .and_then(|attempt| NodeLayout::of(attempt).index_of(node))
        .and_then(|index| u32::try_from(index).ok())
        .unwrap_or(0);
    PatternValues {
        job_id: job.id.0,
        array_job_id: job.array.map(|t| t.array_job_id.0),
        array_task_id: job.array.map(|t| t.task_id),
        job_name: &job.spec.name,
        user: &job.spec.user,
        node,
        node_id,
        task_id: task,
        step,
    }
}
