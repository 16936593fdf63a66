//! Job dependencies as `--dependency` takes them: `afterok:1:2,afternotok:3`, the
//! `?` (any-of) form, `after:JOB[+MIN]`, `aftercorr`, and `singleton`.

use serde::{Deserialize, Serialize};

use super::FormatError;

/// When a dependency on another job is satisfied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DependencyKind {
    /// `after`: the other job started (or was cancelled), plus an optional delay.
    After,
    /// `afterany`: the other job ended in any state.
    AfterAny,
    /// `afterok`: the other job completed with exit code zero.
    AfterOk,
    /// `afternotok`: the other job ended in any failed state.
    AfterNotOk,
    /// `aftercorr`: the array task with the same index ended successfully.
    AfterCorr,
}

/// One `kind:job` condition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DependencyCondition {
    /// What must happen to the job.
    pub kind: DependencyKind,
    /// The job id (for an array, the array's job id).
    pub job_id: u64,
    /// A single array task (`123_4`); `None` means the whole job or array.
    pub array_task: Option<u32>,
    /// Minutes to wait after the condition holds (`after:123+10`); zero otherwise.
    pub delay_minutes: u32,
}

/// A parsed `--dependency` value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DependencySpec {
    /// `true` when conditions were joined with `?` (any one suffices), `false` for `,` (all).
    pub any_of: bool,
    /// The conditions, in the order written.
    pub conditions: Vec<DependencyCondition>,
    /// `singleton`: wait until no other job of the same name and user runs.
    pub singleton: bool,
}

/// Parses a `--dependency` value.
pub fn parse_dependency(spec: &str) -> Result<DependencySpec, FormatError> {
    let _ = spec;
    todo!()
}
