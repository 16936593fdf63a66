//! Turning `srun`'s command line and environment into a step request (pure):
//! the job from `SLURM_JOB_ID`, the shape from the options or, when none is
//! given, from the variables the batch script inherited, and the environment
//! the tasks get from `--export`.

use std::collections::BTreeMap;

use corral_proto::step::{
    SrunRequest, StepInput, StepShapeRequest, TaskDistribution, TerminalSize,
};
use corral_state::ids::JobId;
use corral_state::slurm::hostlist;

use crate::srun_args::SrunArgs;

/// Builds the request from `args`, `env` (srun's environment) and `cwd`.
pub fn build(
    args: &SrunArgs,
    env: &BTreeMap<String, String>,
    cwd: &str,
) -> Result<SrunRequest, String> {
    if let Some(mpi) = &args.mpi
        && mpi != "none"
    {
        return Err(format!(
            "--mpi={mpi}: corral provides no PMI; use --mpi=none with a launcher that rendezvous through the environment (torchrun, or mpirun reading SLURM_* variables)"
        ));
    }
    let job = match args.jobid {
        Some(id) => id,
        None => {
            let text = env.get("SLURM_JOB_ID").ok_or(
                "srun runs inside a job: SLURM_JOB_ID is not set (submit the script with sbatch or `corral submit`)",
            )?;
            text.parse()
                .map_err(|_| format!("SLURM_JOB_ID={text} is not a job id"))?
        }
    };
    let attempt = env.get("CORRAL_ATTEMPT").and_then(|a| a.parse().ok());
    // On a terminal, task 0 reads it (Slurm's --pty).
    let (input, _) = match args.allocation.pty {
        true => (StepInput::Task(0), InputSource::Stdin),
        false => input(args.input.as_deref()),
    };
    Ok(SrunRequest {
        job: JobId(job),
        attempt,
        argv: args.command.clone(),
        env: exported(&args.export, env)?,
        workdir: args.chdir.clone().unwrap_or_else(|| cwd.to_string()),
        shape: StepShapeRequest {
            distribution: distribution(args, env)?,
            gpus_per_task: gpus_per_task(args)?,
            ..shape(args, env)?
        },
        input,
        // srun fills in its terminal's size.
        pty: args.allocation.pty.then(TerminalSize::default),
        files: super::files::redirection(args.output.as_deref(), args.error.as_deref()).tasks,
    })
}

/// `-m/--distribution` (or `SLURM_DISTRIBUTION`, which sbatch's `-m` sets):
/// its first level, `block` or `cyclic` (`*` is the default, block); a second
/// level (`block:cyclic`) places tasks on sockets, which corral does not do.
/// `plane` and `arbitrary` given to srun are refused; inherited from the
/// batch script's `-m`, they lay steps out by block (sbatch accepted them).
fn distribution(
    args: &SrunArgs,
    env: &BTreeMap<String, String>,
) -> Result<Option<TaskDistribution>, String> {
    let first_level = |text: &str| match text
        .split([':', ','])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase()
        .as_str()
    {
        "block" | "*" | "" => Some(TaskDistribution::Block),
        "cyclic" => Some(TaskDistribution::Cyclic),
        _ => None,
    };
    if let Some(text) = args.distribution.as_deref() {
        return first_level(text).map(Some).ok_or_else(|| {
            format!(
                "--distribution={text}: corral deals tasks to nodes by block or cyclic only (not plane or arbitrary); use -m block or -m cyclic"
            )
        });
    }
    Ok(env
        .get("SLURM_DISTRIBUTION")
        .map(|text| first_level(text).unwrap_or(TaskDistribution::Block)))
}

/// `--gpus-per-task=[TYPE:]N`: the step's own; the job's applies without it.
fn gpus_per_task(args: &SrunArgs) -> Result<Option<u32>, String> {
    let Some(text) = args.accepted.gpus_per_task.as_deref() else {
        return Ok(None);
    };
    let count = text.rsplit(':').next().unwrap_or(text);
    count
        .parse::<u32>()
        .ok()
        .filter(|n| *n > 0)
        .map(Some)
        .ok_or_else(|| format!("--gpus-per-task={text}: give a GPU count such as 1 or a100:1"))
}

/// Where the tasks' input comes from, for `--input`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputSource {
    /// srun's own standard input.
    Stdin,
    /// A file on srun's host.
    File(String),
    /// Nothing: the tasks' input is closed.
    Nothing,
}

/// `--input`'s mode: which tasks read, and what (`all` by default).
pub fn input(mode: Option<&str>) -> (StepInput, InputSource) {
    let word = mode.map(|m| m.trim().to_ascii_lowercase());
    match word.as_deref() {
        // Slurm takes a prefix of `all`, and `-`, for every task.
        None | Some("-") => (StepInput::All, InputSource::Stdin),
        Some(w) if !w.is_empty() && "all".starts_with(w) => (StepInput::All, InputSource::Stdin),
        Some("none") => (StepInput::None, InputSource::Nothing),
        Some(_) => match mode.unwrap_or_default().trim().parse::<u32>() {
            Ok(task) => (StepInput::Task(task), InputSource::Stdin),
            Err(_) => (
                StepInput::All,
                InputSource::File(mode.unwrap_or_default().trim().to_string()),
            ),
        },
    }
}

