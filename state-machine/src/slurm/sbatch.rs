//! `sbatch` options, from the command line and from `#SBATCH` lines of a batch
//! script, parsed into [`SbatchOptions`]. Directive parsing stops at the first line
//! that is neither blank nor a comment, as sbatch does.
//!
//! Both sources share one option table. Long options take `--name=value` or
//! `--name value`; short ones `-N 2` or `-N2`, and a flag may be bundled with the
//! short options after it (`-HN2`), as getopt allows. Long names must be spelled
//! out in full or as a prefix of exactly one of Slurm's sbatch options (as
//! getopt allows: `--err` is `--error`); the prefix is matched against
//! Slurm's whole option list, so a prefix Slurm finds ambiguous is refused.
//! Options that cannot matter here (`--hint`, `--overcommit`, ...) are
//! accepted with a warning naming why.
//!
//! In a script, a directive line is `#SBATCH` at the very start of the line,
//! followed by whitespace and any number of options; values may be quoted with
//! `'...'` or `"..."`, and an unquoted word starting with `#` begins a comment.
//! Later directives override earlier ones, and command-line options override
//! directives through [`SbatchOptions::overridden_by`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::FormatError;
use super::array::{ArraySpec, parse_array};
use super::begin::{BeginSpec, parse_begin};
use super::dependency::{DependencySpec, parse_dependency};
use super::duration::{TimeLimit, parse_duration, parse_time_limit};
use super::gres::{GpuRequest, parse_gpu_count, parse_gres};
use super::mail::MailTypes;
use super::memory::parse_memory_mb;
use super::signal::{SignalSpec, parse_signal_spec};

/// The format name of errors about options themselves.
const FORMAT: &str = "sbatch option";
/// The format name of errors about the script as a whole.
const SCRIPT_FORMAT: &str = "batch script";
/// The most array tasks `--array` may ask for here; the controller applies its
/// own, usually smaller, MaxArraySize.
const MAX_ARRAY_TASKS: usize = 1_000_000;
/// `--nice` without a value.
const DEFAULT_NICE: i32 = 100;
/// The largest adjustment `--nice` accepts either way (Slurm's NICE_OFFSET - 3).
const MAX_NICE: i64 = 2_147_483_645;

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
    /// `--mail-type`, repeated ones ORed (kept and shown; corral sends no mail).
    pub mail_type: MailTypes,
    /// `--mail-user`: recipients checked and normalised (`mail_user`).
    pub mail_user: Option<String>,
    /// `--time-min` (kept and shown; corral schedules with `--time`).
    pub time_min: Option<TimeLimit>,
    /// The variables sbatch itself puts in the job's environment because of an
    /// option (`--open-mode` sets `SLURM_OPEN_MODE`, `--hint` `SLURM_HINT`,
    /// `--export` `SLURM_EXPORT_ENV`, ...), whatever `--export` selects, by
    /// the option (long name) that set them: an option given again (on the
    /// command line over an `#SBATCH` line) replaces all of its variables.
    /// [`SbatchOptions::job_variables`] gives them.
    pub slurm_variables: BTreeMap<String, BTreeMap<String, String>>,
    /// `--wrap` (command line only): the command to run instead of a script.
    pub wrap: Option<String>,
    /// `--parsable` (command line only).
    pub parsable: bool,
    /// `--test-only` (command line only).
    pub test_only: bool,
    /// `-W, --wait`: sbatch waits for the job to end and exits with its
    /// status.
    pub wait: bool,
    /// `-b, --begin`, resolved against the submission's time.
    pub begin: Option<BeginSpec>,
    /// `--mincpus`: CPUs each node gives the job at least.
    pub mincpus: Option<u32>,
    /// One line for each option accepted that has no effect here (`--hint`,
    /// `--overcommit`, ...), said to the user at submission.
    pub warnings: Vec<String>,
}

impl SbatchOptions {
    /// Returns `self` with every option that `overrides` sets replaced by its value:
    /// command-line flags win over `#SBATCH` lines. A non-empty `constraint` list
    /// replaces the whole list; `parsable` and `test_only` are set if either sets them.
    pub fn overridden_by(self, overrides: SbatchOptions) -> SbatchOptions {
        let SbatchOptions {
            job_name,
            account,
            partition,
            qos,
            nodes,
            ntasks,
            ntasks_per_node,
            cpus_per_task,
            mem_per_node_mb,
            mem_per_cpu_mb,
            mem_per_gpu_mb,
            time_limit,
            output,
            error,
            input,
            chdir,
            gpus,
            gpus_per_node,
            gpus_per_task,
            cpus_per_gpu,
            array,
            dependency,
            requeue,
            signal,
            exclusive,
            export,
            nice,
            hold,
            switches,
            constraint,
            reservation,
            nodelist,
            exclude,
            comment,
            mail_type,
            mail_user,
            time_min,
            slurm_variables,
            wrap,
            parsable,
            test_only,
            wait,
            begin,
            mincpus,
            warnings,
        } = overrides;
        SbatchOptions {
            job_name: job_name.or(self.job_name),
            account: account.or(self.account),
            partition: partition.or(self.partition),
            qos: qos.or(self.qos),
            nodes: nodes.or(self.nodes),
            ntasks: ntasks.or(self.ntasks),
            ntasks_per_node: ntasks_per_node.or(self.ntasks_per_node),
            cpus_per_task: cpus_per_task.or(self.cpus_per_task),
            mem_per_node_mb: mem_per_node_mb.or(self.mem_per_node_mb),
            mem_per_cpu_mb: mem_per_cpu_mb.or(self.mem_per_cpu_mb),
            mem_per_gpu_mb: mem_per_gpu_mb.or(self.mem_per_gpu_mb),
            time_limit: time_limit.or(self.time_limit),
            output: output.or(self.output),
            error: error.or(self.error),
            input: input.or(self.input),
            chdir: chdir.or(self.chdir),
            gpus: gpus.or(self.gpus),
            gpus_per_node: gpus_per_node.or(self.gpus_per_node),
            gpus_per_task: gpus_per_task.or(self.gpus_per_task),
            cpus_per_gpu: cpus_per_gpu.or(self.cpus_per_gpu),
            array: array.or(self.array),
            dependency: dependency.or(self.dependency),
            requeue: requeue.or(self.requeue),
            signal: signal.or(self.signal),
            exclusive: exclusive.or(self.exclusive),
            export: export.or(self.export),
            nice: nice.or(self.nice),
            hold: hold.or(self.hold),
            switches: switches.or(self.switches),
            constraint: if constraint.is_empty() {
                self.constraint
            } else {
                constraint
            },
            reservation: reservation.or(self.reservation),
            nodelist: nodelist.or(self.nodelist),
            exclude: exclude.or(self.exclude),
            comment: comment.or(self.comment),
            mail_type: self.mail_type.union(mail_type),
            mail_user: mail_user.or(self.mail_user),
            time_min: time_min.or(self.time_min),
            slurm_variables: self
                .slurm_variables
                .into_iter()
                .chain(slurm_variables)
                .collect(),
            wrap: wrap.or(self.wrap),
            parsable: parsable || self.parsable,
            test_only: test_only || self.test_only,
            wait: wait || self.wait,
            begin: begin.or(self.begin),
            mincpus: mincpus.or(self.mincpus),
            warnings: self.warnings.into_iter().chain(warnings).collect(),
        }
    }
}

/// Parses the `#SBATCH` lines of a batch script. The script must start with `#!`;
/// parsing stops at the first line that is neither blank nor a comment. Errors name
/// the line number and the bad token.
pub fn parse_script_directives(script: &str) -> Result<SbatchOptions, FormatError> {
    check_interpreter_line(script)?;
    check_unix_line_breaks(script)?;
    let mut opts = SbatchOptions::default();
    for (index, line) in script.lines().enumerate().skip(1) {
        match classify_line(line) {
            ScriptLine::Directive(text) => {
                apply_directive(&mut opts, text).map_err(|err| at_line(index + 1, err))?;
            }
            ScriptLine::Skipped => {}
            ScriptLine::Command => break,
        }
    }
    Ok(opts)
}

/// Parses sbatch command-line arguments (without the program name) up to the
/// first non-option argument (the script path), returning the options and the
/// remaining arguments (script and its arguments). A `--` ends the options and
/// is dropped; a lone `-` counts as a non-option argument.
pub fn parse_args<S: AsRef<str>>(args: &[S]) -> Result<(SbatchOptions, Vec<String>), FormatError> {
    let mut opts = SbatchOptions::default();
    let mut used = apply_options(&mut opts, args, Source::CommandLine)?;
    if args.get(used).map(AsRef::as_ref) == Some("--") {
        used += 1;
    }
    let rest = args
        .get(used..)
        .unwrap_or_default()
        .iter()
        .map(|arg| arg.as_ref().to_string())
        .collect();
    Ok((opts, rest))
}

// ---------------------------------------------------------------------------
// Batch scripts

/// What one line of a batch script is to the directive parser.
#[derive(Debug, PartialEq, Eq)]
enum ScriptLine<'a> {
    /// `#SBATCH` and whitespace; holds the text after `#SBATCH`.
    Directive(&'a str),
    /// A blank line or another comment.
    Skipped,
    /// Anything else: the first command, where directives end.
    Command,
}

fn classify_line(line: &str) -> ScriptLine<'_> {
    if let Some(rest) = line.strip_prefix("#SBATCH")
        && (rest.is_empty() || rest.starts_with(char::is_whitespace))
    {
        return ScriptLine::Directive(rest);
    }
    let trimmed = line.trim_start();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        ScriptLine::Skipped
    } else {
        ScriptLine::Command
    }
}

fn check_interpreter_line(script: &str) -> Result<(), FormatError> {
    if script.starts_with("#!") {
        return Ok(());
    }
    let first_line = script.lines().next().unwrap_or_default();
    Err(FormatError::new(
        SCRIPT_FORMAT,
        first_line,
        "line 1: sbatch requires an interpreter line such as #!/bin/bash at the start of the script",
    ))
}

/// Refuses `\r\n` line breaks, as sbatch does, rather than reading `\r` into values.
fn check_unix_line_breaks(script: &str) -> Result<(), FormatError> {
    let Some(at) = script.find("\r\n") else {
        return Ok(());
    };
    let line = script
        .get(..at)
        .map_or(0, |before| before.matches('\n').count())
        + 1;
    Err(FormatError::new(
        SCRIPT_FORMAT,
        "\\r\\n",
        format!(
            "line {line}: the script has DOS line breaks (\\r\\n); \
             convert it to UNIX line breaks (\\n), e.g. with dos2unix"
        ),
    ))
}

