//! Output and error filename patterns: `%j %A %a %x %u %N %n %t %%`, with optional
//! zero-padding widths (`%4a`) and `\\` disabling substitution, as sbatch does.

use super::FormatError;

/// The values a pattern may refer to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternValues<'a> {
    /// `%j`: the job id.
    pub job_id: u64,
    /// `%A`: the array's job id; for a job outside an array, its own id.
    pub array_job_id: Option<u64>,
    /// `%a`: the array task id; outside an array Slurm prints 4294967294.
    pub array_task_id: Option<u32>,
    /// `%x`: the job name.
    pub job_name: &'a str,
    /// `%u`: the user name.
    pub user: &'a str,
    /// `%N`: the short host name of the node that opens the file.
    pub node: &'a str,
    /// `%n`: the node's index within the allocation.
    pub node_id: u32,
    /// `%t`: the task's rank.
    pub task_id: u32,
}

/// Substitutes `values` into `pattern`.
pub fn expand_pattern(pattern: &str, values: &PatternValues<'_>) -> Result<String, FormatError> {
    let _ = (pattern, values);
    todo!()
}
