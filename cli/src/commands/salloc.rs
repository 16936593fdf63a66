//! `salloc [OPTIONS] [COMMAND [ARGS...]]`: an allocation with sbatch's
//! options, then the command (default: the user's shell) on this host with the
//! job's `SLURM_*` variables, so `srun` inside it runs steps on the
//! allocation; the allocation ends with the command, and the job with its
//! exit status. It prints what salloc prints (`Granted job allocation N`,
//! `Relinquishing job allocation N`), and a job that ends under the command
//! (scancel, time limit) revokes it: the command gets SIGHUP (SIGTERM when
//! not on a terminal), as salloc sends.

use std::process::ExitCode;

use anyhow::Context;
use corral_state::slurm::sbatch::parse_args;
use nix::sys::signal::{Signal as NixSignal, kill};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};

use super::allocation::{self, Allocated, AllocationRequest};
use crate::connection::Cluster;

/// sbatch options salloc does not have: they are about the batch script.
const BATCH_ONLY: [&str; 8] = [
    "--array",
    "--wrap",
    "--output",
    "--error",
    "--input",
    "--open-mode",
    "--parsable",
    "--test-only",
];

/// `salloc --help`: what corral's salloc takes.
const HELP: &str = "\
Usage: salloc [OPTIONS...] [command [args...]]

Allocates nodes, runs the command (default: $SHELL) on this host with the
job's SLURM_* variables (srun in it runs steps on the allocation), and
releases the allocation when the command ends; the job ends with its status.

Options: sbatch's allocation options, with sbatch's syntax and warnings
(`sbatch --help`): -N/--nodes, -n/--ntasks, --ntasks-per-node,
-c/--cpus-per-task, -p/--partition, -A/--account, -q/--qos, -t/--time,
--gres, --gpus, --gpus-per-node, --gpus-per-task, --mem, --mem-per-cpu,
--mem-per-gpu, -C/--constraint, -w/--nodelist, -x/--exclude, --exclusive,
--reservation, -d/--dependency, -J/--job-name (default: interactive),
--comment, --nice, --switches, ...
  -Q, --quiet        print errors only
  -h, --help         this text
Not taken (they are about batch scripts): --array, --wrap, --output, --error,
--input, --open-mode, --parsable, --test-only.
";

/// Runs salloc with its raw arguments.
pub async fn run(
    args: &[String],
    connect: impl FnOnce() -> anyhow::Result<Cluster>,
) -> anyhow::Result<ExitCode> {
    if matches!(
        args.first().map(String::as_str),
        Some("-h" | "--help" | "--usage")
    ) {
        print!("{HELP}");
        return Ok(ExitCode::SUCCESS);
    }
    let (options, command) = match parse_args(args) {
        Ok(parsed) => parsed,
        Err(e) => {
            let (text, status) = super::submit::option_error("salloc", &e);
            eprintln!("{text}");
            return Ok(ExitCode::from(status));
        }
    };
    // -Q/--quiet is salloc's own (sbatch's parser takes it as a no-op).
    let is_quiet = |a: &String| a == "-Q" || a == "--quiet";
    let option_args: Vec<String> = args[..args.len() - command.len()].to_vec();
    let quiet = option_args.iter().any(is_quiet);
    let option_args: Vec<String> = option_args.into_iter().filter(|a| !is_quiet(a)).collect();
    if let Some(batch_only) = option_args.iter().find_map(|a| {
        let name = a.split('=').next().unwrap_or(a);
        BATCH_ONLY.iter().find(|b| **b == name)
    }) {
        eprintln!(
            "salloc: unrecognized option '{batch_only}'\nTry \"salloc --help\" for more information"
        );
        return Ok(ExitCode::from(255));
    }
    let command = if command.is_empty() {
        vec![std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into())]
    } else {
        command
    };
    let mut option_args = option_args;
    // salloc's job is "interactive" unless named.
    if options.job_name.is_none() {
        option_args.push("--job-name=interactive".into());
    }
    // An interactive job is not requeued: its command is gone by then.
    option_args.push("--no-requeue".into());
    let cluster = connect()?;
    let request = AllocationRequest {
        program: "salloc",
        options: option_args,
        command: command.join(" "),
        quiet,
    };
    let allocation = match allocation::create(&cluster, request).await? {
        Allocated::Running(allocation) => allocation,
        Allocated::NotStarted(code) => return Ok(code),
    };
    let id = allocation.id();
    // salloc lives on while its command runs: a Ctrl-C or Ctrl-\ at the
    // terminal is the command's business; SIGTERM and SIGHUP are passed on to
    // it, and salloc releases the allocation once it has ended.
    let _interrupts = (
        signal(SignalKind::interrupt())?,
        signal(SignalKind::quit())?,
    );
    let mut term = signal(SignalKind::terminate())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let (program, program_args) = command.split_first().context("no command")?;
    let mut child = tokio::process::Command::new(program)
        .args(program_args)
        .envs(&allocation.environment)
        .env("CORRAL_ATTEMPT", allocation.attempt.to_string())
        // A salloc inside a job: srun in the command must reach this
        // allocation, not the outer job's node agent.
        .env_remove(corral_proto::step::STEP_SOCKET_ENV)
        .spawn();
    let status = match &mut child {
        Err(e) => {
            eprintln!("salloc: error: cannot run {program}: {e}");
            allocation.release(&cluster, 1).await;
            return Ok(ExitCode::from(1));
        }
        Ok(child) => {
            let mut revoked = allocation.revoked.clone();
            let pid = child
                .id()
                .and_then(|p| i32::try_from(p).ok())
                .map(Pid::from_raw);
            let pass_on = |signal: NixSignal| {
                if let Some(pid) = pid {
                    let _ = kill(pid, signal);
                }
            };
            loop {
                tokio::select! {
                    status = child.wait() => break status?,
                    _ = term.recv() => pass_on(NixSignal::SIGTERM),
                    _ = hangup.recv() => pass_on(NixSignal::SIGHUP),
                    why = revoked.wait_for(Option::is_some) => {
                        let why = why.ok().and_then(|w| w.clone());
                        eprintln!("salloc: Job allocation {id} has been revoked.");
                        if let Some(why) = why {
                            eprintln!("salloc: ({why})");
                        }
                        let on_terminal = std::io::IsTerminal::is_terminal(&std::io::stdin());
                        pass_on(if on_terminal { NixSignal::SIGHUP } else { NixSignal::SIGTERM });
                        break child.wait().await?;
                    }
                }
            }
        }
    };
    let code = exit_code(status);
    if allocation.revoked.borrow().is_none() {
        eprintln!("salloc: Relinquishing job allocation {id}");
    }
    allocation.release(&cluster, code).await;
    Ok(ExitCode::from(code))
}

/// The command's exit status as a shell reports it (128 + signal).
fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code.clamp(0, 255)).unwrap_or(u8::MAX),
        (None, Some(signal)) => u8::try_from((128 + signal).clamp(0, 255)).unwrap_or(u8::MAX),
        (None, None) => 1,
    }
}
