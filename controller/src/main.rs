//! corrald: the controller daemon. `corrald --config corral.toml` runs a replica
//! (Raft, client API, leader loop); `corrald init --config corral.toml` asks the
//! running local replica to bootstrap a new cluster; `corrald check-config`
//! validates a file and exits.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use corral_controller::config;
use corral_controller::daemon::Controller;
use corral_pki::TlsMaterial;
use corral_proto::api::Empty;
use corral_proto::api::corral_client::CorralClient;
use tonic::transport::Endpoint;

/// Logging when RUST_LOG is unset: openraft's replication retries an unreachable
/// peer every 50 ms and logs each try, which would bury everything else while a
/// replica is down; `corral cluster` shows that state instead.
const DEFAULT_LOG_FILTER: &str = "info,openraft=error,openraft::replication=off,sled=warn";

#[derive(Parser)]
#[command(name = "corrald", version, about = "The corral controller daemon")]
struct Args {
    /// The configuration file.
    #[arg(
        long,
        short = 'c',
        global = true,
        default_value = "/etc/corral/corral.toml"
    )]
    config: PathBuf,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run this replica (the default).
    Run,
    /// Bootstrap a new cluster: the local replica (already running) initializes
    /// Raft with the replicas of the file and creates its cluster definition.
    /// Run once, on one replica, after starting them all.
    Init {
        /// How long to keep trying to reach the local replica.
        #[arg(long, default_value = "30")]
        timeout_seconds: u64,
    },
    /// Validate the configuration file and exit.
    CheckConfig,
    /// Start a new cluster from a backup (`corral admin snapshot save`):
    /// seeds this replica's empty data directory with the backup's state
    /// and the file's replicas as voters. Run it on every controller of the
    /// new cluster with the same backup and the same replicas, then start
    /// them; `corrald init` is not needed (and does nothing).
    Restore {
        /// The backup file.
        backup: PathBuf,
    },
    /// Disaster recovery, when a majority of the controllers is lost for
    /// good: write a backup of everything this stopped replica's directory
    /// holds (its snapshot and its whole log, replayed), to restore a new
    /// cluster from. Says what may be lost.
    Salvage {
        /// The backup file to write (never over an existing file).
        out: PathBuf,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    corral_logging::init_daemon(DEFAULT_LOG_FILTER);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("corrald: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("corrald: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let config = config::load(&args.config)?;
    match args.command.unwrap_or(Command::Run) {
        Command::CheckConfig => {
            println!(
                "{}: cluster '{}', replica {} of {}, {} nodes, {} partitions: OK",
                config.source.display(),
                config.cluster_name,
                config.id,
                config.replicas.len(),
                config.cluster.nodes.len(),
                config.cluster.partitions.len()
            );
            Ok(())
        }
        Command::Restore { backup } => restore(&config, &backup),
        Command::Salvage { out } => salvage(&config, &out).await,
        Command::Init { timeout_seconds } => {
            init(config, Duration::from_secs(timeout_seconds)).await
        }
        Command::Run => {
            let controller = Controller::start(config).await?;
            wait_for_signal().await?;
            tracing::info!("stopping");
            controller.shutdown().await;
            Ok(())
        }
    }
}

async fn wait_for_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}

/// `corrald restore BACKUP`: checks the backup whole, then seeds this
/// replica's directory with it.
fn restore(config: &config::ControllerConfig, backup: &std::path::Path) -> anyhow::Result<()> {
    let bytes =
        std::fs::read(backup).with_context(|| format!("cannot read {}", backup.display()))?;
    let read =
        corral_state::backup::decode(&bytes).with_context(|| format!("{}", backup.display()))?;
    let state = read.state()?;
    let meta = &read.meta;
    if meta.cluster_name != config.cluster_name {
        eprintln!(
            "corrald: note: the backup is of cluster '{}'; this file names the cluster '{}', which jobs will see as SLURM_CLUSTER_NAME from now on",
            meta.cluster_name, config.cluster_name
        );
    }
    let voters = config.members();
    corral_consensus::restore::seed(&config.data_dir, &voters, meta.index, read.state_snapshot)?;
    let running = state
        .jobs()
        .values()
        .filter(|j| !j.state.is_terminal() && j.current_attempt().is_some_and(|a| a.is_live()))
        .count();
    println!(
        "replica {} of cluster '{}' restored from {} (taken at log index {}, term {}, by corral {}): {} jobs, {} nodes, {} accounts; voters {}",
        config.id,
        config.cluster_name,
        backup.display(),
        meta.index,
        meta.term,
        meta.build,
        state.jobs().len(),
        state.nodes().len(),
        state.accounts().len(),
        voters
            .keys()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(","),
    );
    println!(
        "restore every replica of the file ({}) from this same backup, then start them; changes made after the backup was taken are not in it{}",
        voters.len(),
        if running > 0 {
            format!(
                "; {running} jobs were running then: each is requeued, or carries on if its nodes' agents still run it, once the agents attach"
            )
        } else {
            String::new()
        }
    );
    Ok(())
}