/// The shape: options first; the inherited `SLURM_NNODES`, `SLURM_NTASKS` and
/// `SLURM_NTASKS_PER_NODE` (the job's request) fill in only when no option
/// about tasks or nodes was given, as the job's defaults.
fn shape(args: &SrunArgs, env: &BTreeMap<String, String>) -> Result<StepShapeRequest, String> {
    let number = |name: &str| -> Result<Option<u32>, String> {
        env.get(name)
            .map(|v| {
                v.parse::<u32>()
                    .map_err(|_| format!("{name}={v} is not a number; unset it or pass the option"))
            })
            .transpose()
    };
    let nodelist = args
        .nodelist
        .as_deref()
        .map(hostlist::expand)
        .transpose()
        .map_err(|e| format!("--nodelist: {e}"))?;
    let given = args.nodes.is_some()
        || args.ntasks.is_some()
        || args.ntasks_per_node.is_some()
        || nodelist.is_some();
    if given {
        return Ok(StepShapeRequest {
            nodes: args.nodes,
            ntasks: args.ntasks,
            ntasks_per_node: args.ntasks_per_node,
            cpus_per_task: args.cpus_per_task,
            nodelist,
            ..StepShapeRequest::default()
        });
    }
    Ok(StepShapeRequest {
        nodes: number("SLURM_NNODES")?,
        ntasks: number("SLURM_NTASKS")?,
        ntasks_per_node: number("SLURM_NTASKS_PER_NODE")?,
        cpus_per_task: args.cpus_per_task,
        nodelist: None,
        ..StepShapeRequest::default()
    })
}

