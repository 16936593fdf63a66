//! `corral-bench raft`: commit throughput and latency of job submissions through
//! a replica group of real processes on loopback, fsync on. Clients are closed
//! loops: each proposes one submission and waits for its commit before the next.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use corral_consensus::RaftTiming;
use corral_consensus::leader_client::LeaderClient;
use corral_consensus::proposer::{MAX_COMMANDS_PER_ENTRY, MAX_ENTRIES_IN_FLIGHT};
use corral_state::account::User;
use corral_state::command::Command;
use corral_state::job::{BatchScript, JobSpec};
use corral_state::node::{GpuDefinition, NodeDefinition};
use corral_state::partition::{Partition, PreemptMode};
use corral_state::slurm::duration::TimeLimit;
use corral_state::slurm::gres::GpuRequest;
use corral_state::{Actor, Role, Timestamp};

use crate::figures::{Report, Samples};
use crate::process_cluster::ProcessCluster;

/// Options of `corral-bench raft`.
#[derive(Args)]
pub struct RaftArgs {
    /// Replica processes.
    #[arg(long, default_value_t = 3)]
    replicas: u64,
    /// Concurrent closed-loop clients.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Measured seconds.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Approximate bytes per submission (the batch script is padded to it).
    #[arg(long, default_value_t = 1024)]
    payload_bytes: usize,
    /// Send each proposal as a unary gRPC call of its own, as a client making
    /// one call per submission would, instead of a frame of the leader's call
    /// stream (how a follower controller forwards its clients' submissions).
    #[arg(long)]
    unary_calls: bool,
    /// Replicas record the replica's own metrics (proposal and sync latency
    /// histograms, process figures, log lines) as corrald does, and each is
    /// scraped every second (Prometheus scrapes every 15 s by default): what
    /// metrics cost the commit path. The controller's state gauges, read
    /// only at a scrape, are not registered here.
    #[arg(long)]
    metrics: bool,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    json: bool,
}

fn admin() -> Actor {
    Actor {
        user: "root".into(),
        role: Role::Admin,
    }
}

/// Nodes, a partition and the benchmark user, so submissions are accepted.
pub fn setup_commands() -> Vec<Command> {
    let nodes = (1..=4)
        .map(|i| NodeDefinition {
            name: format!("n{i}"),
            cpus: 64,
            memory_mb: 512 * 1024,
            gpus: (0..8)
                .map(|index| GpuDefinition {
                    index,
                    gpu_type: "h100".into(),
                })
                .collect(),
            features: BTreeSet::new(),
        })
        .collect();
    let partition = Partition {
        name: "gpu".into(),
        hostlist: "n[1-4]".into(),
        nodes: BTreeSet::new(),
        max_time: TimeLimit::Seconds(86_400),
        default_time: None,
        priority_tier: 1,
        allowed_accounts: None,
        preempt_mode: PreemptMode::Requeue,
        is_default: true,
        up: true,
    };
    let user = User {
        name: "bench".into(),
        default_account: "root".into(),
        accounts: BTreeSet::from(["root".into()]),
        role: Role::User,
        limits: Default::default(),
    };
    vec![
        Command::DefineNodes {
            nodes,
            by: admin(),
            at: Timestamp::from_secs(1),
        },
        Command::SetPartition {
            partition,
            by: admin(),
        },
        Command::SetUser { user, by: admin() },
    ]
}

/// One job submission of about `payload_bytes`.
pub fn submission(payload_bytes: usize, at: Timestamp) -> Command {
    let mut spec = JobSpec::sbatch_defaults("bench", "bench", "/tmp");
    spec.gpus_per_node = Some(GpuRequest {
        gpu_type: None,
        count: 1,
    });
    let header = "#!/bin/bash\n";
    let script = format!(
        "{header}{}\n",
        "#".repeat(payload_bytes.saturating_sub(header.len() + 1))
    );
    let batch = BatchScript {
        script,
        argv: Vec::new(),
        environment: Default::default(),
    };
    Command::Submit {
        spec,
        batch,
        by: Actor {
            user: "bench".into(),
            role: Role::User,
        },
        at,
        key: None,
    }
}

/// What one client saw: latencies of accepted submissions, submissions that
/// failed (no answer, or an error), and submissions that committed but the state
/// refused (e.g. MaxJobCount, which a long run reaches: bench jobs never run).
#[derive(Default)]
struct ClientTally {
    latencies: Samples,
    errors: u64,
    rejected: u64,
}

async fn client_loop(
    client: Arc<LeaderClient>,
    payload_bytes: usize,
    until: Instant,
) -> ClientTally {
    let mut tally = ClientTally::default();
    let base = Timestamp::from_secs(2);
    while Instant::now() < until {
        let t = Instant::now();
        match client.propose(vec![submission(payload_bytes, base)]).await {
            Ok(results) if results.iter().all(Result::is_ok) => tally.latencies.push(t.elapsed()),
            Ok(_) => tally.rejected += 1,
            Err(_) => tally.errors += 1,
        }
    }
    tally
}

async fn max_term(client: &LeaderClient, cluster: &ProcessCluster) -> u64 {
    let mut term = 0;
    for id in cluster.ids() {
        if let Ok(m) = client.metrics(id).await {
            term = term.max(m.term);
        }
    }
    term
}

