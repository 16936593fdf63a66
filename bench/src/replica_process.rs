//! `corral-bench replica`: one consensus replica as its own process, for the
//! Raft and failover benchmarks (which start, kill and restart these). Runs until
//! killed.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use corral_consensus::{RaftTiming, Replica, ReplicaAddr, ReplicaConfig};
use corral_pki::TlsMaterial;

/// Options of `corral-bench replica`.
#[derive(Args)]
pub struct ReplicaArgs {
    /// Replica id.
    #[arg(long)]
    pub id: u64,
    /// Data directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// Every replica as `id=host:port`, comma-separated (this one included).
    #[arg(long)]
    pub peers: String,
    /// PEM files: the controllers' CA, this replica's certificate and key.
    #[arg(long)]
    pub ca: PathBuf,
    #[arg(long)]
    /// This replica's certificate.
    pub cert: PathBuf,
    /// This replica's key.
    #[arg(long)]
    pub key: PathBuf,
    /// Initialize the cluster with every peer as a voter (give it to one replica).
    #[arg(long)]
    pub bootstrap: bool,
    /// Leader heartbeat, ms.
    #[arg(long, default_value_t = RaftTiming::default().heartbeat_ms)]
    pub heartbeat_ms: u64,
    /// Election timeout range, ms.
    #[arg(long, default_value_t = RaftTiming::default().election_min_ms)]
    pub election_min_ms: u64,
    /// Election timeout range, ms.
    #[arg(long, default_value_t = RaftTiming::default().election_max_ms)]
    pub election_max_ms: u64,
    /// Record metrics as corrald does and serve them on a loopback port,
    /// written to `DIR/metrics-address`.
    #[arg(long)]
    pub metrics: bool,
}

/// Parses `1=127.0.0.1:7001,2=...`.
pub fn parse_peers(peers: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    peers
        .split(',')
        .map(|entry| {
            let (id, addr) = entry
                .split_once('=')
                .ok_or_else(|| anyhow::anyhow!("peer '{entry}' is not id=host:port"))?;
            Ok((id.parse()?, addr.to_string()))
        })
        .collect()
}

/// Runs the replica until the process is killed.
pub fn run(args: &ReplicaArgs) -> anyhow::Result<()> {
    let peers = parse_peers(&args.peers)?;
    let listen = peers
        .get(&args.id)
        .ok_or_else(|| anyhow::anyhow!("--peers does not list replica {}", args.id))?
        .parse()?;
    let tls = TlsMaterial::load(&args.ca, &args.cert, &args.key)?;
    let timing = RaftTiming {
        heartbeat_ms: args.heartbeat_ms,
        election_min_ms: args.election_min_ms,
        election_max_ms: args.election_max_ms,
        ..RaftTiming::default()
    };
    let config = ReplicaConfig {
        id: args.id,
        listen,
        data_dir: args.dir.clone(),
        tls,
        timing,
        cluster_name: "bench".into(),
        clock: None,
        source: None,
    };
    // Logs to stderr when RUST_LOG is set (e.g. RUST_LOG=openraft=debug).
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let _metrics = if args.metrics {
            let metrics = corral_telemetry::Metrics::install("corral-bench-replica")?;
            let server =
                corral_telemetry::serve("127.0.0.1:0".parse()?, metrics.registry().clone()).await?;
            std::fs::create_dir_all(&args.dir)?;
            std::fs::write(
                args.dir.join("metrics-address"),
                server.address().to_string(),
            )?;
            Some(server)
        } else {
            None
        };
        let replica = Replica::start(config).await?;
        if args.bootstrap {
            let members = peers
                .iter()
                .map(|(id, addr)| {
                    (
                        *id,
                        ReplicaAddr {
                            peer: addr.clone(),
                            api: String::new(),
                        },
                    )
                })
                .collect();
            replica.initialize(members).await?;
        }
        std::future::pending::<()>().await;
        Ok(())
    })
}
