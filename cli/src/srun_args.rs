//! `srun`'s command line inside a job: the step's shape, how its output is
//! shown, and Slurm's other options, each either honoured, accepted with a
//! warning where ignoring it is safe, or refused with what to do instead.

use clap::Args;

/// `srun` inside a job.
#[derive(Debug, Args)]
pub struct SrunArgs {
    /// Nodes of the allocation to run on, its first N (default: all; or $SLURM_NNODES).
    #[arg(short = 'N', long, value_name = "N")]
    pub nodes: Option<u32>,
    /// Tasks (default: one per node; or $SLURM_NTASKS when neither -N nor --ntasks-per-node is given).
    #[arg(short = 'n', long, value_name = "N")]
    pub ntasks: Option<u32>,
    /// Tasks on each node (default: $SLURM_NTASKS_PER_NODE when -n and -N are not given).
    #[arg(long, value_name = "N")]
    pub ntasks_per_node: Option<u32>,
    /// CPUs per task: how many tasks fit on a node when -n spreads them (default: the job's).
    #[arg(short = 'c', long, value_name = "N")]
    pub cpus_per_task: Option<u32>,
    /// Run on these nodes of the allocation (a hostlist, e.g. gpu[01-02]).
    #[arg(short = 'w', long, value_name = "HOSTLIST")]
    pub nodelist: Option<String>,
    /// Task distribution: only `block` (Slurm's default).
    #[arg(short = 'm', long, value_name = "block")]
    pub distribution: Option<String>,
    /// Prefix each output line with its task's rank.
    #[arg(short = 'l', long)]
    pub label: bool,
    /// The tasks' working directory (default: the current one).
    #[arg(short = 'D', long, value_name = "DIR")]
    pub chdir: Option<String>,
    /// Which variables of this environment the tasks get: ALL, NONE, or a list
    /// of NAME and NAME=VALUE (with ALL to add to everything).
    #[arg(long, default_value = "ALL", value_name = "ALL|NONE|VARS")]
    pub export: String,
    /// Kill every task when one exits non-zero (`-K`; `--kill-on-bad-exit=0` turns it off).
    #[arg(
        short = 'K',
        long,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "1",
        value_name = "0|1"
    )]
    pub kill_on_bad_exit: Option<u8>,
    /// Per-task output files are not supported: srun streams the tasks' output.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<String>,
    /// Per-task error files are not supported: srun streams the tasks' output.
    #[arg(short = 'e', long, value_name = "FILE")]
    pub error: Option<String>,
    /// Only `none`: corral provides no PMI; launchers that rendezvous through
    /// the environment (torchrun, mpirun with SLURM_* variables) work.
    #[arg(long, value_name = "TYPE")]
    pub mpi: Option<String>,
    /// The job to run in (default: $SLURM_JOB_ID).
    #[arg(long, value_name = "ID")]
    pub jobid: Option<u64>,
    /// Options accepted for compatibility; see [`SrunArgs::ignored`].
    #[command(flatten)]
    pub accepted: AcceptedOptions,
    /// The command and its arguments.
    #[arg(trailing_var_arg = true, required = true, num_args = 1.., value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Options corral's steps do not act on, accepted so that scripts run: tasks
/// always see all of the job's GPUs and CPUs on their node, and steps share
/// the job's resources.
#[derive(Debug, Args)]
pub struct AcceptedOptions {
    /// Ignored: srun never buffers output.
    #[arg(short = 'u', long)]
    pub unbuffered: bool,
    /// Ignored: steps have no names in corral.
    #[arg(short = 'J', long, value_name = "NAME")]
    pub job_name: Option<String>,
    /// Ignored: corral does not bind tasks to CPUs.
    #[arg(long, value_name = "TYPE")]
    pub cpu_bind: Option<String>,
    /// Ignored: corral does not bind tasks to GPUs.
    #[arg(long, value_name = "TYPE")]
    pub gpu_bind: Option<String>,
    /// Ignored: steps always share the job's resources.
    #[arg(long)]
    pub overlap: bool,
    /// Ignored: steps always share the job's resources.
    #[arg(long)]
    pub exclusive: bool,
    /// Ignored: a step's tasks see all of the job's GPUs on their node.
    #[arg(long, value_name = "LIST")]
    pub gres: Option<String>,
    /// Ignored: a step's tasks see all of the job's GPUs on their node.
    #[arg(long, value_name = "N")]
    pub gpus_per_task: Option<String>,
    /// Ignored: a step's tasks see all of the job's GPUs on their node.
    #[arg(short = 'G', long, value_name = "N")]
    pub gpus: Option<String>,
    /// Ignored: a step uses the job's memory.
    #[arg(long, value_name = "SIZE")]
    pub mem: Option<String>,
    /// Ignored: a step ends with its job's time limit.
    #[arg(short = 't', long, value_name = "TIME")]
    pub time: Option<String>,
    /// Ignored: the step ends when its last task does.
    #[arg(short = 'W', long, value_name = "SECONDS")]
    pub wait: Option<String>,
}

impl SrunArgs {
    /// Warnings for the options that were given and change nothing.
    pub fn ignored(&self) -> Vec<String> {
        let a = &self.accepted;
        let mut ignored = Vec::new();
        let mut note = |given: bool, option: &str, why: &str| {
            if given {
                ignored.push(format!("srun: warning: {option} is ignored: {why}"));
            }
        };
        let gpus = "a step's tasks see all of the job's GPUs on their node";
        note(a.gres.is_some(), "--gres", gpus);
        note(a.gpus_per_task.is_some(), "--gpus-per-task", gpus);
        note(a.gpus.is_some(), "--gpus", gpus);
        note(
            a.gpu_bind.is_some(),
            "--gpu-bind",
            "corral does not bind tasks to GPUs",
        );
        note(
            a.cpu_bind.is_some(),
            "--cpu-bind",
            "corral does not bind tasks to CPUs",
        );
        note(a.mem.is_some(), "--mem", "a step uses its job's memory");
        note(
            a.time.is_some(),
            "--time",
            "a step ends with its job's time limit",
        );
        ignored
    }
}
