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
mod job_selection;
mod slurm_options;
mod slurm_shims;
mod srun_args;
mod srun_slurm_options;
mod when;

use std::process::ExitCode;

use clap::Parser;

use crate::args::Cli;

/// What a shell reports for a program killed by SIGPIPE.
const BROKEN_PIPE_EXIT: i32 = 128 + 13;

/// Output into a closed pipe (`corral queue | head`) ends the program quietly,
/// as SIGPIPE ends Slurm's tools, instead of as a panic: Rust ignores SIGPIPE,
/// so `println!` fails with EPIPE and panics.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.contains("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(BROKEN_PIPE_EXIT);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    quiet_on_broken_pipe();
    let original: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let argv = match slurm_shims::rewrite(original.clone()) {
        Ok(argv) => argv,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(error) => match slurm_shims::unrecognized_option(&original, &error) {
            Some((text, status)) => {
                eprintln!("{text}");
                return ExitCode::from(status);
            }
            None => error.exit(),
        },
    };
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
