//! From what a user typed to what the cluster is asked: sbatch options (command
//! line merged over `#SBATCH` lines), the script, and the submitting shell's
//! context become a [`JobSpec`] and [`BatchScript`] for `Command::Submit`.
//!
//! The CLI calls this; it lives here so the whole path from script text to a
//! queued job is tested in one pure crate.

use std::collections::BTreeMap;

use crate::job::{BatchScript, JobSpec, MemoryRequest};
use crate::slurm::FormatError;
use crate::slurm::hostlist;
use crate::slurm::sbatch::{ExportSpec, SbatchOptions};
use crate::time::Timestamp;

/// Who submits, from where, with which environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmitContext {
    /// The submitting user's name.
    pub user: String,
    /// Their uid.
    pub uid: u32,
    /// Their primary gid.
    pub gid: u32,
    /// The host `corral submit` runs on.
    pub submit_host: String,
    /// The absolute working directory of `corral submit`.
    pub cwd: String,
    /// The submitting shell's environment.
    pub environment: BTreeMap<String, String>,
    /// What scontrol will show as `Command=`: the script's path as sbatch names
    /// it (see [`command_of_script`]), `srun`'s program, or `None`.
    pub command: Option<String>,
    /// When the submission is made: `--begin`'s relative forms count from it.
    pub now: Timestamp,
}

/// `Command=` for a batch script file as sbatch names it: a bare file name is
/// made absolute with the submit directory; a path with a `/` is kept as typed
/// (`./train.sh`, `../jobs/train.sh`), as Slurm 22.05 does.
pub fn command_of_script(path: &str, cwd: &str) -> String {
    if path.contains('/') {
        path.to_string()
    } else {
        format!("{}/{path}", cwd.trim_end_matches('/'))
    }
}

/// Where the batch script comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptSource {
    /// A script file: its name (for the default job name) and text.
    File {
        /// The file name as given (`train.sh`, `jobs/train.sh`).
        path: String,
        /// Its contents.
        text: String,
        /// Arguments after the script path.
        argv: Vec<String>,
    },
    /// `--wrap=COMMAND`.
    Wrap(String),
}

/// A submission that cannot be turned into a job request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// An option value is malformed.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// Options contradict each other.
    #[error("{0}")]
    Conflict(String),
}

