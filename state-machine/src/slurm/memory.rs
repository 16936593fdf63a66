//! Memory sizes as `--mem` takes them: a number with an optional K, M, G or T
//! suffix (powers of 1024), megabytes when no suffix is given.

use super::FormatError;

/// Parses a memory size into MiB, rounding kilobytes up to whole MiB. `0` is valid
/// (Slurm reads `--mem=0` as "all the memory of the node").
pub fn parse_memory_mb(spec: &str) -> Result<u64, FormatError> {
    let _ = spec;
    todo!()
}

/// Prints MiB with the largest exact unit: `512M`, `16G`, `2T`.
pub fn format_memory_mb(mb: u64) -> String {
    let _ = mb;
    todo!()
}
