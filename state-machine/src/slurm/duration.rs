//! Slurm time specs (`MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`,
//! `UNLIMITED`) and the elapsed-time form squeue prints.

use serde::{Deserialize, Serialize};

use super::FormatError;

/// A job or partition time limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TimeLimit {
    /// No limit (`UNLIMITED`, `INFINITE`, or `0` as Slurm reads it).
    Unlimited,
    /// A limit in whole seconds, always greater than zero.
    Seconds(u64),
}

/// Parses a time limit as `sbatch --time` does.
pub fn parse_time_limit(spec: &str) -> Result<TimeLimit, FormatError> {
    let _ = spec;
    todo!()
}

/// Prints a limit as Slurm does: `UNLIMITED`, or `[D-]HH:MM:SS`.
pub fn format_time_limit(limit: TimeLimit) -> String {
    let _ = limit;
    todo!()
}

/// Prints elapsed seconds as squeue's TIME column does: `M:SS`, `H:MM:SS`, `D-HH:MM:SS`.
pub fn format_elapsed(seconds: u64) -> String {
    let _ = seconds;
    todo!()
}
