//! One module per command; `run` dispatches. Commands print tables (or JSON with
//! `--json`) and return the process's exit status.

mod acct;
mod admin;
mod allocation;
mod backup;
mod cancel;
mod certs;
mod cluster;
mod demo;
mod import_slurm;
mod jobs;
pub mod local;
mod nodes;
mod queue;
mod sacctmgr;
mod salloc;
pub(crate) mod scontrol;
pub mod shims;
mod signal;
mod sprio;
mod srun;
mod sshare;
mod sstat;
mod submit;
mod top;
mod wait;

use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;

use crate::args::{Cli, Command};
use crate::connection::{Cluster, ClusterSettings};

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let global = cli.global.clone();
    let connect = || -> anyhow::Result<Cluster> {
        Cluster::new(ClusterSettings::resolve(&global.cluster_flags())?)
    };
    match cli.command {
        Command::Submit { as_sbatch, args } => {
            submit::run(&connect()?, &args, as_sbatch, global.json).await
        }
        Command::Queue(args) => queue::run(&connect()?, &args, global.json).await,
        Command::Cancel(args) => cancel::run(&connect()?, &args, global.json).await,
        Command::Nodes(args) => nodes::run(&connect()?, &args, global.json).await,
        Command::Acct(args) => acct::run(&connect()?, &args, global.json).await,
        Command::Show { what } => jobs::show(&connect()?, what, global.json).await,
        Command::Hold { job } => {
            jobs::control(&connect()?, job, jobs::Action::Hold, global.json).await
        }
        Command::Release { job } => {
            jobs::control(&connect()?, job, jobs::Action::Release, global.json).await
        }
        Command::Requeue { job } => {
            jobs::control(&connect()?, job, jobs::Action::Requeue, global.json).await
        }
        Command::Node { action } => nodes::set_state(&connect()?, action).await,
        Command::Cluster => cluster::run(&connect()?, global.json).await,
        Command::Wait { jobs, quiet } => wait::run(&connect()?, &jobs, quiet, global.json).await,
        Command::Checkpoint(args) => match jobs::agent_socket(&args) {
            Some(socket) => jobs::checkpoint_through_agent(&socket, &args).await,
            None => jobs::checkpoint(&connect()?, args).await,
        },
        Command::Srun(args) => srun::run(*args, connect).await,
        Command::Salloc { args } => salloc::run(&args, connect).await,
        Command::AllocationHold => allocation::holder::run().await,
        Command::Sstat { args } => sstat::run(&args, connect, global.json).await,
        Command::Sprio { args } => sprio::run(&args, connect).await,
        Command::Sshare { args } => sshare::run(&args, connect, global.json).await,
        Command::Admin {
            change:
                crate::args::AdminCommand::Snapshot {
                    action: crate::args::SnapshotAction::Inspect { file },
                },
        } => backup::inspect(&file, global.json),
        Command::Admin { change } => admin::run(&connect()?, change, global.json).await,
        Command::Whoami => cluster::whoami(&connect()?, global.json).await,
        Command::Top => top::run(&connect()?).await,
        Command::Certs(args) => certs::run(&args, global.json),
        Command::Local { action } => local::run(action, global.json).await,
        Command::Scontrol { args } => scontrol::run(&args, &global).await,
        Command::Sacctmgr { args } => sacctmgr::run(&args, &global).await,
        Command::Chaos { args } => chaos(&args),
        Command::Shims { dir } => shims::run(&dir),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "corral", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo(args) => demo::run(&args).await,
        Command::ImportSlurm(args) => import_slurm::run(&args),
    }
}

/// `corral chaos ARGS`: runs `corral-chaos ARGS` (installed beside corral)
/// and exits as it does.
fn chaos(args: &[String]) -> anyhow::Result<ExitCode> {
    let program = local::sibling_binary("corral-chaos")?;
    let status = std::process::Command::new(&program)
        .args(args)
        .status()
        .with_context(|| format!("cannot run {}", program.display()))?;
    Ok(ExitCode::from(
        status
            .code()
            .and_then(|c| u8::try_from(c).ok())
            .unwrap_or(1),
    ))
}

/// Prints a value as pretty JSON.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}