/// Applies the options of one directive line (the text after `#SBATCH`).
fn apply_directive(opts: &mut SbatchOptions, text: &str) -> Result<(), FormatError> {
    let words = split_directive_words(text)?;
    let used = apply_options(opts, &words, Source::Directive)?;
    match words.get(used) {
        None => Ok(()),
        Some(extra) => Err(FormatError::new(
            FORMAT,
            extra.as_str(),
            "unexpected argument; #SBATCH lines hold only options",
        )),
    }
}

/// Splits directive text into words as a shell would for simple cases: on
/// whitespace, with `'...'` and `"..."` quoting (quotes removed), and ending at an
/// unquoted word that starts with `#`.
fn split_directive_words(text: &str) -> Result<Vec<String>, FormatError> {
    let mut words = Vec::new();
    let mut current: Option<String> = None;
    let mut open_quote: Option<(char, usize)> = None;
    for (at, c) in text.char_indices() {
        if let Some((quote, _)) = open_quote {
            if c == quote {
                open_quote = None;
            } else {
                current.get_or_insert_default().push(c);
            }
            continue;
        }
        match c {
            '\'' | '"' => {
                open_quote = Some((c, at));
                current.get_or_insert_default();
            }
            c if c.is_whitespace() => words.extend(current.take()),
            '#' if current.is_none() => break,
            c => current.get_or_insert_default().push(c),
        }
    }
    if let Some((_, at)) = open_quote {
        let token = text.get(at..).unwrap_or(text);
        return Err(FormatError::new(FORMAT, token, "unterminated quote"));
    }
    words.extend(current);
    Ok(words)
}

/// Prefixes an error's reason with the script line it came from.
fn at_line(number: usize, err: FormatError) -> FormatError {
    FormatError {
        reason: format!("line {number}: {}", err.reason),
        ..err
    }
}

// ---------------------------------------------------------------------------
// The option table

/// Where options come from; some are accepted only on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    CommandLine,
    Directive,
}

/// Options that take no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flag {
    Requeue,
    NoRequeue,
    Exclusive,
    Nice,
    Hold,
    Parsable,
    TestOnly,
    /// `-W, --wait`.
    Wait,
    /// `--get-user-env`: `SLURM_GET_USER_ENV=1`, the user's login variables.
    GetUserEnv,
    /// `-O, --overcommit`: `SLURM_OVERCOMMIT=1`, without effect on placement.
    Overcommit,
    /// Accepted, without effect here (see [`NO_EFFECT`]).
    NoEffect,
}

/// Options that take a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    JobName,
    Account,
    Partition,
    Qos,
    Nodes,
    Ntasks,
    NtasksPerNode,
    CpusPerTask,
    Mem,
    MemPerCpu,
    MemPerGpu,
    Time,
    Output,
    Error,
    Input,
    Chdir,
    Gpus,
    GpusPerNode,
    Gres,
    GpusPerTask,
    CpusPerGpu,
    Array,
    Dependency,
    Signal,
    Exclusive,
    Export,
    Nice,
    Switches,
    Constraint,
    Reservation,
    Nodelist,
    Exclude,
    Comment,
    MailType,
    MailUser,
    Wrap,
    /// `--time-min`: kept and shown, without effect on scheduling.
    TimeMin,
    /// `--open-mode`: `SLURM_OPEN_MODE`, without effect on the files.
    OpenMode,
    /// `--hint`: `SLURM_HINT` (and `SLURM_THREADS_PER_CORE=1` for
    /// `nomultithread`), without effect on binding.
    Hint,
    /// `--threads-per-core`: `SLURM_THREADS_PER_CORE`.
    ThreadsPerCore,
    /// `-m, --distribution`: `SLURM_DISTRIBUTION`.
    Distribution,
    /// `--ntasks-per-core`: `SLURM_NTASKS_PER_CORE`.
    NtasksPerCore,
    /// `--get-user-env=TIMEOUT`: as the flag.
    GetUserEnv,
    /// `-b, --begin`.
    Begin,
    /// `--mincpus`.
    MinCpus,
    /// Accepted, without effect here (see [`NO_EFFECT`]).
    NoEffect,
}

/// Whether an option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arity {
    /// Never takes a value.
    Flag(Flag),
    /// Always takes a value, inline or as the next word.
    Value(Value),
    /// Takes a value only inline (`--nice=5`); alone it acts as the flag.
    Optional(Flag, Value),
}

/// One row of the option table.
#[derive(Debug, Clone, Copy)]
struct OptionDef {
    long: &'static str,
    short: Option<char>,
    arity: Arity,
    command_line_only: bool,
}

impl OptionDef {
    const fn value(long: &'static str, short: Option<char>, value: Value) -> Self {
        OptionDef {
            long,
            short,
            arity: Arity::Value(value),
            command_line_only: false,
        }
    }

    const fn flag(long: &'static str, short: Option<char>, flag: Flag) -> Self {
        OptionDef {
            long,
            short,
            arity: Arity::Flag(flag),
            command_line_only: false,
        }
    }

    const fn optional(long: &'static str, flag: Flag, value: Value) -> Self {
        OptionDef {
            long,
            short: None,
            arity: Arity::Optional(flag, value),
            command_line_only: false,
        }
    }

    const fn command_line_only(self) -> Self {
        OptionDef {
            command_line_only: true,
            ..self
        }
    }
}

/// Every option corral understands.
const OPTIONS: &[OptionDef] = &[
    OptionDef::value("job-name", Some('J'), Value::JobName),
    OptionDef::value("account", Some('A'), Value::Account),
    OptionDef::value("partition", Some('p'), Value::Partition),
    OptionDef::value("qos", Some('q'), Value::Qos),
    OptionDef::value("nodes", Some('N'), Value::Nodes),
    OptionDef::value("ntasks", Some('n'), Value::Ntasks),
    OptionDef::value("ntasks-per-node", None, Value::NtasksPerNode),
    OptionDef::value("tasks-per-node", None, Value::NtasksPerNode),
    OptionDef::value("cpus-per-task", Some('c'), Value::CpusPerTask),
    OptionDef::value("mem", None, Value::Mem),
    OptionDef::value("mem-per-cpu", None, Value::MemPerCpu),
    OptionDef::value("mem-per-gpu", None, Value::MemPerGpu),
    OptionDef::value("time", Some('t'), Value::Time),
    OptionDef::value("output", Some('o'), Value::Output),
    OptionDef::value("error", Some('e'), Value::Error),
    OptionDef::value("input", Some('i'), Value::Input),
    OptionDef::value("chdir", Some('D'), Value::Chdir),
    OptionDef::value("gpus", Some('G'), Value::Gpus),
    OptionDef::value("gpus-per-node", None, Value::GpusPerNode),
    OptionDef::value("gres", None, Value::Gres),
    OptionDef::value("gpus-per-task", None, Value::GpusPerTask),
    OptionDef::value("cpus-per-gpu", None, Value::CpusPerGpu),
    OptionDef::value("array", Some('a'), Value::Array),
    OptionDef::value("dependency", Some('d'), Value::Dependency),
    OptionDef::flag("requeue", None, Flag::Requeue),
    OptionDef::flag("no-requeue", None, Flag::NoRequeue),
    OptionDef::value("signal", None, Value::Signal),
    OptionDef::optional("exclusive", Flag::Exclusive, Value::Exclusive),
    OptionDef::value("export", None, Value::Export),
    OptionDef::optional("nice", Flag::Nice, Value::Nice),
    OptionDef::flag("hold", Some('H'), Flag::Hold),
    OptionDef::value("switches", None, Value::Switches),
    OptionDef::value("constraint", Some('C'), Value::Constraint),
    OptionDef::value("reservation", None, Value::Reservation),
    OptionDef::value("nodelist", Some('w'), Value::Nodelist),
    OptionDef::value("exclude", Some('x'), Value::Exclude),
    OptionDef::value("comment", None, Value::Comment),
    OptionDef::value("mail-type", None, Value::MailType),
    OptionDef::value("mail-user", None, Value::MailUser),
    OptionDef::value("wrap", None, Value::Wrap).command_line_only(),
    OptionDef::flag("parsable", None, Flag::Parsable).command_line_only(),
    OptionDef::flag("test-only", None, Flag::TestOnly).command_line_only(),
    OptionDef::value("time-min", None, Value::TimeMin),
    OptionDef::value("wait-all-nodes", None, Value::NoEffect),
    OptionDef::value("hint", None, Value::Hint),
    OptionDef::flag("overcommit", Some('O'), Flag::Overcommit),
    OptionDef::value("open-mode", None, Value::OpenMode),
    OptionDef::value("kill-on-invalid-dep", None, Value::NoEffect),
    OptionDef::value("distribution", Some('m'), Value::Distribution),
    OptionDef::value("mem-bind", None, Value::NoEffect),
    OptionDef::value("gpu-bind", None, Value::NoEffect),
    OptionDef::value("gpu-freq", None, Value::NoEffect),
    OptionDef::value("cpu-freq", None, Value::NoEffect),
    OptionDef::value("ntasks-per-core", None, Value::NtasksPerCore),
    OptionDef::value("ntasks-per-socket", None, Value::NoEffect),
    OptionDef::value("sockets-per-node", None, Value::NoEffect),
    OptionDef::value("cores-per-socket", None, Value::NoEffect),
    OptionDef::value("threads-per-core", None, Value::ThreadsPerCore),
    OptionDef::optional("propagate", Flag::NoEffect, Value::NoEffect),
    OptionDef::value("profile", None, Value::NoEffect),
    OptionDef::value("acctg-freq", None, Value::NoEffect),
    OptionDef::value("wckey", None, Value::NoEffect),
    OptionDef {
        long: "no-kill",
        short: Some('k'),
        arity: Arity::Optional(Flag::NoEffect, Value::NoEffect),
        command_line_only: false,
    },
    OptionDef::flag("quiet", Some('Q'), Flag::NoEffect),
    OptionDef::flag("verbose", Some('v'), Flag::NoEffect),
    OptionDef::flag("oversubscribe", Some('s'), Flag::NoEffect),
    OptionDef::flag("contiguous", None, Flag::NoEffect),
    OptionDef::flag("spread-job", None, Flag::NoEffect),
    OptionDef::flag("use-min-nodes", None, Flag::NoEffect),
    OptionDef::flag("wait", Some('W'), Flag::Wait),
    // The value (a timeout and mode for `su -`) does not matter: corral reads
    // the login variables from the user database.
    OptionDef::optional("get-user-env", Flag::GetUserEnv, Value::GetUserEnv),
    OptionDef::value("core-spec", Some('S'), Value::NoEffect),
    OptionDef::value("thread-spec", None, Value::NoEffect),
    OptionDef::flag("reboot", None, Flag::NoEffect),
    OptionDef::value("power", None, Value::NoEffect),
    OptionDef::value("network", None, Value::NoEffect),
    OptionDef::value("delay-boot", None, Value::NoEffect),
    OptionDef::value("mcs-label", None, Value::NoEffect),
    OptionDef::value("context", None, Value::NoEffect),
    OptionDef::value("extra-node-info", Some('B'), Value::NoEffect),
    OptionDef::value("gres-flags", None, Value::NoEffect),
    OptionDef::value("batch", None, Value::NoEffect),
    OptionDef::flag("ignore-pbs", None, Flag::NoEffect),
    OptionDef::value("prefer", None, Value::NoEffect),
    // Refused with a reason (see REFUSED); the arity is getopt's, so that the
    // option is found and named whole.
    OptionDef::value("begin", Some('b'), Value::Begin),
    OptionDef::value("deadline", None, Value::NoEffect),
    OptionDef::value("licenses", Some('L'), Value::NoEffect),
    OptionDef::value("mincpus", None, Value::MinCpus),
    OptionDef::value("tmp", None, Value::NoEffect),
    OptionDef::value("uid", None, Value::NoEffect),
    OptionDef::value("gid", None, Value::NoEffect),
    OptionDef::value("priority", None, Value::NoEffect),
    OptionDef::value("nodefile", Some('F'), Value::NoEffect),
    OptionDef::value("export-file", None, Value::NoEffect),
    OptionDef::value("container", None, Value::NoEffect),
    OptionDef::value("bb", None, Value::NoEffect),
    OptionDef::value("bbf", None, Value::NoEffect),
    OptionDef::value("clusters", Some('M'), Value::NoEffect),
    OptionDef::value("cluster", None, Value::NoEffect),
    OptionDef::value("cluster-constraint", None, Value::NoEffect),
    OptionDef::value("gpus-per-socket", None, Value::NoEffect),
    OptionDef::value("ntasks-per-gpu", None, Value::NoEffect),
    OptionDef::value("ntasks-per-tres", None, Value::NoEffect),
];

