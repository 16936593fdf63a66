//! `corral cancel` (and `scancel`): cancels, or with `--signal` signals running
//! jobs without ending them (`signal.rs`).

use std::process::ExitCode;

use corral_proto::api::{CancelJobsRequest, SignalScope};
use corral_state::slurm::signal::{Signal, parse_signal};

use super::signal;
use crate::args::CancelArgs;
use crate::connection::{Cluster, Retry};
use crate::exit;

/// What the flags ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// End the jobs.
    Cancel,
    /// Signal these processes of the jobs.
    Signal(SignalScope),
}

/// As scancel: without `--signal`, or with KILL to more than the batch shell, the
/// jobs end (scancel's default signal is SIGKILL, so `--batch` or `--full`
/// alone end them too); otherwise the signal goes to the steps' tasks, the batch
/// shell (`--batch`) or both (`--full`).
fn action(args: &CancelArgs) -> anyhow::Result<Action> {
    let Some(text) = &args.signal else {
        return Ok(Action::Cancel);
    };
    let signal = parse_signal(text.trim()).map_err(|e| anyhow::anyhow!("--signal: {e}"))?;
    if signal == Signal::KILL && !args.batch {
        return Ok(Action::Cancel);
    }
    Ok(Action::Signal(if args.batch {
        SignalScope::Batch
    } else if args.full {
        SignalScope::Full
    } else {
        SignalScope::Steps
    }))
}

/// Cancels or signals; exits non-zero when any target was refused.
pub async fn run(cluster: &Cluster, args: &CancelArgs, json: bool) -> anyhow::Result<ExitCode> {
    if args.jobs.is_empty() && args.user.is_none() {
        anyhow::bail!("name the jobs to cancel (ids; 123_4 for an array task) or a user with -u");
    }
    if let Action::Signal(scope) = action(args)? {
        return signal::run(cluster, args, scope, json).await;
    }
    let request = CancelJobsRequest {
        jobs: args.jobs.clone(),
        user: args.user.clone().unwrap_or_default(),
        signal: String::new(),
    };
    let reply = cluster
        .call(Retry::Once, |mut c| {
            let request = request.clone();
            async move { c.cancel_jobs(request).await }
        })
        .await?;
    if json {
        super::print_json(&serde_json::json!({
            "cancelled": reply.affected,
            "errors": reply.errors,
        }))?;
    }
    for error in &reply.errors {
        eprintln!("corral cancel: error: {error}");
    }
    Ok(if reply.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::REFUSED)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parsed(argv: &[&str]) -> CancelArgs {
        let cli = crate::args::Cli::try_parse_from(argv).unwrap();
        let crate::args::Command::Cancel(args) = cli.command else {
            panic!("not cancel: {:?}", cli.command);
        };
        args
    }

    #[test]
    fn signal_flags_choose_the_processes_as_scancel_does() {
        let cases: [(&[&str], Action); 7] = [
            (&["corral", "cancel", "5"], Action::Cancel),
            (&["corral", "cancel", "-b", "5"], Action::Cancel),
            (
                &["corral", "cancel", "-s", "USR1", "5"],
                Action::Signal(SignalScope::Steps),
            ),
            (
                &["corral", "cancel", "--signal=SIGUSR1", "--batch", "5"],
                Action::Signal(SignalScope::Batch),
            ),
            (
                &["corral", "cancel", "-s", "10", "-f", "5"],
                Action::Signal(SignalScope::Full),
            ),
            (
                &["corral", "cancel", "-s", "KILL", "-f", "5"],
                Action::Cancel,
            ),
            (
                &["corral", "cancel", "-s", "9", "-b", "5"],
                Action::Signal(SignalScope::Batch),
            ),
        ];
        for (argv, expected) in cases {
            assert_eq!(action(&parsed(argv)).unwrap(), expected, "{argv:?}");
        }
        let bad = action(&parsed(&["corral", "cancel", "-s", "USR9", "5"])).unwrap_err();
        assert!(bad.to_string().contains("'USR9'"), "{bad}");
        assert!(
            crate::args::Cli::try_parse_from(["corral", "cancel", "-b", "-f", "5"]).is_err(),
            "--batch and --full exclude each other"
        );
    }

    #[test]
    fn scancel_flags_reach_cancel() {
        let argv = crate::slurm_shims::rewrite(
            ["scancel", "-s", "USR1", "-f", "7"]
                .iter()
                .map(std::ffi::OsString::from)
                .collect(),
        )
        .unwrap();
        let cli = crate::args::Cli::try_parse_from(argv).unwrap();
        let crate::args::Command::Cancel(args) = cli.command else {
            panic!("not cancel: {:?}", cli.command);
        };
        assert_eq!(action(&args).unwrap(), Action::Signal(SignalScope::Full));
        assert_eq!(args.jobs, ["7"]);
    }
}
