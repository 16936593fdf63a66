//! `srun`'s command line: the step's shape, how its output is shown, the
//! allocation it creates when it runs outside a job, and Slurm's other
//! options, each either honoured, accepted with a warning where ignoring it is
//! safe, or refused with what to do instead.

use clap::Args;

/// `srun`: inside a job, a step; outside, an allocation and its step.
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
    /// How ranks are dealt to nodes: `block` (Slurm's default) or `cyclic`
    /// (default: $SLURM_DISTRIBUTION).
    #[arg(short = 'm', long, value_name = "block|cyclic")]
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
    /// Where the tasks' standard input comes from: `all` (srun's, to every
    /// task; the default), `none`, a task's rank (srun's, to that task only), or
    /// a file on this host (to every task).
    #[arg(short = 'i', long, value_name = "all|none|TASK|FILE")]
    pub input: Option<String>,
    /// Each task's output to this file on its node instead of srun's output
    /// (%t task, %n node index, %N node, %s step, %j job, %J job.step, %u, %x, %%).
    #[arg(short = 'o', long, value_name = "PATTERN")]
    pub output: Option<String>,
    /// Each task's error output to this file (default: with -o, the output's file).
    #[arg(short = 'e', long, value_name = "PATTERN")]
    pub error: Option<String>,
    /// Only `none`: corral provides no PMI; launchers that rendezvous through
    /// the environment (torchrun, mpirun with SLURM_* variables) work.
    #[arg(long, value_name = "TYPE")]
    pub mpi: Option<String>,
    /// The job to run in (default: $SLURM_JOB_ID; with neither, srun creates
    /// an allocation for the step and ends it with the step).
    #[arg(long, value_name = "ID")]
    pub jobid: Option<u64>,
    /// Options accepted for compatibility; see [`SrunArgs::ignored`].
    #[command(flatten)]
    pub accepted: AcceptedOptions,
    /// What a new allocation asks for (outside a job).
    #[command(flatten)]
    pub allocation: AllocationOptions,
    /// Slurm's other srun options, carried by the `srun` link as
    /// `NAME[=VALUE]` (see [`crate::srun_slurm_options`]).
    #[arg(
        long = "slurm-option",
        hide = true,
        value_name = "NAME[=VALUE]",
        allow_hyphen_values = true
    )]
    pub slurm_options: Vec<String>,
    /// The command and its arguments.
    #[arg(trailing_var_arg = true, required = true, num_args = 1.., value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Options that shape the allocation `srun` creates when it runs outside a
/// job (inside one they change nothing, and say so).
#[derive(Debug, Args)]
pub struct AllocationOptions {
    /// Partition (outside a job).
    #[arg(short = 'p', long, value_name = "NAME")]
    pub partition: Option<String>,
    /// Account to charge (outside a job).
    #[arg(short = 'A', long, value_name = "NAME")]
    pub account: Option<String>,
    /// Quality of service (outside a job).
    #[arg(short = 'q', long, value_name = "NAME")]
    pub qos: Option<String>,
    /// Required node features (outside a job).
    #[arg(short = 'C', long, value_name = "LIST")]
    pub constraint: Option<String>,
    /// Run in this reservation (outside a job).
    #[arg(long, value_name = "NAME")]
    pub reservation: Option<String>,
    /// Nodes to avoid (outside a job).
    #[arg(short = 'x', long, value_name = "HOSTLIST")]
    pub exclude: Option<String>,
    /// GPUs on each node (outside a job).
    #[arg(long, value_name = "[TYPE:]N")]
    pub gpus_per_node: Option<String>,
    /// Memory per CPU (outside a job).
    #[arg(long, value_name = "SIZE")]
    pub mem_per_cpu: Option<String>,
    /// Memory per GPU (outside a job).
    #[arg(long, value_name = "SIZE")]
    pub mem_per_gpu: Option<String>,
    /// Start after these jobs (outside a job).
    #[arg(short = 'd', long, value_name = "LIST")]
    pub dependency: Option<String>,
    /// A comment on the job (outside a job).
    #[arg(long, value_name = "TEXT")]
    pub comment: Option<String>,
    /// Say when and where the job would start, and submit nothing (outside a job).
    #[arg(long)]
    pub test_only: bool,
    /// Print errors only, not the allocation's progress.
    #[arg(short = 'Q', long)]
    pub quiet: bool,
    /// Task 0 on a pseudo-terminal fed by this terminal (`srun --pty bash`
    /// for an interactive shell on the first node); the other tasks' output
    /// is dropped.
    #[arg(long)]
    pub pty: bool,
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
    /// Each task sees only N of the job's GPUs on its node (default: the job's
    /// --gpus-per-task; without, every task sees them all).
    #[arg(long, value_name = "[TYPE:]N")]
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
    /// The allocation this command line asks for when `srun` runs outside a
    /// job, in sbatch's words; Slurm's srun allocates with the same options.
    pub fn allocation_options(&self) -> Vec<String> {
        let (a, b) = (&self.allocation, &self.accepted);
        let mut options = Vec::new();
        let mut add = |option: &str, value: Option<String>| {
            if let Some(value) = value {
                options.push(format!("--{option}={value}"));
            }
        };
        add("nodes", self.nodes.map(|n| n.to_string()));
        add("ntasks", self.ntasks.map(|n| n.to_string()));
        add(
            "ntasks-per-node",
            self.ntasks_per_node.map(|n| n.to_string()),
        );
        add("cpus-per-task", self.cpus_per_task.map(|n| n.to_string()));
        add("nodelist", self.nodelist.clone());
        add("chdir", self.chdir.clone());
        add("partition", a.partition.clone());
        add("account", a.account.clone());
        add("qos", a.qos.clone());
        add("constraint", a.constraint.clone());
        add("reservation", a.reservation.clone());
        add("exclude", a.exclude.clone());
        add("gpus-per-node", a.gpus_per_node.clone());
        add("mem-per-cpu", a.mem_per_cpu.clone());
        add("mem-per-gpu", a.mem_per_gpu.clone());
        add("dependency", a.dependency.clone());
        add("comment", a.comment.clone());
        add("gres", b.gres.clone());
        add("gpus", b.gpus.clone());
        add("gpus-per-task", b.gpus_per_task.clone());
        add("mem", b.mem.clone());
        add("time", b.time.clone());
        // Slurm names srun's job after the program it runs.
        let name = b.job_name.clone().or_else(|| {
            let program = self.command.first()?;
            Some(program.rsplit('/').next().unwrap_or(program).to_string())
        });
        add("job-name", name);
        if b.exclusive {
            options.push("--exclusive".into());
        }
        if a.test_only {
            options.push("--test-only".into());
        }
        // Slurm's other options that shape an allocation.
        if let Ok(decided) = crate::srun_slurm_options::decide(&self.slurm_options, false) {
            options.extend(decided.allocation);
        }
        // An interactive job is not requeued: its command is gone by then.
        options.push("--no-requeue".into());
        options
    }