/// Runs the benchmark and prints its figures.
pub fn run(args: &RaftArgs) -> anyhow::Result<()> {
    let extra = if args.metrics {
        vec!["--metrics".to_string()]
    } else {
        Vec::new()
    };
    let cluster = ProcessCluster::start(args.replicas, extra)?;
    let scrapes = args.metrics.then(|| Scraper::start(&cluster));
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let client = cluster.client(Duration::from_secs(30));
        let client = Arc::new(if args.unary_calls {
            client.with_unary_calls()
        } else {
            client
        });
        for command in setup_commands() {
            client
                .propose(vec![command])
                .await
                .map_err(|e| anyhow::anyhow!("setup failed: {e}"))?;
        }
        let term_before = max_term(&client, &cluster).await;
        let started = Instant::now();
        let until = started + Duration::from_secs(args.seconds);
        let tasks: Vec<_> = (0..args.clients)
            .map(|_| tokio::spawn(client_loop(Arc::clone(&client), args.payload_bytes, until)))
            .collect();
        let mut latencies = Samples::default();
        let (mut errors, mut rejected) = (0, 0);
        for task in tasks {
            let tally = task.await?;
            latencies.merge(tally.latencies);
            errors += tally.errors;
            rejected += tally.rejected;
        }
        let elapsed = started.elapsed().as_secs_f64();
        let term_changes = max_term(&client, &cluster)
            .await
            .saturating_sub(term_before);
        let commits = latencies.len();
        let mut fsyncs = (0, 0, 0);
        for id in cluster.ids() {
            if let Ok(m) = client.metrics(id).await
                && m.role == "Leader"
            {
                fsyncs = (m.fsyncs, m.fsync_requests, m.fsync_micros);
            }
        }
        let timing = RaftTiming::default();
        let mut report = Report::default();
        report.put("replicas", args.replicas);
        report.put("clients", args.clients as u64);
        report.put("payload_bytes", args.payload_bytes as u64);
        report.put(
            "client_calls",
            if args.unary_calls { "unary" } else { "stream" },
        );
        report.put("seconds", elapsed);
        report.put("commits", commits as u64);
        report.put("errors", errors);
        report.put("rejected", rejected);
        report.put("term_changes", term_changes);
        report.put("commits_per_s", commits as f64 / elapsed);
        report.put("latency_ms_p50", latencies.quantile(0.5) / 1e3);
        report.put("latency_ms_p99", latencies.quantile(0.99) / 1e3);
        report.put("latency_ms_max", latencies.quantile(1.0) / 1e3);
        report.put("leader_fsyncs", fsyncs.0);
        report.put("leader_fsync_requests", fsyncs.1);
        report.put(
            "leader_fsync_ms_mean",
            fsyncs.2 as f64 / 1e3 / fsyncs.0.max(1) as f64,
        );
        report.put("heartbeat_ms", timing.heartbeat_ms);
        report.put(
            "election_timeout_ms",
            format!("{}-{}", timing.election_min_ms, timing.election_max_ms),
        );
        report.put("max_commands_per_entry", MAX_COMMANDS_PER_ENTRY as u64);
        report.put("max_entries_in_flight", MAX_ENTRIES_IN_FLIGHT as u64);
        report.put("metrics", if args.metrics { "on" } else { "off" });
        if let Some(scrapes) = &scrapes {
            let (count, bytes) = scrapes.figures();
            report.put("metrics_scrapes", count);
            report.put("metrics_scrape_bytes_mean", bytes / count.max(1));
        }
        report.print(args.json)
    })
}

/// Scrapes every replica's `/metrics` once a second on a thread of its own,
/// until dropped.
struct Scraper {
    stop: Arc<std::sync::atomic::AtomicBool>,
    tally: Arc<std::sync::Mutex<(u64, u64)>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Scraper {
    fn start(cluster: &ProcessCluster) -> Scraper {
        let files: Vec<_> = cluster
            .ids()
            .into_iter()
            .map(|id| cluster.data_dir(id).join("metrics-address"))
            .collect();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let tally = Arc::new(std::sync::Mutex::new((0u64, 0u64)));
        let thread = {
            let (stop, tally) = (Arc::clone(&stop), Arc::clone(&tally));
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for file in &files {
                        let Some(bytes) = std::fs::read_to_string(file)
                            .ok()
                            .and_then(|address| scrape(address.trim()))
                        else {
                            continue;
                        };
                        if let Ok(mut tally) = tally.lock() {
                            tally.0 += 1;
                            tally.1 += bytes;
                        }
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
            })
        };
        Scraper {
            stop,
            tally,
            thread: Some(thread),
        }
    }

    /// Scrapes so far, and their bytes in all.
    fn figures(&self) -> (u64, u64) {
        self.tally.lock().map_or((0, 0), |t| *t)
    }
}

impl Drop for Scraper {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One `GET /metrics`: the reply's length.
fn scrape(address: &str) -> Option<u64> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).ok()?;
    reply
        .starts_with(b"HTTP/1.1 200")
        .then_some(reply.len() as u64)
}