/// Slurm 22.05 sbatch options corral refuses, each with why and what to do
/// instead: what the user is told.
const REFUSED: &[(&str, &str)] = &[
    (
        "deadline",
        "corral does not cancel jobs that cannot end by a deadline; give a time limit (--time) that ends in time",
    ),
    (
        "licenses",
        "corral counts no licenses; limit concurrent jobs with a QOS (MaxJobsPerUser, GrpTRES) instead",
    ),
    (
        "tmp",
        "corral does not track node-local disk; require nodes with a large local disk by a feature (--constraint)",
    ),
    (
        "uid",
        "corral submits as the user of your certificate; that user must submit the job",
    ),
    (
        "gid",
        "jobs run with their user's groups; that user must submit the job",
    ),
    (
        "priority",
        "a job's priority comes from the multifactor formula; lower your own with --nice",
    ),
    (
        "nodefile",
        "give the nodes as a hostlist with --nodelist (e.g. --nodelist=$(paste -sd, FILE))",
    ),
    (
        "export-file",
        "give the variables with --export=ALL,NAME=VALUE,...",
    ),
    (
        "container",
        "corral starts no OCI containers; start the container runtime in the batch script (e.g. apptainer exec IMAGE ...)",
    ),
    (
        "bb",
        "corral has no burst buffers; stage data in the batch script",
    ),
    (
        "bbf",
        "corral has no burst buffers; stage data in the batch script",
    ),
    (
        "clusters",
        "one set of controllers serves one cluster; point CORRAL_CLUSTER at the other cluster's controllers",
    ),
    (
        "cluster",
        "one set of controllers serves one cluster; point CORRAL_CLUSTER at the other cluster's controllers",
    ),
    (
        "cluster-constraint",
        "one set of controllers serves one cluster; point CORRAL_CLUSTER at the other cluster's controllers",
    ),
    (
        "gpus-per-socket",
        "corral places GPUs by node, not socket; use --gpus-per-node",
    ),
    (
        "ntasks-per-gpu",
        "give tasks per node with --ntasks-per-node and GPUs with --gpus-per-node",
    ),
    (
        "ntasks-per-tres",
        "give tasks per node with --ntasks-per-node and GPUs with --gpus-per-node",
    ),
];

/// The refusal of option `long`, if corral refuses it.
fn refusal(long: &str, option: &str) -> Option<FormatError> {
    let (_, why) = REFUSED.iter().find(|(name, _)| *name == long)?;
    Some(FormatError::new(
        FORMAT,
        option,
        format!("corral does not support --{long}: {why}"),
    ))
}

/// Why each option accepted without effect has none here: the warning the
/// user sees at submission.
const NO_EFFECT: &[(&str, &str)] = &[
    (
        "time-min",
        "corral schedules with the time limit (--time) only",
    ),
    (
        "wait-all-nodes",
        "corral's nodes need no boot, so there is nothing to wait for",
    ),
    ("hint", "corral does not bind tasks to cores"),
    ("overcommit", "corral does not bind tasks to cores"),
    (
        "open-mode",
        "output files are always opened for appending, so a requeued attempt continues its file",
    ),
    (
        "kill-on-invalid-dep",
        "a job whose dependency can never be met stays pending (DependencyNeverSatisfied) until cancelled",
    ),
    ("distribution", "tasks are laid out by block"),
    ("mem-bind", "corral does not bind memory"),
    (
        "gpu-bind",
        "GPUs are given through CUDA_VISIBLE_DEVICES per node",
    ),
    ("gpu-freq", "corral does not set GPU clocks"),
    ("cpu-freq", "corral does not set CPU clocks"),
    ("ntasks-per-core", "corral does not bind tasks to cores"),
    ("ntasks-per-socket", "corral does not bind tasks to cores"),
    ("sockets-per-node", "nodes are scheduled by CPU count"),
    ("cores-per-socket", "nodes are scheduled by CPU count"),
    ("threads-per-core", "nodes are scheduled by CPU count"),
    ("propagate", "resource limits are those of the agent"),
    ("profile", "corral does not profile jobs"),
    ("acctg-freq", "usage is sampled at the agents' own rate"),
    ("wckey", "corral keeps no workload characterization keys"),
    (
        "no-kill",
        "a failed node ends the job's attempt and requeues it",
    ),
    ("quiet", "sbatch prints only the job id line"),
    ("verbose", "sbatch prints only the job id line"),
    ("oversubscribe", "GPUs are never shared between jobs"),
    ("contiguous", "placement follows the topology (--switches)"),
    ("spread-job", "placement follows the topology (--switches)"),
    ("use-min-nodes", "jobs get the node count they ask for"),
    ("core-spec", "corral reserves no cores for system use"),
    ("thread-spec", "corral reserves no threads for system use"),
    ("reboot", "corral does not reboot nodes"),
    ("power", "corral manages no node power"),
    ("network", "corral configures no network switch resources"),
    ("delay-boot", "corral's nodes need no boot"),
    ("mcs-label", "corral has no MCS labels"),
    ("context", "corral sets no SELinux context"),
    ("extra-node-info", "nodes are scheduled by CPU count"),
    ("gres-flags", "corral does not bind GPUs to CPUs"),
    ("batch", "the batch script runs on the job's first node"),
    ("ignore-pbs", "corral reads no #PBS lines"),
    (
        "prefer",
        "preferred features are not weighed; require them with --constraint",
    ),
];

/// Long options of Slurm 22.05's sbatch missing from [`OPTIONS`]: they are
/// refused by name, but they take part in getopt's prefix matching so that a
/// prefix Slurm finds ambiguous is ambiguous here too.
const SLURM_ONLY: &[&str] = &["help", "usage", "version"];

/// The option a long name picks: its full name, or (as getopt allows) a
/// prefix of exactly one of sbatch's long options.
fn find_long_or_prefix(name: &str) -> Result<&'static OptionDef, FormatError> {
    if let Some(def) = find_long(name) {
        return Ok(def);
    }
    let option = format!("--{name}");
    if name.is_empty() {
        return Err(unknown_option(&option));
    }
    let mut matches: Vec<&str> = OPTIONS
        .iter()
        .map(|def| def.long)
        .chain(SLURM_ONLY.iter().copied())
        .filter(|long| long.starts_with(name))
        .collect();
    matches.sort_unstable();
    matches.dedup();
    match matches.as_slice() {
        [one] => find_long(one).ok_or_else(|| unknown_option(&option)),
        [] => Err(unknown_option(&option)),
        several => Err(FormatError::new(
            FORMAT,
            &option,
            format!(
                "option '{option}' is ambiguous; possibilities: {}",
                several
                    .iter()
                    .map(|s| format!("'--{s}'"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        )),
    }
}

/// Records a variable that option `long` sets in the job's environment.
fn set_variable(opts: &mut SbatchOptions, long: &str, name: &str, value: &str) {
    opts.slurm_variables
        .entry(long.to_string())
        .or_default()
        .insert(name.to_string(), value.to_string());
}

/// Forgets the variables option `long` set (it is given again).
fn clear_variables(opts: &mut SbatchOptions, long: &str) {
    opts.slurm_variables
        .insert(long.to_string(), BTreeMap::new());
}

impl SbatchOptions {
    /// The variables sbatch sets in the job's environment for the options
    /// given (an explicit `--threads-per-core` over the one `--hint` implies).
    pub fn job_variables(&self) -> BTreeMap<String, String> {
        let mut order: Vec<(&String, &BTreeMap<String, String>)> =
            self.slurm_variables.iter().collect();
        order.sort_by_key(|(long, _)| long.as_str() == "threads-per-core");
        order
            .into_iter()
            .flat_map(|(_, vars)| vars.iter().map(|(k, v)| (k.clone(), v.clone())))
            .collect()
    }
}

/// The warning for an option accepted without effect, by its long name.
fn no_effect(opts: &mut SbatchOptions, long: &str) {
    let why = NO_EFFECT
        .iter()
        .find(|(n, _)| *n == long)
        .map_or("it has no effect here", |(_, why)| why);
    opts.warnings
        .push(format!("--{long} is accepted but has no effect: {why}"));
}

fn find_long(name: &str) -> Option<&'static OptionDef> {
    OPTIONS.iter().find(|def| def.long == name)
}

fn find_short(letter: char) -> Option<&'static OptionDef> {
    OPTIONS.iter().find(|def| def.short == Some(letter))
}

// ---------------------------------------------------------------------------
// Walking the words

