//! Slurm's repetition form for per-node counts, as in `SLURM_TASKS_PER_NODE=4(x2),2`.

use super::FormatError;

/// Prints per-node counts with runs folded: `[4, 4, 2]` becomes `4(x2),2`.
pub fn compress_counts(counts: &[u32]) -> String {
    let _ = counts;
    todo!()
}

/// Expands `4(x2),2` back into `[4, 4, 2]`.
pub fn expand_counts(spec: &str) -> Result<Vec<u32>, FormatError> {
    let _ = spec;
    todo!()
}