/// What `--export` passes on: `ALL` everything; `NONE` nothing (the agent
/// still sets the `SLURM_*` variables); otherwise the listed names (with
/// `NAME=VALUE` setting one), on top of everything when `ALL` is listed.
fn exported(
    export: &str,
    env: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for item in export.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item {
            "ALL" => out.extend(env.iter().map(|(k, v)| (k.clone(), v.clone()))),
            "NONE" | "NIL" => {}
            _ => match item.split_once('=') {
                Some((name, value)) if !name.is_empty() => {
                    out.insert(name.to_string(), value.to_string());
                }
                Some(_) => return Err(format!("--export: '{item}' has no variable name")),
                None => {
                    if let Some(value) = env.get(item) {
                        out.insert(item.to_string(), value.clone());
                    }
                }
            },
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use corral_proto::step::TaskStream;

    fn args(line: &[&str]) -> SrunArgs {
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

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_job_and_its_defaults_come_from_the_environment() {
        let vars = env(&[
            ("SLURM_JOB_ID", "42"),
            ("SLURM_NNODES", "2"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_NTASKS_PER_NODE", "4"),
            ("HOME", "/home/a"),
        ]);
        let request = build(&args(&["hostname"]), &vars, "/w").expect("request");
        assert_eq!(request.job, JobId(42));
        assert_eq!(request.workdir, "/w");
        assert_eq!(request.argv, ["hostname"]);
        assert_eq!(
            request.shape,
            StepShapeRequest {
                nodes: Some(2),
                ntasks: Some(8),
                ntasks_per_node: Some(4),
                cpus_per_task: None,
                nodelist: None,
                ..StepShapeRequest::default()
            }
        );
        assert_eq!(request.env, vars);
        // Any shape option replaces the inherited ones.
        let request = build(&args(&["-n", "1", "hostname"]), &vars, "/w").expect("request");
        assert_eq!(
            request.shape,
            StepShapeRequest {
                nodes: None,
                ntasks: Some(1),
                ntasks_per_node: None,
                cpus_per_task: None,
                nodelist: None,
                ..StepShapeRequest::default()
            }
        );
    }

    #[test]
    fn export_selects_what_the_tasks_inherit() {
        let vars = env(&[("SLURM_JOB_ID", "1"), ("A", "1"), ("B", "2")]);
        let only_a = build(&args(&["--export", "A,C=3", "x"]), &vars, "/").expect("request");
        assert_eq!(only_a.env, env(&[("A", "1"), ("C", "3")]));
        let none = build(&args(&["--export", "NONE", "x"]), &vars, "/").expect("request");
        assert!(none.env.is_empty());
        let all_plus = build(&args(&["--export", "ALL,B=9", "x"]), &vars, "/").expect("request");
        assert_eq!(all_plus.env["B"], "9");
        assert_eq!(all_plus.env["A"], "1");
    }

    #[test]
    fn nodelist_cpus_and_unsupported_options() {
        let vars = env(&[("SLURM_JOB_ID", "1"), ("SLURM_NTASKS", "8")]);
        let request =
            build(&args(&["-w", "gpu[02-03]", "-c", "4", "x"]), &vars, "/").expect("request");
        assert_eq!(
            request.shape.nodelist,
            Some(vec!["gpu02".to_string(), "gpu03".to_string()])
        );
        assert_eq!(request.shape.cpus_per_task, Some(4));
        assert_eq!(
            request.shape.ntasks, None,
            "-w replaces the inherited task count"
        );
        let files = build(&args(&["-o", "out-%t", "-e", "err-%t", "x"]), &vars, "/")
            .expect("request")
            .files;
        assert_eq!(files.stdout, TaskStream::NodeFile("out-%t".into()));
        assert_eq!(files.stderr, TaskStream::NodeFile("err-%t".into()));
        let cyclic = build(&args(&["-m", "cyclic", "x"]), &vars, "/").expect("request");
        assert_eq!(cyclic.shape.distribution, Some(TaskDistribution::Cyclic));
        let block = build(&args(&["-m", "block:cyclic", "x"]), &vars, "/").expect("request");
        assert_eq!(block.shape.distribution, Some(TaskDistribution::Block));
        assert!(
            build(&args(&["-m", "plane=4", "x"]), &vars, "/")
                .unwrap_err()
                .contains("block or cyclic")
        );
        // sbatch -m cyclic reaches srun through the batch environment; an
        // inherited plane (sbatch accepted it) lays the step out by block.
        let inherited = env(&[("SLURM_JOB_ID", "1"), ("SLURM_DISTRIBUTION", "cyclic")]);
        let request = build(&args(&["x"]), &inherited, "/").expect("request");
        assert_eq!(request.shape.distribution, Some(TaskDistribution::Cyclic));
        let plane = env(&[("SLURM_JOB_ID", "1"), ("SLURM_DISTRIBUTION", "plane")]);
        let request = build(&args(&["x"]), &plane, "/").expect("request");
        assert_eq!(request.shape.distribution, Some(TaskDistribution::Block));
        // Without -m, the agent chooses as srun does.
        let plain = build(&args(&["x"]), &vars, "/").expect("request");
        assert_eq!(plain.shape.distribution, None);
        let bound = build(&args(&["--gpus-per-task=a100:2", "x"]), &vars, "/").expect("request");
        assert_eq!(bound.shape.gpus_per_task, Some(2));
        assert!(build(&args(&["--gpus-per-task=some", "x"]), &vars, "/").is_err());
        let quiet = args(&["--gres=gpu:8", "--exclusive", "-u", "x"]);
        assert_eq!(quiet.ignored(true).len(), 1, "{:?}", quiet.ignored(true));
    }

    #[test]
    fn input_goes_to_every_task_unless_told() {
        assert_eq!(input(None), (StepInput::All, InputSource::Stdin));
        assert_eq!(input(Some("none")), (StepInput::None, InputSource::Nothing));
        assert_eq!(input(Some("ALL")), (StepInput::All, InputSource::Stdin));
        assert_eq!(input(Some("-")), (StepInput::All, InputSource::Stdin));
        assert_eq!(input(Some("0")), (StepInput::Task(0), InputSource::Stdin));
        assert_eq!(
            input(Some("data.txt")),
            (StepInput::All, InputSource::File("data.txt".into()))
        );
        assert!(StepInput::Task(2).reaches(2) && !StepInput::Task(2).reaches(0));
    }

    #[test]
    fn kill_on_bad_exit_takes_no_separate_value() {
        let parsed = args(&["-K", "python", "train.py"]);
        assert_eq!(parsed.kill_on_bad_exit, Some(1));
        assert_eq!(parsed.command, ["python", "train.py"]);
        let off = args(&["--kill-on-bad-exit=0", "python"]);
        assert_eq!(off.kill_on_bad_exit, Some(0));
        assert_eq!(args(&["python"]).kill_on_bad_exit, None);
    }

    #[test]
    fn outside_a_job_or_with_a_pmi_it_says_what_to_do() {
        let outside = build(&args(&["hostname"]), &BTreeMap::new(), "/").unwrap_err();
        assert!(outside.contains("SLURM_JOB_ID"), "{outside}");
        let vars = env(&[("SLURM_JOB_ID", "1")]);
        let pmix = build(&args(&["--mpi=pmix", "x"]), &vars, "/").unwrap_err();
        assert!(pmix.contains("--mpi=none"), "{pmix}");
        let bad = env(&[("SLURM_JOB_ID", "1"), ("SLURM_NTASKS", "lots")]);
        assert!(
            build(&args(&["x"]), &bad, "/")
                .unwrap_err()
                .contains("SLURM_NTASKS")
        );
    }
}
