//! The command line: global options (where the cluster is, which certificate,
//! `--json`) and one subcommand per Slurm habit.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::admin_args::AdminArgs;
use crate::connection::ClusterFlags;
use crate::srun_args::SrunArgs;

/// corral: a Slurm-compatible scheduler for GPU clusters, without a single point of failure.
#[derive(Debug, Parser)]
#[command(name = "corral", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes (before the subcommand for `submit`).
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Controllers to try, `host:port[,host:port...]` (default: $CORRAL_CLUSTER or the client config).
    #[arg(long, global = true, value_name = "ADDRS")]
    pub cluster: Option<String>,
    /// The cluster CA certificate (default: $CORRAL_CA).
    #[arg(long, global = true, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// Your client certificate (default: $CORRAL_CERT).
    #[arg(long, global = true, value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// Your client key (default: $CORRAL_KEY).
    #[arg(long, global = true, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// Seconds to keep trying controllers before giving up.
    #[arg(long, global = true, default_value = "30", value_name = "SECONDS")]
    pub timeout: u64,
}

impl GlobalArgs {
    /// The connection flags.
    pub fn cluster_flags(&self) -> ClusterFlags {
        ClusterFlags {
            cluster: self.cluster.clone(),
            ca: self.ca.clone(),
            cert: self.cert.clone(),
            key: self.key.clone(),
            timeout_seconds: self.timeout,
        }
    }
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Submit a batch script (like sbatch): `corral submit [sbatch options] script [args]`.
    /// Put corral's own options (--json, --cluster) before `submit`.
    Submit {
        /// Invoked as `sbatch`: refusals in sbatch's words and exit statuses.
        #[arg(long, hide = true)]
        as_sbatch: bool,
        /// sbatch options, the script and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// List jobs (like squeue).
    Queue(QueueArgs),
    /// Cancel jobs (like scancel).
    Cancel(CancelArgs),
    /// Show nodes by partition and state (like sinfo).
    Nodes(NodesArgs),
    /// Job records and GPU-hours (like sacct).
    Acct(AcctArgs),
    /// Show one object in full.
    Show {
        #[command(subcommand)]
        what: ShowWhat,
    },
    /// Hold a pending job.
    Hold { job: u64 },
    /// Release a held job.
    Release { job: u64 },
    /// Requeue a running job.
    Requeue { job: u64 },
    /// Drain, resume or down nodes or GPUs (operators).
    Node {
        #[command(subcommand)]
        action: NodeAction,
    },
    /// Members, leader, term, indexes and health.
    Cluster,
    /// Block until jobs end, showing their state; exits non-zero if one failed.
    Wait {
        /// Job ids.
        #[arg(required = true)]
        jobs: Vec<u64>,
        /// Print nothing while waiting.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Report a checkpoint of the current job (from inside it).
    Checkpoint(CheckpointArgs),
    /// Run a command on a job's nodes (like srun): inside a job a step; with --jobid a step in that job; elsewhere an allocation for it.
    Srun(Box<SrunArgs>),
    /// Configuration changes (admins).
    Admin {
        #[command(subcommand)]
        change: AdminCommand,
    },
    /// Who the cluster thinks you are.
    Whoami,
    /// A live view for operators: leader and replicas (lag, term), the
    /// queue by state and partition, a GPU map (node × GPU: free, job,
    /// drained, failed) and recent events (elections, requeues, GPU faults,
    /// drains, nodes down). `q` quits.
    Top,
    /// Mint a cluster CA and the certificates a local or test cluster needs.
    Certs(CertsArgs),
    /// A local cluster of processes on this machine.
    Local {
        #[command(subcommand)]
        action: LocalAction,
    },
    /// The chaos suite (`corral-chaos`, installed beside corral): `corral chaos
    /// run --scenario kill-leader`, `corral chaos check HISTORY`, `corral chaos list`.
    #[command(disable_help_flag = true)]
    Chaos {
        /// corral-chaos's own arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Slurm's scontrol (reached through a link named `scontrol`): `corral scontrol -- ARGS`.
    #[command(hide = true, disable_help_flag = true)]
    Scontrol {
        /// scontrol's own arguments, parsed by hand (`scontrol --help`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Slurm's sacctmgr (reached through a link named `sacctmgr`): `corral sacctmgr -- ARGS`.
    #[command(hide = true, disable_help_flag = true)]
    Sacctmgr {
        /// sacctmgr's own arguments, parsed by hand (`sacctmgr --help`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Slurm's salloc (reached through a link named `salloc`): an allocation,
    /// then a command (default: your shell) here with its SLURM_* variables;
    /// `corral salloc -- [sbatch options] [COMMAND [ARGS...]]`.
    #[command(hide = true, disable_help_flag = true)]
    Salloc {
        /// salloc's own arguments: sbatch's allocation options, then the command.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Slurm's sstat (reached through a link named `sstat`): what running
    /// jobs' steps use now; `corral sstat -- [sstat options]`.
    #[command(hide = true, disable_help_flag = true)]
    Sstat {
        /// sstat's own arguments, parsed by hand (`sstat --help`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Slurm's sprio (reached through a link named `sprio`): pending jobs'
    /// priority factors; `corral sprio -- [sprio options]`.
    #[command(hide = true, disable_help_flag = true)]
    Sprio {
        /// sprio's own arguments, parsed by hand (`sprio --help`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Slurm's sshare (reached through a link named `sshare`): the fair-share
    /// tree; `corral sshare -- [sshare options]`.
    #[command(hide = true, disable_help_flag = true)]
    Sshare {
        /// sshare's own arguments, parsed by hand (`sshare --help`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// The batch script of a job that srun or salloc created on a login node:
    /// waits until that command releases the allocation, and exits with its status.
    #[command(hide = true)]
    AllocationHold,
    /// Create sbatch, squeue, scancel, sinfo, sacct, scontrol, sacctmgr, salloc, sstat, sprio, sshare (and srun) links to this binary in DIR.
    Shims {
        /// Where to put the links (e.g. ~/bin).
        dir: PathBuf,
    },
    /// Print shell completions.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Start a local cluster, run a sample workload (a 2-node training job that
    /// checkpoints, an array, a dependency chain), inject an XID into the training
    /// job, show it requeued and resumed from its checkpoint, and clean up.
    Demo(DemoArgs),
    /// Print the corral.toml equivalent of a Slurm configuration (slurm.conf,
    /// gres.conf, topology.conf); what cannot be carried over is listed, with
    /// why, in comments at the top.
    ImportSlurm(ImportSlurmArgs),
}

/// `corral import-slurm`.
#[derive(Debug, Clone, Args)]
pub struct ImportSlurmArgs {
    /// The slurm.conf to read; its Include lines are followed.
    #[arg(long, value_name = "FILE")]
    pub slurm_conf: PathBuf,
    /// gres.conf: GPU types and counts per node.
    #[arg(long, value_name = "FILE")]
    pub gres_conf: Option<PathBuf>,
    /// topology.conf: the tree of switches.
    #[arg(long, value_name = "FILE")]
    pub topology_conf: Option<PathBuf>,
}

/// `corral queue` (`-h` is squeue's --noheader; help is `--help`).
#[derive(Debug, Clone, Args)]
#[command(disable_help_flag = true)]
pub struct QueueArgs {
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// Only these users' jobs (comma-separated).
    #[arg(short = 'u', long = "user", value_delimiter = ',')]
    pub users: Vec<String>,
    /// Only these partitions.
    #[arg(short = 'p', long = "partition", value_delimiter = ',')]
    pub partitions: Vec<String>,
    /// Only these accounts.
    #[arg(short = 'A', long = "account", value_delimiter = ',')]
    pub accounts: Vec<String>,
    /// Only jobs in these states (PENDING, PD, RUNNING, R, ...; `all` for every state).
    #[arg(
        short = 't',
        long = "states",
        visible_alias = "state",
        value_delimiter = ','
    )]
    pub states: Vec<String>,
    /// Only these jobs (an array's id covers its tasks).
    #[arg(short = 'j', long = "jobs", value_delimiter = ',')]
    pub jobs: Vec<String>,
    /// Only these QOS.
    #[arg(short = 'q', long = "qos", value_delimiter = ',')]
    pub qos: Vec<String>,
    /// Only jobs with these names.
    #[arg(short = 'n', long = "name", value_delimiter = ',')]
    pub names: Vec<String>,
    /// Only jobs allocated (or, pending, expected to start) on these nodes (a hostlist).
    #[arg(short = 'w', long = "nodelist")]
    pub nodelist: Option<String>,
    /// Every partition, hidden ones too (corral hides none: accepted for scripts).
    #[arg(short = 'a', long)]
    pub all: bool,
    /// No header line.
    #[arg(short = 'h', long)]
    pub noheader: bool,
    /// Only your own jobs.
    #[arg(long)]
    pub me: bool,
    /// squeue's long columns: the state's name and the time limit.
    #[arg(short = 'l', long)]
    pub long: bool,
    /// One line per array task, pending ones too (they are folded into `N_[a-b]` otherwise).
    #[arg(short = 'r', long = "array")]
    pub array: bool,
    /// Expected start times of pending jobs, from a scheduling pass.
    #[arg(long)]
    pub start: bool,
    /// Columns, in squeue's `%[.][width]letter` form (e.g. "%.18i %.9P %.30j %.8u %.8T %.10M %.6D %R").
    #[arg(short = 'o', long = "format")]
    pub format: Option<String>,
    /// Columns by name, squeue's `-O` form (e.g. "JobID:10,Name:.30,State,ReasonList").
    #[arg(short = 'O', long = "Format")]
    pub format_names: Option<String>,
    /// Sort keys: format letters, `-` for descending (default "P,t,-p"; "S" with --start).
    #[arg(short = 'S', long = "sort", allow_hyphen_values = true)]
    pub sort: Option<String>,
    /// Print the queue again every SECONDS until interrupted.
    #[arg(short = 'i', long = "iterate", value_name = "SECONDS")]
    pub iterate: Option<u64>,
}

/// `corral cancel`.
#[derive(Debug, Clone, Args)]
pub struct CancelArgs {
    /// Job ids: 123, 123_4 (an array task), 123_[1-3].
    pub jobs: Vec<String>,
    /// Every unfinished job of this user.
    #[arg(short = 'u', long)]
    pub user: Option<String>,
    /// Send this signal (USR1, SIGUSR1 or 10) to running jobs instead of
    /// cancelling them. As scancel, it reaches the tasks of the jobs' steps, not
    /// the batch shell, unless --batch or --full says so; KILL without --batch
    /// cancels.
    #[arg(short = 's', long, value_name = "SIG")]
    pub signal: Option<String>,
    /// With --signal: signal only the batch shell (and what it started in its
    /// process group), not the steps' tasks.
    #[arg(short = 'b', long, conflicts_with = "full")]
    pub batch: bool,
    /// With --signal: signal the batch shell and the steps' tasks.
    #[arg(short = 'f', long)]
    pub full: bool,
}

/// `corral nodes` (sinfo's options; `-h` is --noheader, help is `--help`).
#[derive(Debug, Clone, Args)]
#[command(disable_help_flag = true)]
pub struct NodesArgs {
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// Invoked as `sinfo`: Slurm's columns only.
    #[arg(long, hide = true)]
    pub sinfo: bool,
    /// Only these partitions.
    #[arg(short = 'p', long = "partition", value_delimiter = ',')]
    pub partitions: Vec<String>,
    /// Only these nodes (hostlist).
    #[arg(short = 'n', long = "nodes")]
    pub nodes: Option<String>,
    /// One line per node (and partition).
    #[arg(short = 'N', long = "Node", visible_alias = "node-oriented")]
    pub node_oriented: bool,
    /// Long output: more columns, after the date.
    #[arg(short = 'l', long)]
    pub long: bool,
    /// Columns, in sinfo's `%[.][width]letter` form (e.g. "%P %a %l %D %t %N").
    #[arg(short = 'o', long = "format")]
    pub format: Option<String>,
    /// Columns by name, sinfo's `-O` form (e.g. "NodeList:20,StateLong,Gres:.12").
    #[arg(short = 'O', long = "Format")]
    pub format_names: Option<String>,
    /// Node counts per partition, NODES(A/I/O/T): allocated, idle, other, total.
    #[arg(short = 's', long)]
    pub summarize: bool,
    /// Why nodes are down or drained: REASON USER TIMESTAMP NODELIST.
    #[arg(short = 'R', long = "list-reasons")]
    pub list_reasons: bool,
    /// The reservations: RESV_NAME STATE START_TIME END_TIME DURATION NODELIST.
    #[arg(short = 'T', long = "reservation")]
    pub reservation: bool,
    /// Only nodes in these states (e.g. "idle,mix,drain"; `&` for all of them).
    #[arg(short = 't', long = "states", value_name = "STATES")]
    pub states: Option<String>,
    /// No header line.
    #[arg(short = 'h', long)]
    pub noheader: bool,
    /// Every partition, hidden ones too (corral hides none: accepted for scripts).
    #[arg(short = 'a', long)]
    pub all: bool,
}

/// `corral acct` (and `sacct`).
#[derive(Debug, Clone, Args)]
pub struct AcctArgs {
    /// Only these jobs (`123`, or `123_4` for an array task).
    #[arg(short = 'j', long = "jobs", value_delimiter = ',')]
    pub jobs: Vec<String>,
    /// Only these users.
    #[arg(
        short = 'u',
        long = "user",
        visible_alias = "uid",
        value_delimiter = ','
    )]
    pub users: Vec<String>,
    /// Every user's jobs (the default is your own, unless -u or -j name others).
    #[arg(short = 'a', long = "allusers")]
    pub all_users: bool,
    /// Only these accounts.
    #[arg(short = 'A', long = "accounts", value_delimiter = ',')]
    pub accounts: Vec<String>,
    /// Only these partitions.
    #[arg(short = 'r', long = "partition", value_delimiter = ',')]
    pub partitions: Vec<String>,
    /// Only jobs with these names.
    #[arg(long = "name", value_delimiter = ',')]
    pub names: Vec<String>,
    /// Only jobs in these states (CD, F, CA, R, PD, TO, NF, PR, ...).
    #[arg(short = 's', long = "state", value_delimiter = ',')]
    pub states: Vec<String>,
    /// Window start: YYYY-MM-DD[THH:MM[:SS]] (UTC), `now-1day`, ... (default: today
    /// 00:00, or every job with -j or -s).
    #[arg(short = 'S', long = "starttime")]
    pub start: Option<String>,
    /// Window end (same forms; default now).
    #[arg(short = 'E', long = "endtime")]
    pub end: Option<String>,
    /// Columns: sacct's field names (or prefixes), each with an optional %WIDTH
    /// (e.g. "JobID,JobName%30,AllocTRES,Elapsed,State"); `--helpformat` lists them.
    #[arg(short = 'o', long = "format")]
    pub format: Option<String>,
    /// Only JobID, State and ExitCode.
    #[arg(short = 'b', long = "brief")]
    pub brief: bool,
    /// Job allocations only, no batch-step rows.
    #[arg(short = 'X', long = "allocations")]
    pub allocations: bool,
    /// One line per attempt under each job (sacct's --duplicates).
    #[arg(long, visible_alias = "duplicates", short = 'D')]
    pub attempts: bool,
    /// `|` after every field, no padding.
    #[arg(short = 'p', long = "parsable")]
    pub parsable: bool,
    /// `|` between fields, no padding.
    #[arg(short = 'P', long = "parsable2")]
    pub parsable2: bool,
    /// The delimiter of -p/-P.
    #[arg(long = "delimiter")]
    pub delimiter: Option<String>,
    /// GPU-hours per user and account instead of job records.
    #[arg(long)]
    pub usage: bool,
    /// No header line.
    #[arg(short = 'n', long)]
    pub noheader: bool,
    /// List the field names --format takes.
    #[arg(short = 'e', long = "helpformat")]
    pub helpformat: bool,
    /// Every cluster (corral serves one: accepted for scripts).
    #[arg(short = 'L', long = "allclusters")]
    pub all_clusters: bool,
    /// Invoked as `sacct`: sacct's default columns and batch-step rows.
    #[arg(long, hide = true)]
    pub sacct: bool,
}

/// `corral show ...`.
#[derive(Debug, Subcommand)]
pub enum ShowWhat {
    /// Every field of a job, its attempts, checkpoints and why it waits.
    Job { job: u64 },
}

/// `corral node ...`.
#[derive(Debug, Subcommand)]
pub enum NodeAction {
    /// No new work on the nodes (or one GPU); running work finishes.
    Drain {
        /// Hostlist.
        nodes: String,
        #[arg(long)]
        gpu: Option<u32>,
        #[arg(long, short)]
        reason: String,
    },
    /// Back to service.
    Resume {
        nodes: String,
        #[arg(long)]
        gpu: Option<u32>,
    },
    /// Declare nodes down: their jobs end and are requeued.
    Down {
        nodes: String,
        #[arg(long, short)]
        reason: String,
    },
}

/// `corral checkpoint`.
#[derive(Debug, Clone, Args)]
pub struct CheckpointArgs {
    /// Training step.
    #[arg(long)]
    pub step: u64,
    /// Where the checkpoint is.
    #[arg(long)]
    pub path: String,
    /// The job (default: $SLURM_JOB_ID).
    #[arg(long)]
    pub job: Option<u64>,
    /// The attempt (default: $SLURM_RESTART_COUNT + 1).
    #[arg(long)]
    pub attempt: Option<u32>,
    /// The node (default: $SLURMD_NODENAME).
    #[arg(long)]
    pub node: Option<String>,
}

/// `corral admin ...`.
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Controller replicas.
    Members {
        #[command(subcommand)]
        action: MembersAction,
    },
    /// Backups of the whole cluster state (restored with `corrald restore`).
    Snapshot {
        #[command(subcommand)]
        action: SnapshotAction,
    },
    #[command(flatten)]
    Change(AdminArgs),
}

/// `corral admin snapshot ...`.
#[derive(Debug, Subcommand)]
pub enum SnapshotAction {
    /// Save one consistent copy of the whole state (online: the leader takes
    /// it after confirming it leads; every acknowledged change is in it) to
    /// FILE, checksummed. Refuses to overwrite FILE.
    Save {
        /// The backup file to write.
        file: PathBuf,
    },
    /// Check a backup file (every checksum, and that this build reads its
    /// state) and say what it holds. Needs no cluster.
    Inspect {
        /// The backup file.
        file: PathBuf,
    },
}

/// `corral admin members ...`.
#[derive(Debug, Subcommand)]
pub enum MembersAction {
    /// Add a replica (started with the cluster's config) as learner, then voter.
    Add {
        id: u64,
        /// Its peer (Raft) address.
        #[arg(long)]
        peer: String,
        /// Its client API address.
        #[arg(long)]
        api: String,
    },
    /// Remove a replica from the voters.
    Remove { id: u64 },
}

/// `corral certs`.
#[derive(Debug, Clone, Args)]
pub struct CertsArgs {
    /// Where to write them.
    pub dir: PathBuf,
    /// Cluster name (in the CA's subject).
    #[arg(long, default_value = "corral")]
    pub cluster_name: String,
    /// Controller ids to mint certificates for.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    pub controllers: Vec<u64>,
    /// Extra host names or addresses for the controller certificates.
    #[arg(long, value_delimiter = ',')]
    pub hosts: Vec<String>,
    /// Node agents (hostlist).
    #[arg(long)]
    pub agents: Option<String>,
    /// Users (comma-separated); NAME:operator or NAME:admin for other roles.
    #[arg(long, value_delimiter = ',')]
    pub users: Vec<String>,
}

/// `corral local ...`.
#[derive(Debug, Subcommand)]
pub enum LocalAction {
    /// Start a local cluster in the background.
    Up(LocalUpArgs),
    /// Stop it and (with --purge) delete its directory.
    Down {
        #[arg(long, default_value = "corral-local")]
        dir: PathBuf,
        /// Remove the directory afterwards.
        #[arg(long)]
        purge: bool,
    },
    /// Its processes and whether they run.
    Status {
        #[arg(long, default_value = "corral-local")]
        dir: PathBuf,
    },
    /// Start a stopped or killed process again, as it was started first
    /// (`controller-2`, `agent-gpu01`: the names `status` lists).
    Start {
        #[arg(long, default_value = "corral-local")]
        dir: PathBuf,
        /// The process.
        process: String,
        /// Extra environment for this start only, `NAME=VALUE` (repeatable),
        /// e.g. `--env FAKETIME=+1h --env LD_PRELOAD=...` to skew a clock.
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// Run this binary instead, from now on: another build of corrald
        /// or corral-agent (upgrade one process at a time).
        #[arg(long, value_name = "PATH")]
        program: Option<PathBuf>,
    },
    /// Partition a cluster started with --netns or --fault-proxy: every packet
    /// between each process of ONE and each of OTHER is dropped, both ways
    /// (comma lists of the names `status` lists). Cuts add up until `heal`.
    Cut {
        #[arg(long, default_value = "corral-local")]
        dir: PathBuf,
        /// One side, e.g. `controller-1`.
        #[arg(value_delimiter = ',', required = true)]
        one: Vec<String>,
        /// The other side, e.g. `controller-2,controller-3,agent-gpu01`.
        #[arg(long, value_delimiter = ',', required = true)]
        from: Vec<String>,
    },
    /// Lift every cut of a cluster started with --netns or --fault-proxy.
    Heal {
        #[arg(long, default_value = "corral-local")]
        dir: PathBuf,
    },
    /// The fault proxy of a cluster started with --fault-proxy (started by
    /// `up`; runs until `down`).
    #[command(hide = true)]
    FaultProxy {
        #[arg(long, default_value = "corral-local")]
        dir: PathBuf,
    },
    /// Inject an XID error into a simulated GPU of a local node.
    Xid {
        #[arg(long, default_value = "corral-local")]
        dir: PathBuf,
        /// The node.
        #[arg(long)]
        node: String,
        /// The GPU index (of the physical GPU: an XID on a GPU split into MIG
        /// instances reaches every instance).
        #[arg(long)]
        gpu: u32,
        /// The XID (79: fallen off the bus; 48: double-bit ECC; 13: application error).
        #[arg(long)]
        xid: u32,
    },
}

/// `corral demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Directory for the demo's cluster (default: a fresh temporary one).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Leave the cluster running afterwards.
    #[arg(long)]
    pub keep: bool,
}

/// Where a local cluster's GPUs come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LocalGpuBackend {
    /// Simulated GPUs, with faults injected by `corral local xid`.
    Simulated,
    /// This machine's GPUs through NVML (one node).
    Nvml,
}

/// `corral local up`.
#[derive(Debug, Clone, Args)]
pub struct LocalUpArgs {
    /// Directory for configs, certificates, data and logs.
    #[arg(long, default_value = "corral-local")]
    pub dir: PathBuf,
    /// Start the cluster from this backup (`corral admin snapshot save`):
    /// every controller is restored from it (`corrald restore`) before its
    /// first start.
    #[arg(long, value_name = "BACKUP")]
    pub restore: Option<PathBuf>,
    /// Controller replicas.
    #[arg(long, default_value = "3")]
    pub controllers: u32,
    /// GPU nodes (default 4; with --gpu-backend nvml, 1: this machine).
    #[arg(long)]
    pub nodes: Option<u32>,
    /// GPUs per simulated node (default 8).
    #[arg(long)]
    pub gpus_per_node: Option<u32>,
    /// Where the nodes' GPUs come from: `simulated` (fake H100s), or `nvml`:
    /// one node with this machine's real GPUs, configured as NVML finds them.
    #[arg(long, value_enum, default_value_t = LocalGpuBackend::Simulated)]
    pub gpu_backend: LocalGpuBackend,
    /// The corrald binary (default: next to this one).
    #[arg(long)]
    pub corrald: Option<PathBuf>,
    /// The corral-agent binary (default: next to this one).
    #[arg(long)]
    pub corral_agent: Option<PathBuf>,
    /// Start the controllers only (nodes stay down: jobs queue but never run).
    #[arg(long)]
    pub no_agents: bool,
    /// Give every controller and agent a network namespace of its own on a
    /// private bridge (root only), so that `corral local cut` can partition
    /// them as a real network fault would.
    #[arg(long)]
    pub netns: bool,
    /// Without root: give every controller and agent a loopback address of
    /// its own and put a proxy between them, so that `corral local cut` can
    /// partition the controllers from each other and the agents from the
    /// controllers (agents are not parted from each other).
    #[arg(long, conflicts_with = "netns")]
    pub fault_proxy: bool,
    /// A site's corral.toml (by hand, or from `corral import-slurm`): the local
    /// cluster gets its nodes (simulated, with their CPUs, memory, GPUs and
    /// features), partitions, accounts, users, QOS, topology and settings.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["nodes", "gpus_per_node"])]
    pub config: Option<PathBuf>,
    /// The program the leader runs to mail `--mail-type` notices (Slurm's
    /// MailProg, e.g. /usr/bin/mail), as `PROGRAM -s SUBJECT RECIPIENT`.
    #[arg(long, value_name = "PATH")]
    pub mail_program: Option<PathBuf>,
    /// Serve every controller's and agent's metrics (`GET /metrics`,
    /// Prometheus' text format) on a port of its own, listed in
    /// `DIR/metrics-targets.json` (Prometheus' `file_sd_configs` format).
    #[arg(long)]
    pub metrics: bool,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
