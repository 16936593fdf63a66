//! corral: the user's command-line client (issue 5): submit, queue, cancel, nodes,
//! acct, admin over gRPC, and `corral demo`.
//!
//! Not built yet: this binary only says so and exits with status 2.

#[allow(dead_code)] // used by the commands the lead is wiring
mod admin_args;
#[allow(dead_code, unused_imports)] // used by the commands the lead is wiring
mod format;

fn main() -> std::process::ExitCode {
    eprintln!(
        "corral: the client and `corral demo` are not built yet (the controller and CLI issue); \
         today the repository holds the state machine and Slurm formats: run `cargo test`."
    );
    std::process::ExitCode::from(2)
}