/// Applies the options at the start of `words`, stopping at the first word that
/// is not an option (or at `--`); returns how many words were used.
fn apply_options<S: AsRef<str>>(
    opts: &mut SbatchOptions,
    words: &[S],
    source: Source,
) -> Result<usize, FormatError> {
    let mut used = 0;
    while let Some(word) = words.get(used).map(AsRef::as_ref) {
        let next = words.get(used + 1).map(AsRef::as_ref);
        used += if let Some(long) = word.strip_prefix("--").filter(|l| !l.is_empty()) {
            apply_long(opts, long, next, source)?
        } else if let Some(letters) = word
            .strip_prefix('-')
            .filter(|l| !l.is_empty() && *l != "-")
        {
            apply_short(opts, letters, next, source)?
        } else {
            break;
        };
    }
    Ok(used)
}

/// Applies `--name`, `--name=value` or `--name value`; returns the words used.
fn apply_long(
    opts: &mut SbatchOptions,
    body: &str,
    next: Option<&str>,
    source: Source,
) -> Result<usize, FormatError> {
    let (name, inline) = match body.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (body, None),
    };
    if name.is_empty() {
        return Err(unknown_option(&format!("--{body}")));
    }
    let def = find_long_or_prefix(name)?;
    let option = format!("--{name}");
    if let Some(refused) = refusal(def.long, &option) {
        return Err(refused);
    }
    check_source(def, &option, source)?;
    match (def.arity, inline) {
        (Arity::Flag(_), Some(_)) => Err(FormatError::new(
            FORMAT,
            format!("--{body}"),
            format!("{option} takes no value"),
        )),
        (Arity::Flag(flag) | Arity::Optional(flag, _), None) => {
            apply_flag(opts, flag, def.long);
            Ok(1)
        }
        (Arity::Value(value) | Arity::Optional(_, value), Some(text)) => {
            apply_value(opts, value, &option, def.long, text)?;
            Ok(1)
        }
        (Arity::Value(value), None) => {
            let text = next.ok_or_else(|| missing_value(&option))?;
            apply_value(opts, value, &option, def.long, text)?;
            Ok(2)
        }
    }
}

/// Applies a word of short options (`-H`, `-N2`, `-N 2`, `-HN2`); returns the
/// words used.
fn apply_short(
    opts: &mut SbatchOptions,
    letters: &str,
    next: Option<&str>,
    source: Source,
) -> Result<usize, FormatError> {
    for (at, letter) in letters.char_indices() {
        let option = format!("-{letter}");
        let def = find_short(letter).ok_or_else(|| unknown_option(&option))?;
        if let Some(refused) = refusal(def.long, &option) {
            return Err(refused);
        }
        check_source(def, &option, source)?;
        let attached = letters.get(at + letter.len_utf8()..).unwrap_or_default();
        let value = match def.arity {
            Arity::Flag(flag) => {
                apply_flag(opts, flag, def.long);
                continue;
            }
            // getopt's optional argument: only attached (`-koff`), else the flag.
            Arity::Optional(flag, value) => {
                if attached.is_empty() {
                    apply_flag(opts, flag, def.long);
                    continue;
                }
                apply_value(opts, value, &option, def.long, attached)?;
                return Ok(1);
            }
            Arity::Value(value) => value,
        };
        if !attached.is_empty() {
            apply_value(opts, value, &option, def.long, attached)?;
            return Ok(1);
        }
        let text = next.ok_or_else(|| missing_value(&option))?;
        apply_value(opts, value, &option, def.long, text)?;
        return Ok(2);
    }
    Ok(1)
}

fn check_source(def: &OptionDef, option: &str, source: Source) -> Result<(), FormatError> {
    if def.command_line_only && source == Source::Directive {
        return Err(FormatError::new(
            FORMAT,
            option,
            format!("{option} is accepted only on the command line, not in #SBATCH lines"),
        ));
    }
    Ok(())
}

fn unknown_option(option: &str) -> FormatError {
    FormatError::new(FORMAT, option, "unknown option")
}

fn missing_value(option: &str) -> FormatError {
    FormatError::new(FORMAT, option, format!("{option} requires a value"))
}

// ---------------------------------------------------------------------------
// Applying options

fn apply_flag(opts: &mut SbatchOptions, flag: Flag, long: &str) {
    match flag {
        Flag::Requeue => opts.requeue = Some(true),
        Flag::NoRequeue => opts.requeue = Some(false),
        Flag::Exclusive => opts.exclusive = Some(true),
        Flag::Nice => opts.nice = Some(DEFAULT_NICE),
        Flag::Hold => opts.hold = Some(true),
        Flag::Parsable => opts.parsable = true,
        Flag::TestOnly => opts.test_only = true,
        Flag::Wait => opts.wait = true,
        Flag::GetUserEnv => set_variable(opts, long, "SLURM_GET_USER_ENV", "1"),
        Flag::Overcommit => {
            set_variable(opts, long, "SLURM_OVERCOMMIT", "1");
            no_effect(opts, long);
        }
        Flag::NoEffect => no_effect(opts, long),
    }
}

/// Parses `text` as the value of `option` and stores it.
fn apply_value(
    opts: &mut SbatchOptions,
    value: Value,
    option: &str,
    long: &str,
    text: &str,
) -> Result<(), FormatError> {
    if text.is_empty() {
        return Err(missing_value(option));
    }
    let owned = || Some(text.to_string());
    match value {
        Value::JobName => opts.job_name = owned(),
        Value::Account => opts.account = owned(),
        Value::Partition => opts.partition = owned(),
        Value::Qos => opts.qos = owned(),
        Value::Nodes => opts.nodes = Some(parse_nodes(text)?),
        Value::Ntasks => opts.ntasks = Some(parse_positive(option, text)?),
        Value::NtasksPerNode => opts.ntasks_per_node = Some(parse_positive(option, text)?),
        Value::CpusPerTask => opts.cpus_per_task = Some(parse_positive(option, text)?),
        Value::Mem => opts.mem_per_node_mb = Some(parse_memory_mb(text)?),
        Value::MemPerCpu => opts.mem_per_cpu_mb = Some(parse_memory_mb(text)?),
        Value::MemPerGpu => opts.mem_per_gpu_mb = Some(parse_memory_mb(text)?),
        Value::Time => opts.time_limit = Some(parse_time_limit(text)?),
        Value::TimeMin => {
            opts.time_min = Some(parse_time_limit(text)?);
            no_effect(opts, long);
        }
        Value::OpenMode => {
            let mode = match text.as_bytes().first() {
                Some(b'a' | b'A') => "a",
                Some(b't' | b'T') => "t",
                _ => {
                    return Err(FormatError::new(
                        FORMAT,
                        text,
                        "Invalid --open-mode specification: give append or truncate",
                    ));
                }
            };
            clear_variables(opts, long);
            set_variable(opts, long, "SLURM_OPEN_MODE", mode);
            no_effect(opts, long);
        }
        Value::Hint => {
            clear_variables(opts, long);
            set_variable(opts, long, "SLURM_HINT", text);
            if text.eq_ignore_ascii_case("nomultithread") {
                set_variable(opts, long, "SLURM_THREADS_PER_CORE", "1");
            }
            no_effect(opts, long);
        }
        Value::ThreadsPerCore => {
            let threads = parse_positive(option, text)?;
            set_variable(opts, long, "SLURM_THREADS_PER_CORE", &threads.to_string());
            no_effect(opts, long);
        }
        Value::NtasksPerCore => {
            let tasks = parse_positive(option, text)?;
            set_variable(opts, long, "SLURM_NTASKS_PER_CORE", &tasks.to_string());
            no_effect(opts, long);
        }
        Value::Distribution => {
            let (distribution, plane) = parse_distribution(text)?;
            clear_variables(opts, long);
            set_variable(opts, long, "SLURM_DISTRIBUTION", &distribution);
            if let Some(size) = plane {
                set_variable(opts, long, "SLURM_DIST_PLANESIZE", &size.to_string());
            }
            no_effect(opts, long);
        }
        Value::NoEffect => no_effect(opts, long),
        Value::Output => opts.output = owned(),
        Value::Error => opts.error = owned(),
        Value::Input => opts.input = owned(),
        Value::Chdir => opts.chdir = owned(),
        Value::Gpus => opts.gpus = Some(parse_gpu_count(text)?),
        Value::GpusPerNode => opts.gpus_per_node = Some(parse_gpu_count(text)?),
        Value::Gres => opts.gpus_per_node = Some(parse_gres(text)?),
        Value::GpusPerTask => opts.gpus_per_task = Some(parse_gpu_count(text)?),
        Value::CpusPerGpu => opts.cpus_per_gpu = Some(parse_positive(option, text)?),
        Value::Array => opts.array = Some(parse_array(text, MAX_ARRAY_TASKS)?),
        Value::Dependency => {
            opts.dependency = Some(parse_dependency(text)?);
            set_variable(opts, long, "SLURM_JOB_DEPENDENCY", text);
        }
        Value::Signal => opts.signal = Some(parse_signal_spec(text)?),
        Value::Exclusive => opts.exclusive = Some(parse_exclusive(text)?),
        Value::Export => {
            opts.export = Some(parse_export(text)?);
            // As sbatch: anything but plain ALL is passed on, and asks the
            // node for the user's login environment.
            clear_variables(opts, long);
            if !text.eq_ignore_ascii_case("ALL") {
                set_variable(opts, long, "SLURM_EXPORT_ENV", text);
                set_variable(opts, long, "SLURM_GET_USER_ENV", "1");
            }
        }
        Value::Nice => opts.nice = Some(parse_nice(text)?),
        Value::Switches => opts.switches = Some(parse_switches(text)?),
        Value::Constraint => opts.constraint = parse_constraint(text)?,
        Value::Reservation => opts.reservation = owned(),
        Value::Nodelist => opts.nodelist = owned(),
        Value::Exclude => opts.exclude = owned(),
        Value::Comment => opts.comment = owned(),
        Value::MailType => opts.mail_type = opts.mail_type.union(MailTypes::parse(text)?),
        Value::MailUser => opts.mail_user = Some(super::mail_user::parse(text)?),
        Value::Wrap => opts.wrap = owned(),
        Value::GetUserEnv => set_variable(opts, long, "SLURM_GET_USER_ENV", "1"),
        Value::Begin => opts.begin = Some(parse_begin(text)?),
        Value::MinCpus => opts.mincpus = Some(parse_positive(option, text)?),
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Option values

/// `-m/--distribution`: `block`, `cyclic`, `arbitrary`, `plane=N` or `*`,
/// then up to two levels of `block`, `cyclic`, `fcyclic` or `*` after `:`, and
/// `,Pack` or `,NoPack`, case-insensitive as Slurm reads them. Returns the
/// form `SLURM_DISTRIBUTION` takes (lowercase, `plane` without its size) and
/// the plane size.
fn parse_distribution(text: &str) -> Result<(String, Option<u32>), FormatError> {
    let invalid = || {
        FormatError::new(
            FORMAT,
            text,
            "Invalid --distribution specification: give block, cyclic, plane=N or arbitrary, \
             optionally followed by :block, :cyclic or :fcyclic",
        )
    };
    let lower = text.to_ascii_lowercase();
    let (levels, pack) = match lower.split_once(',') {
        Some((levels, pack)) => (levels, Some(pack)),
        None => (lower.as_str(), None),
    };
    if pack.is_some_and(|p| p != "pack" && p != "nopack") {
        return Err(invalid());
    }
    let mut parts = levels.split(':');
    let first = parts.next().unwrap_or_default();
    let (first, plane) = match first.split_once('=') {
        Some(("plane", size)) => (
            "plane",
            Some(
                size.parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(invalid)?,
            ),
        ),
        None if ["block", "cyclic", "arbitrary", "*"].contains(&first) => (first, None),
        _ => return Err(invalid()),
    };
    let rest: Vec<&str> = parts.collect();
    if rest.len() > 2
        || rest
            .iter()
            .any(|level| !["block", "cyclic", "fcyclic", "*"].contains(level))
    {
        return Err(invalid());
    }
    let mut distribution = first.to_string();
    for level in rest {
        distribution.push(':');
        distribution.push_str(level);
    }
    Ok((distribution, plane))
}

/// A whole number above zero that fits in `u32`.
fn parse_positive(option: &str, text: &str) -> Result<u32, FormatError> {
    let number = text
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| text.parse::<u32>().ok())
        .flatten()
        .filter(|n| *n > 0);
    number.ok_or_else(|| {
        FormatError::new(
            FORMAT,
            text,
            format!("{option} takes a whole number above zero"),
        )
    })
}

/// `--nodes`: `N`, or `N-N` with equal ends.
fn parse_nodes(text: &str) -> Result<u32, FormatError> {
    let Some((min, max)) = text.split_once('-') else {
        return parse_positive("--nodes", text);
    };
    let min = parse_positive("--nodes", or_whole(min, text))?;
    let max = parse_positive("--nodes", or_whole(max, text))?;
    if min != max {
        return Err(FormatError::new(
            FORMAT,
            text,
            "node ranges are not supported; give one node count such as --nodes=4",
        ));
    }
    Ok(min)
}

/// `piece`, or `whole` when `piece` is empty, so that errors never name an empty token.
fn or_whole<'a>(piece: &'a str, whole: &'a str) -> &'a str {
    if piece.is_empty() { whole } else { piece }
}

/// `--exclusive=user|mcs|topo`, all read as exclusive.
fn parse_exclusive(text: &str) -> Result<bool, FormatError> {
    if ["user", "mcs", "topo"]
        .iter()
        .any(|mode| mode.eq_ignore_ascii_case(text))
    {
        return Ok(true);
    }
    Err(FormatError::new(
        FORMAT,
        text,
        "--exclusive takes no value or one of user, mcs, topo",
    ))
}

/// `--nice=N`, with N between -2147483645 and 2147483645.
fn parse_nice(text: &str) -> Result<i32, FormatError> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    let in_range = (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse::<i64>().ok())
        .flatten()
        .filter(|n| (-MAX_NICE..=MAX_NICE).contains(n))
        .and_then(|n| i32::try_from(n).ok());
    in_range.ok_or_else(|| {
        FormatError::new(
            FORMAT,
            text,
            format!("--nice takes a whole number from -{MAX_NICE} to {MAX_NICE}"),
        )
    })
}

