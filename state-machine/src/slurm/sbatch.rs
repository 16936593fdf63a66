//! `sbatch` options, from the command line and from `#SBATCH` lines of a batch
//! script, parsed into [`SbatchOptions`]. Directive parsing stops at the first line
//! that is neither blank nor a comment, as sbatch does.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::FormatError;
use super::array::ArraySpec;
use super::dependency::DependencySpec;
use super::duration::TimeLimit;
use super::gres::GpuRequest;
use super::signal::SignalSpec;

/// Which environment variables of the submitting shell a job sees (`--export`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExportSpec {
    /// `ALL` (the default): every variable, plus the listed assignments.
    All {
        /// `ALL,NAME=value` assignments.
        set: BTreeMap<String, String>,
    },
    /// `NONE`: no variables of the submitting shell, only Slurm's own.
    None,
    /// `NAME1,NAME2=value`: only the named variables, with optional values.
    Only {
        /// Names to copy from the submitting shell (without `=`).
        names: Vec<String>,
        /// Explicit assignments.
        set: BTreeMap<String, String>,
    },
}

/// `--switches=COUNT[@MAX_WAIT]`: keep the job under at most `count` leaf switches,
/// waiting up to `max_wait_seconds` for such a placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SwitchesSpec {
    /// The most leaf switches the allocation may span.
    pub count: u32,
    /// How long to wait for that before accepting any placement; `None` waits forever.
    pub max_wait_seconds: Option<u64>,
}

/// Every sbatch option corral understands; `None` (or empty) means "not given".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SbatchOptions {
    /// `-J, --job-name`.
    pub job_name: Option<String>,
    /// `-A, --account`.
    pub account: Option<String>,
    /// `-p, --partition`.
    pub partition: Option<String>,
    /// `-q, --qos`.
    pub qos: Option<String>,
    /// `-N, --nodes` (an exact count; `N-N` is accepted, ranges are refused).
    pub nodes: Option<u32>,
    /// `-n, --ntasks`.
    pub ntasks: Option<u32>,
    /// `--ntasks-per-node`.
    pub ntasks_per_node: Option<u32>,
    /// `-c, --cpus-per-task`.
    pub cpus_per_task: Option<u32>,
    /// `--mem` in MiB (0 = all of the node's memory).
    pub mem_per_node_mb: Option<u64>,
    /// `--mem-per-cpu` in MiB.
    pub mem_per_cpu_mb: Option<u64>,
    /// `--mem-per-gpu` in MiB.
    pub mem_per_gpu_mb: Option<u64>,
    /// `-t, --time`.
    pub time_limit: Option<TimeLimit>,
    /// `-o, --output` filename pattern.
    pub output: Option<String>,
    /// `-e, --error` filename pattern.
    pub error: Option<String>,
    /// `-i, --input` filename pattern.
    pub input: Option<String>,
    /// `-D, --chdir`.
    pub chdir: Option<String>,
    /// `-G, --gpus`: GPUs for the whole job.
    pub gpus: Option<GpuRequest>,
    /// `--gpus-per-node`, or `--gres=gpu:...` (which is per node).
    pub gpus_per_node: Option<GpuRequest>,
    /// `--gpus-per-task`.
    pub gpus_per_task: Option<GpuRequest>,
    /// `--cpus-per-gpu`.
    pub cpus_per_gpu: Option<u32>,
    /// `-a, --array`.
    pub array: Option<ArraySpec>,
    /// `-d, --dependency`.
    pub dependency: Option<DependencySpec>,
    /// `--requeue` (true) or `--no-requeue` (false).
    pub requeue: Option<bool>,
    /// `--signal`.
    pub signal: Option<SignalSpec>,
    /// `--exclusive`.
    pub exclusive: Option<bool>,
    /// `--export`.
    pub export: Option<ExportSpec>,
    /// `--nice[=N]` (plain `--nice` is 100, as in Slurm).
    pub nice: Option<i32>,
    /// `-H, --hold`.
    pub hold: Option<bool>,
    /// `--switches`.
    pub switches: Option<SwitchesSpec>,
    /// `-C, --constraint`: node features that must all be present (`a&b` or `a,b`).
    pub constraint: Vec<String>,
    /// `--reservation`.
    pub reservation: Option<String>,
    /// `-w, --nodelist`: a hostlist of nodes the job must include.
    pub nodelist: Option<String>,
    /// `-x, --exclude`: a hostlist of nodes the job must not use.
    pub exclude: Option<String>,
    /// `--comment`.
    pub comment: Option<String>,
    /// `--mail-type` (kept for the record; corral sends no mail).
    pub mail_type: Option<String>,
    /// `--mail-user` (kept for the record; corral sends no mail).
    pub mail_user: Option<String>,
    /// `--wrap` (command line only): the command to run instead of a script.
    pub wrap: Option<String>,
    /// `--parsable` (command line only).
    pub parsable: bool,
    /// `--test-only` (command line only).
    pub test_only: bool,
}

impl SbatchOptions {
    /// Returns `self` with every option that `overrides` sets replaced by its value:
    /// command-line flags win over `#SBATCH` lines.
    pub fn overridden_by(self, overrides: SbatchOptions) -> SbatchOptions {
        let _ = overrides;
        todo!()
    }
}

/// Parses the `#SBATCH` lines of a batch script. The script must start with `#!`;
/// parsing stops at the first line that is neither blank nor a comment. Errors name
/// the line number and the bad token.
pub fn parse_script_directives(script: &str) -> Result<SbatchOptions, FormatError> {
    let _ = script;
    todo!()
}

/// Parses sbatch command-line arguments up to the first non-option argument (the
/// script path), returning the options and the remaining arguments (script and
/// its arguments).
pub fn parse_args<S: AsRef<str>>(args: &[S]) -> Result<(SbatchOptions, Vec<String>), FormatError> {
    let _ = args;
    todo!()
}
