//! corral: the user's command-line client. Submit, queue, cancel, nodes, acct,
//! show, wait, admin over gRPC to any controller; `corral certs` and `corral
//! local` for local clusters. Invoked as `sbatch`, `squeue`, `scancel`, `sinfo`,
//! `sacct` or `scontrol` it behaves as that Slurm command.

mod admin_args;
mod args;
mod commands;
mod connection;
mod exit;
mod format;
mod slurm_shims;
mod srun_args;
mod when;

use std::process::ExitCode;

use clap::Parser;

use crate::args::Cli;

fn main() -> ExitCode {
    let argv = match slurm_shims::rewrite(std::env::args_os().collect()) {
        Ok(argv) => argv,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let cli = Cli::parse_from(argv);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("corral: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("corral: error: {error:#}");
            ExitCode::from(exit::code_for(&error))
        }
    }
}