/// `--switches=COUNT[@MAX_WAIT]`, the wait in the time-limit format.
fn parse_switches(text: &str) -> Result<SwitchesSpec, FormatError> {
    let (count, wait) = match text.split_once('@') {
        Some((count, wait)) => (count, Some(wait)),
        None => (text, None),
    };
    let count = parse_positive("--switches", or_whole(count, text))?;
    let max_wait_seconds = match wait {
        None => None,
        Some("") => {
            return Err(FormatError::new(
                FORMAT,
                text,
                "--switches needs a time after '@', as in 2@1:00:00",
            ));
        }
        Some(wait) => match parse_duration(wait)? {
            TimeLimit::Unlimited => None,
            TimeLimit::Seconds(seconds) => Some(seconds),
        },
    };
    Ok(SwitchesSpec {
        count,
        max_wait_seconds,
    })
}

/// `--constraint=a&b` or `a,b`: features that must all be present.
pub fn parse_constraint(text: &str) -> Result<Vec<String>, FormatError> {
    text.split(['&', ','])
        .map(|feature| {
            if feature.is_empty() {
                return Err(FormatError::new(
                    FORMAT,
                    text,
                    "empty feature in --constraint",
                ));
            }
            let plain = feature
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
            if !plain {
                return Err(FormatError::new(
                    FORMAT,
                    feature,
                    "--constraint accepts only feature names joined by '&' (or ','); \
                     OR, counts, brackets and negation are not supported",
                ));
            }
            Ok(feature.to_string())
        })
        .collect()
}

/// `--export`: `ALL`, `NONE`, `ALL,NAME=value,...` or `NAME,NAME=value,...`.
fn parse_export(text: &str) -> Result<ExportSpec, FormatError> {
    let mut all = false;
    let mut none = false;
    let mut names = Vec::new();
    let mut set = BTreeMap::new();
    for item in text.split(',') {
        if item.eq_ignore_ascii_case("ALL") {
            all = true;
        } else if item.eq_ignore_ascii_case("NONE") {
            none = true;
        } else if let Some((name, value)) = item.split_once('=') {
            check_variable_name(text, name)?;
            set.insert(name.to_string(), value.to_string());
        } else {
            check_variable_name(text, item)?;
            names.push(item.to_string());
        }
    }
    if none && (all || !names.is_empty() || !set.is_empty()) {
        return Err(FormatError::new(
            FORMAT,
            text,
            "--export=NONE cannot be combined with other entries; \
             list the variables alone to export only those",
        ));
    }
    Ok(if none {
        ExportSpec::None
    } else if all {
        ExportSpec::All { set }
    } else {
        ExportSpec::Only { names, set }
    })
}

