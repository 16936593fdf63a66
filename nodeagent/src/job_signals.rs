//! Jobs start with every signal at its default action, as under slurmstepd.
//! A signal the agent's own parent ignored stays ignored across `exec`: an
//! agent started under `nohup` would hand every job SIGHUP ignored, one
//! started as a shell's background job SIGINT and SIGQUIT, and bash cannot
//! even trap a signal ignored when it started (a job's `trap ... HUP`
//! silently never runs). A caught signal, though, is reset to its default
//! in the child at `exec`. So the agent catches, with tokio's handlers,
//! every signal a job may want that it does not already handle (SIGTERM
//! and SIGINT stop it: see `main.rs`), before any job starts, and logs
//! what arrives: none of them means anything to the agent.

use tokio::signal::unix::{SignalKind, signal};

/// The signals caught only so that jobs get them at their default action.
const CAUGHT: [(SignalKind, &str); 6] = [
    (SignalKind::hangup(), "SIGHUP"),
    (SignalKind::quit(), "SIGQUIT"),
    (SignalKind::user_defined1(), "SIGUSR1"),
    (SignalKind::user_defined2(), "SIGUSR2"),
    (SignalKind::alarm(), "SIGALRM"),
    (SignalKind::child(), "SIGCHLD"),
];

/// Catches [`CAUGHT`]; call before any job starts.
pub fn catch_for_jobs() -> std::io::Result<()> {
    for (kind, name) in CAUGHT {
        let mut arrivals = signal(kind)?;
        tokio::spawn(async move {
            while arrivals.recv().await.is_some() {
                // A child's end is the supervisor's business, and frequent.
                if name != "SIGCHLD" {
                    tracing::info!("{name} received: the agent has no use for it; ignored");
                }
            }
        });
    }
    Ok(())
}