/// Builds the job request. `options` should already be the script's directives
/// overridden by the command line (`SbatchOptions::overridden_by`).
pub fn build_request(
    options: SbatchOptions,
    source: ScriptSource,
    ctx: &SubmitContext,
) -> Result<(JobSpec, BatchScript), RequestError> {
    let (default_name, script, argv) = match source {
        ScriptSource::File { .. } if options.wrap.is_some() => {
            return Err(RequestError::Conflict(
                "give either a script or --wrap, not both".into(),
            ));
        }
        ScriptSource::File { path, text, argv } => {
            let name = path.rsplit('/').next().unwrap_or(&path).to_string();
            (name, text, argv)
        }
        ScriptSource::Wrap(command) => (
            "wrap".to_string(),
            format!("#!/bin/sh\n# This script was created by sbatch --wrap.\n\n{command}\n"),
            Vec::new(),
        ),
    };
    let memory = memory_request(&options)?;
    // As Slurm's controller refuses it (the partition's default time limit is
    // not known here: only an explicit --time is compared).
    if let (Some(min), Some(limit)) = (options.time_min, options.time_limit)
        && min > limit
    {
        return Err(RequestError::Conflict(
            "Invalid time-min specification (exceeds job's time or other limits): --time-min is longer than --time".into(),
        ));
    }
    let mut environment = exported_environment(options.export.as_ref(), &ctx.environment);
    environment.extend(options.job_variables());
    let workdir = match &options.chdir {
        Some(dir) if dir.starts_with('/') => dir.clone(),
        Some(dir) => format!("{}/{dir}", ctx.cwd.trim_end_matches('/')),
        None => ctx.cwd.clone(),
    };
    let expand = |list: &Option<String>| -> Result<Vec<String>, FormatError> {
        list.as_deref().map_or(Ok(Vec::new()), hostlist::expand)
    };
    let spec = JobSpec {
        name: options.job_name.unwrap_or(default_name),
        user: ctx.user.clone(),
        uid: ctx.uid,
        gid: ctx.gid,
        submit_host: ctx.submit_host.clone(),
        account: options.account,
        partition: options.partition,
        qos: options.qos,
        nodes: options.nodes.unwrap_or(1),
        ntasks: options.ntasks,
        ntasks_per_node: options.ntasks_per_node,
        cpus_per_task: options.cpus_per_task.unwrap_or(1),
        cpus_per_task_given: options.cpus_per_task.is_some(),
        cpus_per_gpu: options.cpus_per_gpu,
        gpus_per_node: options.gpus_per_node,
        gpus_total: options.gpus,
        gpus_per_task: options.gpus_per_task,
        memory,
        time_limit: options.time_limit,
        array: options.array,
        dependency: options.dependency,
        requeue: options.requeue.unwrap_or(true),
        signal: options.signal,
        exclusive: options.exclusive.unwrap_or(false),
        workdir,
        submit_dir: ctx.cwd.clone(),
        stdout: options.output,
        stderr: options.error,
        stdin: options.input,
        nice: options.nice.unwrap_or(0),
        hold: options.hold.unwrap_or(false),
        switches: options.switches,
        features: options.constraint,
        reservation: options.reservation,
        required_nodes: expand(&options.nodelist)?,
        excluded_nodes: expand(&options.exclude)?,
        comment: options.comment,
        time_min: options.time_min,
        mail_type: options.mail_type,
        mail_user: options.mail_user,
        command: ctx.command.clone(),
        begin_time: match options.begin {
            Some(begin) => Some(begin.resolve(ctx.now).ok_or_else(|| {
                RequestError::Conflict(
                    "--begin names a date the calendar does not have, or one after the year 2500; give an existing one".into(),
                )
            })?),
            None => None,
        },
        min_cpus_per_node: options.mincpus,
    };
    let batch = BatchScript {
        script,
        argv,
        environment,
    };
    Ok((spec, batch))
}

fn memory_request(options: &SbatchOptions) -> Result<MemoryRequest, RequestError> {
    match (
        options.mem_per_node_mb,
        options.mem_per_cpu_mb,
        options.mem_per_gpu_mb,
    ) {
        (None, None, None) => Ok(MemoryRequest::Unspecified),
        (Some(0), None, None) => Ok(MemoryRequest::WholeNode),
        (Some(mb), None, None) => Ok(MemoryRequest::PerNodeMb(mb)),
        (None, Some(mb), None) => Ok(MemoryRequest::PerCpuMb(mb)),
        (None, None, Some(mb)) => Ok(MemoryRequest::PerGpuMb(mb)),
        _ => Err(RequestError::Conflict(
            "--mem, --mem-per-cpu and --mem-per-gpu are mutually exclusive; give one".into(),
        )),
    }
}

/// The environment the job starts with, as `--export` selects it (default ALL).
/// As sbatch, `NONE` and a list of names still pass on the submitting shell's
/// `SLURM_*` variables.
fn exported_environment(
    export: Option<&ExportSpec>,
    submitting: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    match export {
        None => submitting.clone(),
        Some(ExportSpec::All { set }) => {
            let mut env = submitting.clone();
            env.extend(set.clone());
            env
        }
        Some(ExportSpec::None) => slurm_variables(submitting),
        Some(ExportSpec::Only { names, set }) => {
            let mut env = slurm_variables(submitting);
            env.extend(
                names
                    .iter()
                    .filter_map(|n| submitting.get(n).map(|v| (n.clone(), v.clone()))),
            );
            env.extend(set.clone());
            env
        }
    }
}

/// The submitting shell's `SLURM_*` variables.
fn slurm_variables(submitting: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    submitting
        .iter()
        .filter(|(name, _)| name.starts_with("SLURM_"))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}