/// An environment variable name: a letter or `_`, then letters, digits or `_`.
fn check_variable_name(text: &str, name: &str) -> Result<(), FormatError> {
    if name.is_empty() {
        return Err(FormatError::new(
            FORMAT,
            text,
            "empty entry or variable name in --export",
        ));
    }
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(FormatError::new(
            FORMAT,
            name,
            "not a valid environment variable name for --export",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::signal::Signal;
    use proptest::prelude::*;

    fn args(line: &str) -> Result<(SbatchOptions, Vec<String>), FormatError> {
        let words: Vec<&str> = line.split_whitespace().collect();
        parse_args(&words)
    }

    fn opts(line: &str) -> SbatchOptions {
        let (opts, rest) = args(line).unwrap();
        assert!(rest.is_empty(), "{line}: left over {rest:?}");
        opts
    }

    fn args_err(line: &str) -> FormatError {
        args(line).unwrap_err()
    }

    fn script(body: &str) -> Result<SbatchOptions, FormatError> {
        parse_script_directives(&format!("#!/bin/bash\n{body}"))
    }

    fn gpus(gpu_type: Option<&str>, count: u32) -> GpuRequest {
        GpuRequest {
            gpu_type: gpu_type.map(str::to_string),
            count,
        }
    }

    // -- scripts --------------------------------------------------------------

    const TRAINING_SCRIPT: &str = "#!/bin/bash
#SBATCH --job-name=llama
#SBATCH --nodes=4
#SBATCH --gpus-per-node=h100:8
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=96
#SBATCH --mem=0
#SBATCH --time=2-00:00:00
#SBATCH --output=logs/%x-%j.out
#SBATCH --signal=B:USR1@300
#SBATCH --requeue

# Rendezvous on the first node of the allocation.
export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)
#SBATCH --time=5
srun torchrun --nnodes=4 --nproc-per-node=8 train.py --config llama.yaml
";

    #[test]
    fn realistic_training_script() {
        let parsed = parse_script_directives(TRAINING_SCRIPT).unwrap();
        let expected = SbatchOptions {
            job_name: Some("llama".into()),
            nodes: Some(4),
            gpus_per_node: Some(gpus(Some("h100"), 8)),
            ntasks_per_node: Some(1),
            cpus_per_task: Some(96),
            mem_per_node_mb: Some(0),
            time_limit: Some(TimeLimit::Seconds(2 * 86_400)),
            output: Some("logs/%x-%j.out".into()),
            signal: Some(SignalSpec {
                signal: Signal::USR1,
                seconds_before: 300,
                batch_only: true,
                on_reservation_end: false,
            }),
            requeue: Some(true),
            ..SbatchOptions::default()
        };
        assert_eq!(parsed, expected);
    }

    #[test]
    fn directives_after_the_first_command_are_ignored() {
        let parsed = script("#SBATCH -N 2\necho hi\n#SBATCH -N 3\n#SBATCH --frobnicate\n").unwrap();
        assert_eq!(parsed.nodes, Some(2));
        let parsed = script("  srun true\n#SBATCH -N 3\n").unwrap();
        assert_eq!(parsed, SbatchOptions::default());
    }

    #[test]
    fn blank_and_comment_lines_are_skipped() {
        let parsed =
            script("\n   \n# a comment\n  # indented comment\n#SBATCH -J a\n\t\n#SBATCH -N 2\n")
                .unwrap();
        assert_eq!(parsed.job_name.as_deref(), Some("a"));
        assert_eq!(parsed.nodes, Some(2));
    }

    #[test]
    fn only_exact_sbatch_prefix_followed_by_whitespace_is_a_directive() {
        for line in [
            "#sbatch -N 2",
            "#SBATCH-N 2",
            "#SBATCHX -N 2",
            " #SBATCH -N 2",
            "##SBATCH -N 2",
            "# SBATCH -N 2",
        ] {
            assert_eq!(script(line), Ok(SbatchOptions::default()), "{line}");
        }
        assert_eq!(script("#SBATCH\t-N 2").unwrap().nodes, Some(2));
        assert_eq!(script("#SBATCH").unwrap(), SbatchOptions::default());
        assert_eq!(script("#SBATCH   ").unwrap(), SbatchOptions::default());
    }

    #[test]
    fn several_options_on_one_line() {
        let parsed = script("#SBATCH -N 2 -t 10 --job-name=x -H\n").unwrap();
        assert_eq!(parsed.nodes, Some(2));
        assert_eq!(parsed.time_limit, Some(TimeLimit::Seconds(600)));
        assert_eq!(parsed.job_name.as_deref(), Some("x"));
        assert_eq!(parsed.hold, Some(true));
    }

    #[test]
    fn quoted_values() {
        let parsed = script(
            "#SBATCH --job-name=\"my job\" --comment 'a # not a comment' -o \"out dir/%j.log\"",
        )
        .unwrap();
        assert_eq!(parsed.job_name.as_deref(), Some("my job"));
        assert_eq!(parsed.comment.as_deref(), Some("a # not a comment"));
        assert_eq!(parsed.output.as_deref(), Some("out dir/%j.log"));
        let parsed = script("#SBATCH -J 'it'\"'\"'s'").unwrap();
        assert_eq!(parsed.job_name.as_deref(), Some("it's"));
    }

    #[test]
    fn trailing_comments() {
        let parsed = script("#SBATCH -N 2 # two nodes -t 5\n#SBATCH --comment=a#b #c").unwrap();
        assert_eq!(parsed.nodes, Some(2));
        assert_eq!(parsed.time_limit, None);
        assert_eq!(parsed.comment.as_deref(), Some("a#b"));
        assert_eq!(script("#SBATCH # -N 2").unwrap(), SbatchOptions::default());
    }

    #[test]
    fn later_directives_override_earlier_ones() {
        let parsed = script("#SBATCH -t 10\n#SBATCH --time=20 -J a\n#SBATCH -J b\n#SBATCH --requeue\n#SBATCH --no-requeue").unwrap();
        assert_eq!(parsed.time_limit, Some(TimeLimit::Seconds(1200)));
        assert_eq!(parsed.job_name.as_deref(), Some("b"));
        assert_eq!(parsed.requeue, Some(false));
        let parsed = script("#SBATCH -C a&b\n#SBATCH -C c").unwrap();
        assert_eq!(parsed.constraint, vec!["c".to_string()]);
    }

    #[test]
    fn script_needs_an_interpreter_line() {
        for text in [
            "",
            "#SBATCH -N 2\n",
            "echo hi\n",
            " #!/bin/bash\n",
            "\n#!/bin/bash\n",
        ] {
            let err = parse_script_directives(text).unwrap_err();
            assert!(
                err.reason.contains("interpreter"),
                "{text:?}: {}",
                err.reason
            );
            assert!(err.reason.starts_with("line 1:"), "{}", err.reason);
        }
        assert_eq!(
            parse_script_directives("#!/bin/sh"),
            Ok(SbatchOptions::default())
        );
        assert_eq!(
            parse_script_directives("echo hi\n").unwrap_err().token,
            "echo hi"
        );
    }

    #[test]
    fn prefixes_aliases_and_options_without_effect() {
        let (opts, _) = parse_args(&["--err=e.log", "--tasks-per-node=4", "--job=x"]).unwrap();
        assert_eq!(opts.error.as_deref(), Some("e.log"));
        assert_eq!(opts.ntasks_per_node, Some(4));
        assert_eq!(opts.job_name.as_deref(), Some("x"));
        assert!(opts.warnings.is_empty());
        let err = parse_args(&["--gpu=1"]).unwrap_err();
        assert!(err.reason.contains("ambiguous"), "{err}");
        let (opts, _) = parse_args(&[
            "--hint=nomultithread",
            "-O",
            "--time-min=30",
            "--open-mode=append",
            "--wait-all-nodes=1",
            "--kill-on-invalid-dep=yes",
            "--time=-1",
        ])
        .unwrap();
        assert_eq!(opts.time_limit, Some(TimeLimit::Unlimited));
        assert_eq!(opts.warnings.len(), 6, "{:?}", opts.warnings);
        assert!(opts.warnings[1].starts_with("--overcommit is accepted but has no effect: "));
        assert!(parse_args(&["--time-min=soon"]).is_err());
        assert!(
            parse_args(&["--frobnicate=now"])
                .unwrap_err()
                .reason
                .contains("unknown option")
        );
    }

    #[test]
    fn every_slurm_option_is_honoured_warned_about_or_refused_with_a_reason() {
        // Refused by name, with what to do instead, long or short, on the
        // command line or in #SBATCH lines.
        for line in [
            "--deadline=now+1hour",
            "--tmp=10G",
            "-L matlab",
            "--clusters=c2",
        ] {
            let words: Vec<&str> = line.split(' ').collect();
            let err = parse_args(&words).unwrap_err();
            assert!(
                err.reason.starts_with("corral does not support --"),
                "{line}: {err}"
            );
            assert!(
                err.reason.contains("; "),
                "{line}: a reason and an alternative: {err}"
            );
        }
        let err = parse_script_directives("#!/bin/sh\n#SBATCH --licenses=matlab\n").unwrap_err();
        assert!(err.reason.contains("QOS"), "{err}");
        let (opts, _) = parse_args(&["-b", "now+1hour", "--mincpus", "8"]).unwrap();
        assert!(opts.begin.is_some() && opts.mincpus == Some(8));
        let err = parse_args(&["--begin=soon"]).unwrap_err();
        assert!(
            err.reason.starts_with("Invalid --begin specification"),
            "{err}"
        );
        // `--wait` is not taken for a prefix of `--wait-all-nodes`.
        let (opts, _) = parse_args(&["--wait", "-W"]).unwrap();
        assert!(opts.wait && opts.warnings.is_empty());
        let (opts, _) = parse_args(&["--get-user-env", "--get-user-env=10L"]).unwrap();
        assert_eq!(opts.job_variables()["SLURM_GET_USER_ENV"], "1");
        let (opts, _) =
            parse_args(&["-S", "2", "--reboot", "--prefer=ib", "--ignore-pbs"]).unwrap();
        assert_eq!(opts.warnings.len(), 4, "{:?}", opts.warnings);
        assert!(
            opts.warnings[2].contains("--constraint"),
            "{:?}",
            opts.warnings
        );
        // Every option of Slurm 22.05's sbatch is known: none falls through to
        // getopt's "unrecognized option".
        for long in SLURM_22_05_SBATCH_OPTIONS {
            if ["help", "usage", "version"].contains(long) {
                continue;
            }
            assert!(find_long(long).is_some(), "--{long} is not in the table");
        }
    }

    /// Every long option of Slurm 22.05's sbatch (its man page and
    /// `slurm_opt.c`).
    const SLURM_22_05_SBATCH_OPTIONS: &[&str] = &[
        "account",
        "acctg-freq",
        "array",
        "batch",
        "bb",
        "bbf",
        "begin",
        "chdir",
        "cluster-constraint",
        "clusters",
        "comment",
        "constraint",
        "container",
        "context",
        "contiguous",
        "core-spec",
        "cores-per-socket",
        "cpu-freq",
        "cpus-per-gpu",
        "cpus-per-task",
        "deadline",
        "delay-boot",
        "dependency",
        "distribution",
        "error",
        "exclude",
        "exclusive",
        "export",
        "export-file",
        "extra-node-info",
        "get-user-env",
        "gid",
        "gpu-bind",
        "gpu-freq",
        "gpus",
        "gpus-per-node",
        "gpus-per-socket",
        "gpus-per-task",
        "gres",
        "gres-flags",
        "help",
        "hint",
        "hold",
        "ignore-pbs",
        "input",
        "job-name",
        "kill-on-invalid-dep",
        "licenses",
        "mail-type",
        "mail-user",
        "mcs-label",
        "mem",
        "mem-bind",
        "mem-per-cpu",
        "mem-per-gpu",
        "mincpus",
        "network",
        "nice",
        "no-kill",
        "no-requeue",
        "nodefile",
        "nodelist",
        "nodes",
        "ntasks",
        "ntasks-per-core",
        "ntasks-per-gpu",
        "ntasks-per-node",
        "ntasks-per-socket",
        "open-mode",
        "output",
        "overcommit",
        "oversubscribe",
        "parsable",
        "partition",
        "power",
        "prefer",
        "priority",
        "profile",
        "propagate",
        "qos",
        "quiet",
        "reboot",
        "requeue",
        "reservation",
        "signal",
        "sockets-per-node",
        "spread-job",
        "switches",
        "test-only",
        "thread-spec",
        "threads-per-core",
        "time",
        "time-min",
        "tmp",
        "uid",
        "usage",
        "use-min-nodes",
        "verbose",
        "version",
        "wait",
        "wait-all-nodes",
        "wckey",
        "wrap",
    ];

    #[test]
    fn dos_line_breaks_are_refused() {
        let err = parse_script_directives("#!/bin/bash\n#SBATCH -N 2\r\necho\r\n").unwrap_err();
        assert_eq!(err.token, "\\r\\n");
        assert!(err.reason.starts_with("line 2:"), "{}", err.reason);
        assert!(
            parse_script_directives("#!/bin/bash\r\n")
                .unwrap_err()
                .reason
                .starts_with("line 1:")
        );
    }

    #[test]
    fn directive_errors_name_line_and_token() {
        let cases = [
            ("#SBATCH --frobnicate", "--frobnicate", 2),
            ("\n\n#SBATCH -N 2\n#SBATCH --time=1-25", "25", 5),
            ("#SBATCH --mem=16X", "X", 2),
            ("#SBATCH -N", "-N", 2),
            ("#SBATCH --job-name", "--job-name", 2),
            ("#SBATCH -N 2 script.sh", "script.sh", 2),
            ("#SBATCH -N 2 -- -t 5", "--", 2),
            ("#SBATCH --job-name='unterminated", "'unterminated", 2),
            ("#SBATCH --job-name=\"a\" \"b", "\"b", 2),
            ("# ok\n#SBATCH --wrap=true", "--wrap", 3),
            ("#SBATCH --parsable", "--parsable", 2),
            ("#SBATCH --test-only", "--test-only", 2),
            ("#SBATCH -J ''", "-J", 2),
        ];
        for (body, token, line) in cases {
            let err = script(body).unwrap_err();
            assert_eq!(err.token, token, "{body}");
            assert!(
                err.reason.starts_with(&format!("line {line}: ")),
                "{body}: {}",
                err.reason
            );
        }
        let err = script("#SBATCH --wrap=true").unwrap_err();
        assert!(
            err.reason.contains("only on the command line"),
            "{}",
            err.reason
        );
    }

    // -- command line ---------------------------------------------------------

    #[test]
    fn args_stop_at_the_script_and_keep_the_rest_verbatim() {
        let (parsed, rest) = args("-N 2 job.sh -N 3 --time=5 x").unwrap();
        assert_eq!(parsed.nodes, Some(2));
        assert_eq!(rest, vec!["job.sh", "-N", "3", "--time=5", "x"]);
        let (parsed, rest) = args("--time 5 -- -weird-name.sh arg").unwrap();
        assert_eq!(parsed.time_limit, Some(TimeLimit::Seconds(300)));
        assert_eq!(rest, vec!["-weird-name.sh", "arg"]);
        let (_, rest) = args("-H - a").unwrap();
        assert_eq!(rest, vec!["-", "a"]);
        let (parsed, rest) = args("").unwrap();
        assert_eq!(
            (parsed, rest),
            (SbatchOptions::default(), Vec::<String>::new())
        );
        let (_, rest) = args("-- --").unwrap();
        assert_eq!(rest, vec!["--"]);
    }

    #[test]
    fn arguments_with_spaces_are_kept_whole() {
        let (parsed, rest) =
            parse_args(&["--wrap", "srun hostname && sleep 1", "--job-name=a b"]).unwrap();
        assert_eq!(parsed.wrap.as_deref(), Some("srun hostname && sleep 1"));
        assert_eq!(parsed.job_name.as_deref(), Some("a b"));
        assert!(rest.is_empty());
        let owned = vec!["-J".to_string(), "x".to_string()];
        assert_eq!(parse_args(&owned).unwrap().0.job_name.as_deref(), Some("x"));
    }

    #[test]
    fn short_forms_separate_and_attached() {
        let check = |flag: &str, value: &str, expect: &dyn Fn(&SbatchOptions) -> bool| {
            for line in [format!("{flag} {value}"), format!("{flag}{value}")] {
                let parsed = opts(&line);
                assert!(expect(&parsed), "{line}: {parsed:?}");
            }
        };
        check("-J", "train", &|o| o.job_name.as_deref() == Some("train"));
        check("-A", "proj", &|o| o.account.as_deref() == Some("proj"));
        check("-p", "gpu", &|o| o.partition.as_deref() == Some("gpu"));
        check("-q", "high", &|o| o.qos.as_deref() == Some("high"));
        check("-N", "2", &|o| o.nodes == Some(2));
        check("-n", "16", &|o| o.ntasks == Some(16));
        check("-c", "8", &|o| o.cpus_per_task == Some(8));
        check("-t", "1:00:00", &|o| {
            o.time_limit == Some(TimeLimit::Seconds(3600))
        });
        check("-o", "out.%j", &|o| o.output.as_deref() == Some("out.%j"));
        check("-e", "err.%j", &|o| o.error.as_deref() == Some("err.%j"));
        check("-i", "in.txt", &|o| o.input.as_deref() == Some("in.txt"));
        check("-D", "/scratch", &|o| {
            o.chdir.as_deref() == Some("/scratch")
        });
        check("-G", "h100:4", &|o| o.gpus == Some(gpus(Some("h100"), 4)));
        check("-a", "0-9%2", &|o| {
            o.array
                .as_ref()
                .is_some_and(|a| a.indices.len() == 10 && a.throttle == Some(2))
        });
        check("-d", "afterok:5", &|o| {
            o.dependency
                .as_ref()
                .is_some_and(|d| d.conditions.len() == 1)
        });
        check("-C", "a100&ib", &|o| o.constraint == ["a100", "ib"]);
        check("-w", "node[1-2]", &|o| {
            o.nodelist.as_deref() == Some("node[1-2]")
        });
        check("-x", "node3", &|o| o.exclude.as_deref() == Some("node3"));
        assert_eq!(opts("-H").hold, Some(true));
    }

    #[test]
    fn short_flags_bundle_with_following_options() {
        let parsed = opts("-HN2");
        assert_eq!((parsed.hold, parsed.nodes), (Some(true), Some(2)));
        let parsed = opts("-HJ job");
        assert_eq!(
            (parsed.hold, parsed.job_name.as_deref()),
            (Some(true), Some("job"))
        );
        assert_eq!(args_err("-HZ").token, "-Z");
        assert_eq!(args_err("-H-").token, "--");
    }

    #[test]
    fn long_forms_with_equals_and_separate_values() {
        let cases: [(&str, &str); 18] = [
            ("--job-name", "a"),
            ("--account", "a"),
            ("--partition", "a"),
            ("--qos", "a"),
            ("--nodes", "3"),
            ("--ntasks", "3"),
            ("--ntasks-per-node", "3"),
            ("--cpus-per-task", "3"),
            ("--mem", "3G"),
            ("--mem-per-cpu", "3G"),
            ("--mem-per-gpu", "3G"),
            ("--time", "3"),
            ("--gpus", "3"),
            ("--gpus-per-node", "3"),
            ("--gres", "gpu:3"),
            ("--gpus-per-task", "3"),
            ("--cpus-per-gpu", "3"),
            ("--signal", "USR1"),
        ];
        for (option, value) in cases {
            let joined = opts(&format!("{option}={value}"));
            let separate = opts(&format!("{option} {value}"));
            assert_eq!(joined, separate, "{option}");
            assert_ne!(joined, SbatchOptions::default(), "{option}");
        }
    }

    #[test]
    fn every_value_option_lands_in_its_field() {
        let parsed = opts(
            "--job-name=j --account=acct --partition=part --qos=q --nodes=2 --ntasks=8 \
             --ntasks-per-node=4 --cpus-per-task=2 --mem=64G --mem-per-cpu=2G --mem-per-gpu=80G \
             --time=30 --output=o --error=e --input=i --chdir=/d --gpus=8 --gpus-per-node=4 \
             --gpus-per-task=1 --cpus-per-gpu=12 --array=1-3 --dependency=singleton \
             --signal=R:TERM@10 --exclusive --export=NONE --nice=-5 --hold --switches=1@10 \
             --constraint=x --reservation=r --nodelist=n1 --exclude=n2 --comment=c \
             --mail-type=END --mail-user=me@example.org --wrap=true --parsable --test-only --wait \
             --begin=now+60 --mincpus=16",
        );
        let expected = SbatchOptions {
            job_name: Some("j".into()),
            account: Some("acct".into()),
            partition: Some("part".into()),
            qos: Some("q".into()),
            nodes: Some(2),
            ntasks: Some(8),
            ntasks_per_node: Some(4),
            cpus_per_task: Some(2),
            mem_per_node_mb: Some(64 * 1024),
            mem_per_cpu_mb: Some(2048),
            mem_per_gpu_mb: Some(80 * 1024),
            time_limit: Some(TimeLimit::Seconds(1800)),
            output: Some("o".into()),
            error: Some("e".into()),
            input: Some("i".into()),
            chdir: Some("/d".into()),
            gpus: Some(gpus(None, 8)),
            gpus_per_node: Some(gpus(None, 4)),
            gpus_per_task: Some(gpus(None, 1)),
            cpus_per_gpu: Some(12),
            array: Some(ArraySpec {
                indices: vec![1, 2, 3],
                throttle: None,
            }),
            dependency: Some(DependencySpec {
                any_of: false,
                conditions: vec![],
                singleton: true,
            }),
            requeue: None,
            signal: Some(SignalSpec {
                signal: Signal::TERM,
                seconds_before: 10,
                batch_only: false,
                on_reservation_end: true,
            }),
            exclusive: Some(true),
            export: Some(ExportSpec::None),
            nice: Some(-5),
            hold: Some(true),
            switches: Some(SwitchesSpec {
                count: 1,
                max_wait_seconds: Some(600),
            }),
            constraint: vec!["x".into()],
            reservation: Some("r".into()),
            nodelist: Some("n1".into()),
            exclude: Some("n2".into()),
            comment: Some("c".into()),
            mail_type: MailTypes::parse("END").unwrap_or_default(),
            mail_user: Some("me@example.org".into()),
            time_min: None,
            slurm_variables: BTreeMap::from([
                (
                    "dependency".to_string(),
                    BTreeMap::from([("SLURM_JOB_DEPENDENCY".to_string(), "singleton".to_string())]),
                ),
                (
                    "export".to_string(),
                    BTreeMap::from([
                        ("SLURM_EXPORT_ENV".to_string(), "NONE".to_string()),
                        ("SLURM_GET_USER_ENV".to_string(), "1".to_string()),
                    ]),
                ),
            ]),
            wrap: Some("true".into()),
            parsable: true,
            test_only: true,
            wait: true,
            begin: Some(super::super::begin::parse_begin("now+60").unwrap()),
            mincpus: Some(16),
            warnings: Vec::new(),
        };
        assert_eq!(parsed, expected);
    }

    #[test]
    fn value_may_start_with_a_dash() {
        assert_eq!(opts("-J -odd").job_name.as_deref(), Some("-odd"));
        assert_eq!(opts("--comment --x").comment.as_deref(), Some("--x"));
    }

    #[test]
    fn unknown_options_and_missing_values() {
        let cases = [
            ("--frobnicate", "--frobnicate"),
            ("--frobnicate=3", "--frobnicate"),
            ("-Z", "-Z"),
            ("--job", "--job"),
            ("--gpu=1", "--gpu"),
            ("--Nodes=2", "--Nodes"),
            ("--time", "--time"),
            ("-t", "-t"),
            ("--time=", "--time"),
            ("-N 2 --job-name", "--job-name"),
            ("--requeue=yes", "--requeue=yes"),
            ("--hold=1", "--hold=1"),
            ("--parsable=x", "--parsable=x"),
            ("--nice=", "--nice"),
            ("--exclusive=", "--exclusive"),
            ("--=x", "--=x"),
        ];
        for (line, token) in cases {
            let err = args_err(line);
            assert_eq!(err.token, token, "{line}");
            assert_eq!(err.format, "sbatch option", "{line}");
        }
        assert!(args_err("--time").reason.contains("requires a value"));
        assert!(args_err("--frobnicate").reason.contains("unknown option"));
    }

    #[test]
    fn flags() {
        assert_eq!(opts("--requeue").requeue, Some(true));
        assert_eq!(opts("--no-requeue").requeue, Some(false));
        assert_eq!(opts("--requeue --no-requeue").requeue, Some(false));
        assert_eq!(opts("--hold").hold, Some(true));
        assert!(opts("--parsable").parsable);
        assert!(opts("--test-only").test_only);
        assert_eq!(opts("--exclusive").exclusive, Some(true));
        for mode in ["user", "mcs", "topo", "USER"] {
            assert_eq!(opts(&format!("--exclusive={mode}")).exclusive, Some(true));
        }
        assert_eq!(args_err("--exclusive=everyone").token, "everyone");
        let (parsed, rest) = args("--exclusive user").unwrap();
        assert_eq!(
            (parsed.exclusive, rest),
            (Some(true), vec!["user".to_string()])
        );
    }

    #[test]
    fn nice() {
        assert_eq!(opts("--nice").nice, Some(100));
        assert_eq!(opts("--nice=0").nice, Some(0));
        assert_eq!(opts("--nice=-5").nice, Some(-5));
        assert_eq!(opts("--nice=+7").nice, Some(7));
        assert_eq!(opts("--nice=2147483645").nice, Some(2_147_483_645));
        assert_eq!(opts("--nice=-2147483645").nice, Some(-2_147_483_645));
        for bad in [
            "2147483646",
            "-2147483646",
            "99999999999999999999",
            "x",
            "-",
            "+",
            "1.5",
            "--1",
        ] {
            assert_eq!(args_err(&format!("--nice={bad}")).token, bad, "{bad}");
        }
        // `--nice -5` does not take the value: -5 is then an unknown option.
        assert_eq!(args_err("--nice -5").token, "-5");
    }

    #[test]
    fn node_counts() {
        assert_eq!(opts("-N 4").nodes, Some(4));
        assert_eq!(opts("--nodes=4-4").nodes, Some(4));
        let err = args_err("--nodes=2-4");
        assert_eq!(err.token, "2-4");
        assert!(
            err.reason.contains("node ranges are not supported"),
            "{}",
            err.reason
        );
        for (bad, token) in [
            ("0", "0"),
            ("-1", "-1"),
            ("x", "x"),
            ("2-", "2-"),
            ("-2", "-2"),
            ("2-x", "x"),
            ("0-0", "0"),
            ("2,4", "2,4"),
            ("4294967296", "4294967296"),
        ] {
            assert_eq!(args_err(&format!("--nodes={bad}")).token, token, "{bad}");
        }
    }

    #[test]
    fn counts_must_be_positive() {
        for option in [
            "--ntasks",
            "--ntasks-per-node",
            "--cpus-per-task",
            "--cpus-per-gpu",
            "-n",
            "-c",
        ] {
            for bad in ["0", "-1", "x", "1.5", "+3"] {
                let err = args_err(
                    &format!("{option}={bad}")
                        .replace("-n=", "-n")
                        .replace("-c=", "-c"),
                );
                assert_eq!(err.token, bad, "{option} {bad}");
                assert!(err.reason.contains("above zero"), "{}", err.reason);
            }
        }
    }

    #[test]
    fn values_delegate_to_their_formats() {
        assert_eq!(args_err("--mem=16X").format, "memory size");
        assert_eq!(args_err("--mem-per-cpu=1.5G").token, "1.5");
        assert_eq!(args_err("--time=1-25").token, "25");
        assert_eq!(args_err("--gres=nvme:1").token, "nvme");
        assert_eq!(args_err("--gpus-per-node=h100:0").token, "0");
        assert_eq!(args_err("-G h100").token, "h100");
        assert_eq!(args_err("--array=5-3").token, "5-3");
        assert_eq!(args_err("--dependency=expand:5").token, "expand");
        assert_eq!(args_err("--signal=X:USR1").token, "X");
        assert_eq!(opts("--mem=0").mem_per_node_mb, Some(0));
        assert_eq!(
            opts("--time=UNLIMITED").time_limit,
            Some(TimeLimit::Unlimited)
        );
        assert_eq!(
            opts("--gres=gpu:a100_3g.20gb:1").gpus_per_node,
            Some(gpus(Some("a100_3g.20gb"), 1))
        );
    }

    #[test]
    fn array_limit_on_the_command_line() {
        assert_eq!(
            opts("--array=0-999999").array.map(|a| a.indices.len()),
            Some(1_000_000)
        );
        assert!(args_err("--array=0-1000000").reason.contains("limit"));
    }

    #[test]
    fn gres_and_gpus_per_node_share_a_field() {
        assert_eq!(
            opts("--gpus-per-node=2 --gres=gpu:h100:8").gpus_per_node,
            Some(gpus(Some("h100"), 8))
        );
        assert_eq!(
            opts("--gres=gpu:h100:8 --gpus-per-node=2").gpus_per_node,
            Some(gpus(None, 2))
        );
    }

    #[test]
    fn export_forms() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            opts("--export=ALL").export,
            Some(ExportSpec::All { set: map(&[]) })
        );
        assert_eq!(
            opts("--export=all").export,
            Some(ExportSpec::All { set: map(&[]) })
        );
        assert_eq!(opts("--export=NONE").export, Some(ExportSpec::None));
        assert_eq!(
            opts("--export=ALL,EDITOR=/bin/vi,X=a=b,EMPTY=").export,
            Some(ExportSpec::All {
                set: map(&[("EDITOR", "/bin/vi"), ("X", "a=b"), ("EMPTY", "")])
            })
        );
        assert_eq!(
            opts("--export=VAR1,VAR2=y,_v3").export,
            Some(ExportSpec::Only {
                names: vec!["VAR1".into(), "_v3".into()],
                set: map(&[("VAR2", "y")]),
            })
        );
        assert_eq!(
            opts("--export=A=1,ALL").export,
            Some(ExportSpec::All {
                set: map(&[("A", "1")])
            })
        );
        for (bad, token) in [
            ("NONE,A=1", "NONE,A=1"),
            ("ALL,NONE", "ALL,NONE"),
            ("ALL,", "ALL,"),
            (",A", ",A"),
            ("=x", "=x"),
            ("1A=x", "1A"),
            ("A-B", "A-B"),
            ("ALL,A B=1", "A B"),
        ] {
            assert_eq!(
                parse_args(&["--export", bad]).unwrap_err().token,
                token,
                "{bad}"
            );
        }
    }

    #[test]
    fn switches() {
        assert_eq!(
            opts("--switches=2").switches,
            Some(SwitchesSpec {
                count: 2,
                max_wait_seconds: None
            })
        );
        assert_eq!(
            opts("--switches=1@1:00:00").switches,
            Some(SwitchesSpec {
                count: 1,
                max_wait_seconds: Some(3600)
            })
        );
        assert_eq!(
            opts("--switches=1@2-00:00:00")
                .switches
                .and_then(|s| s.max_wait_seconds),
            Some(2 * 86_400)
        );
        assert_eq!(
            opts("--switches=3@UNLIMITED")
                .switches
                .and_then(|s| s.max_wait_seconds),
            None
        );
        for (bad, token) in [
            ("0", "0"),
            ("x", "x"),
            ("@5", "@5"),
            ("2@", "2@"),
            ("2@1-25", "25"),
            ("2@5@6", "5@6"),
        ] {
            assert_eq!(args_err(&format!("--switches={bad}")).token, token, "{bad}");
        }
    }

    #[test]
    fn constraint_features() {
        assert_eq!(opts("-C a100").constraint, ["a100"]);
        assert_eq!(
            opts("--constraint=a100&ib&rack-2").constraint,
            ["a100", "ib", "rack-2"]
        );
        assert_eq!(opts("--constraint=a,b").constraint, ["a", "b"]);
        for (bad, token) in [
            ("a|b", "a|b"),
            ("a&&b", "a&&b"),
            ("a&", "a&"),
            ("[a*2]", "[a*2]"),
            ("a&!b", "!b"),
            ("gpu*2", "gpu*2"),
        ] {
            assert_eq!(
                args_err(&format!("--constraint={bad}")).token,
                token,
                "{bad}"
            );
        }
    }

    // -- overrides ------------------------------------------------------------

    #[test]
    fn command_line_overrides_directives() {
        let from_script = parse_script_directives(TRAINING_SCRIPT).unwrap();
        let cli = opts("--time=30 -J other --parsable");
        let merged = from_script.clone().overridden_by(cli);
        assert_eq!(merged.time_limit, Some(TimeLimit::Seconds(1800)));
        assert_eq!(merged.job_name.as_deref(), Some("other"));
        assert_eq!(merged.nodes, Some(4));
        assert_eq!(merged.requeue, Some(true));
        assert!(merged.parsable);
        assert_eq!(
            from_script.clone().overridden_by(SbatchOptions::default()),
            from_script
        );
        assert_eq!(
            SbatchOptions::default().overridden_by(from_script.clone()),
            from_script
        );
    }

    #[test]
    fn overrides_of_lists_and_flags() {
        let base = opts("-C a&b --parsable --requeue");
        assert_eq!(base.clone().overridden_by(opts("-C c")).constraint, ["c"]);
        assert_eq!(
            base.clone().overridden_by(opts("-N 1")).constraint,
            ["a", "b"]
        );
        let merged = base.clone().overridden_by(opts("--test-only --no-requeue"));
        assert!(merged.parsable && merged.test_only);
        assert_eq!(merged.requeue, Some(false));
    }

    // -- internals ------------------------------------------------------------

    #[test]
    fn option_table_has_no_duplicates() {
        for (i, a) in OPTIONS.iter().enumerate() {
            for b in &OPTIONS[i + 1..] {
                assert_ne!(a.long, b.long);
                assert!(
                    a.short.is_none() || a.short != b.short,
                    "{} {}",
                    a.long,
                    b.long
                );
            }
        }
    }

    #[test]
    fn directive_words() {
        assert_eq!(
            split_directive_words(" -J 'a b' x\"y z\"w # c").unwrap(),
            ["-J", "a b", "xy zw"]
        );
        assert_eq!(split_directive_words(" ''").unwrap(), [""]);
        assert_eq!(split_directive_words("").unwrap(), Vec::<String>::new());
        assert_eq!(split_directive_words(" \"it's\"").unwrap(), ["it's"]);
        assert_eq!(split_directive_words(" -J 'a").unwrap_err().token, "'a");
    }

    proptest! {
        #[test]
        fn parse_args_never_panics(words in prop::collection::vec("\\PC{0,12}", 0..8)) {
            let _ = parse_args(&words);
        }

        #[test]
        fn option_like_args_never_panic(words in prop::collection::vec("-{1,2}[A-Za-z=0-9:@,%-]{0,10}", 0..8)) {
            if let Ok((_, rest)) = parse_args(&words) {
                prop_assert!(rest.len() <= words.len());
            }
        }

        #[test]
        fn directives_never_panic(body in "\\PC{0,40}", lines in prop::collection::vec("(#SBATCH )?[ -~]{0,30}", 0..6)) {
            let _ = parse_script_directives(&format!("#!/bin/bash\n#SBATCH {body}\n{}", lines.join("\n")));
        }

        #[test]
        fn directives_match_the_command_line(n in 1u32..1000, t in 1u64..10_000, name in "[a-z][a-z0-9_-]{0,10}") {
            let line = format!("-N {n} --time={t} --job-name={name}");
            let from_script = parse_script_directives(&format!("#!/bin/sh\n#SBATCH {line}\nrun")).unwrap();
            prop_assert_eq!(from_script, opts(&line));
        }
    }
}