/// `corrald salvage OUT`: a backup of this stopped replica's whole log.
async fn salvage(config: &config::ControllerConfig, out: &std::path::Path) -> anyhow::Result<()> {
    if out.exists() {
        anyhow::bail!("{} exists; give a new file name", out.display());
    }
    let salvaged = corral_consensus::salvage::salvage(&config.data_dir).await?;
    let last = salvaged.last.map_or(0, |l| l.index);
    let last_term = salvaged.last.map_or(0, |l| l.leader_id.term);
    let meta = corral_state::backup::BackupMeta {
        cluster_name: config.cluster_name.clone(),
        index: last,
        term: last_term,
        taken_at_ms: corral_controller::clock::now().0,
        build: env!("CARGO_PKG_VERSION").to_string(),
        format: corral_state::snapshot::FORMAT_VERSION,
    };
    let file = corral_state::backup::encode(&meta, &salvaged.snapshot)?;
    let state = corral_state::backup::decode(&file)?.state()?;
    write_new_file(out, &file)?;
    eprintln!(
        "corrald: DISASTER RECOVERY from replica {} alone ({}).",
        config.id,
        config.data_dir.display()
    );
    eprintln!(
        "  Its log ends at index {last}, an entry of term {last_term} (it last voted in term {}); the last commit it recorded is index {} (a lower bound: that record is not synced at once). With several survivors, salvage each and restore from the one whose last entry has the highest term, then the highest index.",
        salvaged.term,
        salvaged.committed.map_or(0, |c| c.index),
    );
    eprintln!(
        "  The backup holds its snapshot (index {}) and the {} log entries after it, up to {} of them after its last recorded commit: those may never have been acknowledged to anyone, and now take effect.",
        salvaged.snapshot_at.map_or(0, |s| s.index),
        salvaged.replayed,
        salvaged.unconfirmed(),
    );
    eprintln!(
        "  LOST: whatever the other controllers committed after index {last} (submissions, cancellations, agents' reports of those last moments). Jobs whose end was lost run again or are reported again when their agents attach."
    );
    eprintln!(
        "  Next: `corrald restore {}` on every controller of a NEW cluster (empty data directories), then start them. Never start the old replicas again beside it.",
        out.display()
    );
    println!(
        "{}: {} jobs, {} nodes, at log index {last}",
        out.display(),
        state.jobs().len(),
        state.nodes().len()
    );
    Ok(())
}

/// Writes `bytes` to the new file `path`, durably.
fn write_new_file(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut file = std::fs::File::create_new(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Calls `Bootstrap` on this file's replica with the file's controller
/// certificate, retrying until the replica answers.
async fn init(config: config::ControllerConfig, patience: Duration) -> anyhow::Result<()> {
    corral_pki::install_crypto_provider();
    let tls = TlsMaterial::load(&config.tls.ca, &config.tls.cert, &config.tls.key)?;
    let api = config.this_replica().api.clone();
    let endpoint = Endpoint::from_shared(format!("https://{api}"))
        .with_context(|| format!("'{api}' is not a usable address"))?
        .tls_config(tls.client_config())
        .context("client TLS")?
        .connect_timeout(Duration::from_secs(2));
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let attempt = async {
            let channel = endpoint.connect().await?;
            let reply = CorralClient::new(channel).bootstrap(Empty {}).await;
            anyhow::Ok(reply)
        };
        match attempt.await {
            Ok(Ok(reply)) => {
                println!("{}", reply.into_inner().message);
                return Ok(());
            }
            // The replica answered with a refusal: retrying will not help.
            Ok(Err(status)) if status.code() != tonic::Code::Unavailable => {
                anyhow::bail!("bootstrap refused: {}", status.message());
            }
            Ok(Err(status)) if tokio::time::Instant::now() < deadline => {
                tracing::debug!("replica at {api} not ready: {}", status.message());
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Ok(Err(status)) => {
                anyhow::bail!(
                    "could not bootstrap through the replica at {api} within {} s: {}",
                    patience.as_secs(),
                    status.message()
                );
            }
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::debug!("replica at {api} not ready: {e:#}");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => {
                return Err(e.context(format!(
                    "could not bootstrap through the replica at {api} within {} s; is `corrald --config {}` running?",
                    patience.as_secs(),
                    config.source.display()
                )));
            }
        }
    }
}
