//! Running and killing a job's processes: each job runs in its own process
//! group, as its user when the agent is root, with its whole environment given
//! (nothing inherited from the agent), its output appended to files, and its end
//! reported as corral's [`ExitStatus`](corral_state::job::ExitStatus), and, where
//! the node has cgroup v2, in its attempt's cgroup ([`cgroup`]).
//!
//! Spawning and waiting use Tokio's process support: call them inside a Tokio
//! runtime. Dropping a [`JobProcess`] does not kill the job.

pub mod cgroup;
mod error;
mod escaped;
mod files;
mod group;
mod job_process;
mod launch;
mod output_paths;
mod proc_table;
mod script;
pub mod task_pid;
mod usage;
mod user;

use std::collections::BTreeMap;
use std::path::PathBuf;

use corral_proto::step::TerminalSize;

pub use cgroup::{AttemptCgroup, Cgroups};
pub use error::ProcessError;
pub use escaped::{
    AGENT_ID_ENV, Leftover, agent_processes, agents_processes, attempt_processes,
    in_child_pid_namespace, live_processes_of,
};
pub use group::{group_members, process_alive, process_group_alive};
pub use job_process::{JobProcess, TaskOutput};
pub use output_paths::{output_paths, task_output_paths};
pub use script::write_script;
pub use usage::{GroupUsage, usage_of_groups};
pub use user::{RunAs, login_account, resolve_user, run_as_for_job, supplementary_groups};

/// What to run, where, with what, and as whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSpec {
    /// The program (for a batch job, the script file the agent wrote).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// The whole environment: nothing else is inherited.
    pub env: BTreeMap<String, String>,
    /// The working directory; it must exist.
    pub workdir: PathBuf,
    /// Standard output, appended to (relative paths are taken from `workdir`).
    pub stdout: PathBuf,
    /// Standard error; when equal to `stdout` both go to one file, in order.
    pub stderr: PathBuf,
    /// Standard input; `/dev/null` when `None`.
    pub stdin: Option<PathBuf>,
    /// The user to run as when the agent runs as root; `None` runs the job as
    /// the agent's own user.
    pub user: Option<RunAs>,
    /// The attempt's cgroup (made), when the node has them.
    pub cgroup: Option<AttemptCgroup>,
}

/// A task of a job step: like a [`ProcessSpec`], but its output goes to pipes
/// the agent reads (and `srun` prints) and its input is `/dev/null`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSpec {
    /// The program: a path, or a name looked up in `env`'s `PATH`.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// The whole environment: nothing else is inherited.
    pub env: BTreeMap<String, String>,
    /// The working directory; it must exist.
    pub workdir: PathBuf,
    /// The user to run as when the agent runs as root.
    pub user: Option<RunAs>,
    /// How its input and output are connected.
    pub io: TaskIo,
    /// The attempt's cgroup (made), when the node has them.
    pub cgroup: Option<AttemptCgroup>,
}

/// How a task's input and output are connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskIo {
    /// Output to pipes the agent reads; input from a pipe the agent writes
    /// (`srun`'s input) when `input`, else `/dev/null`.
    Pipes {
        /// Whether the task reads `srun`'s input.
        input: bool,
    },
    /// A new pseudo-terminal of this size for input and output, the task
    /// leading a session the terminal controls (`srun --pty`'s task 0).
    Terminal(TerminalSize),
    /// `/dev/null` for all three (`srun --pty`'s other tasks, as in Slurm).
    Discarded,
    /// Output to files opened as a batch script's are (`srun -o/-e`), each
    /// stream without a file to a pipe the agent reads; input as for `Pipes`.
    Files {
        /// Standard output's file.
        stdout: Option<PathBuf>,
        /// Standard error's file.
        stderr: Option<PathBuf>,
        /// Whether the task reads `srun`'s input.
        input: bool,
    },
}