    /// Warnings for the options that were given and change nothing: inside a
    /// job (`in_job`), those that shape an allocation; anywhere, binding.
    pub fn ignored(&self, in_job: bool) -> Vec<String> {
        let a = &self.accepted;
        let mut ignored = Vec::new();
        let mut note = |given: bool, option: &str, why: &str| {
            if given {
                ignored.push(format!("srun: warning: {option} is ignored: {why}"));
            }
        };
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
        if !in_job {
            return ignored;
        }
        let l = &self.allocation;
        let allocation = "it shapes a new allocation, and this srun runs in an existing one";
        for (given, option) in [
            (l.partition.is_some(), "--partition"),
            (l.account.is_some(), "--account"),
            (l.qos.is_some(), "--qos"),
            (l.constraint.is_some(), "--constraint"),
            (l.reservation.is_some(), "--reservation"),
            (l.exclude.is_some(), "--exclude"),
            (l.gpus_per_node.is_some(), "--gpus-per-node"),
            (l.mem_per_cpu.is_some(), "--mem-per-cpu"),
            (l.mem_per_gpu.is_some(), "--mem-per-gpu"),
            (l.dependency.is_some(), "--dependency"),
            (l.comment.is_some(), "--comment"),
            (l.test_only, "--test-only"),
        ] {
            note(given, option, allocation);
        }
        let gpus = "a step's tasks see all of the job's GPUs on their node";
        note(a.gres.is_some(), "--gres", gpus);
        note(a.gpus.is_some(), "--gpus", gpus);
        note(a.mem.is_some(), "--mem", "a step uses its job's memory");
        note(
            a.time.is_some(),
            "--time",
            "a step ends with its job's time limit",
        );
        ignored
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    fn srun(line: &[&str]) -> super::SrunArgs {
        let mut argv = vec!["corral", "srun"];
        argv.extend(line);
        match crate::args::Cli::try_parse_from(argv)
            .expect("parses")
            .command
        {
            crate::args::Command::Srun(args) => *args,
            other => panic!("not srun: {other:?}"),
        }
    }

    #[test]
    fn outside_a_job_the_options_become_the_allocations() {
        let args = srun(&[
            "-N2",
            "--ntasks-per-node=8",
            "--gres=gpu:8",
            "-p",
            "gpu",
            "-t",
            "1:00:00",
            "--exclusive",
            "python",
            "train.py",
        ]);
        assert_eq!(
            args.allocation_options(),
            [
                "--nodes=2",
                "--ntasks-per-node=8",
                "--partition=gpu",
                "--gres=gpu:8",
                "--time=1:00:00",
                "--job-name=python",
                "--exclusive",
                "--no-requeue",
            ]
        );
        assert!(args.ignored(false).is_empty());
        // Inside a job they change nothing, and srun says so.
        let warnings = args.ignored(true);
        assert!(
            warnings.iter().any(|w| w.contains("--partition")),
            "{warnings:?}"
        );
        // A path's program names the job, unless -J does.
        let named = srun(&["-J", "eval", "/opt/bin/python"]);
        assert!(
            named
                .allocation_options()
                .contains(&"--job-name=eval".into())
        );
        let path = srun(&["/opt/bin/python"]);
        assert!(
            path.allocation_options()
                .contains(&"--job-name=python".into())
        );
    }
}
