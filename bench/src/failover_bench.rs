//! `corral-bench failover`: SIGKILL the leader's process under light write load
//! and time until a write commits again; then count term changes while idle
//! (spurious elections).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use corral_consensus::RaftTiming;
use corral_consensus::leader_client::LeaderClient;
use corral_state::account::Account;
use corral_state::command::Command;
use corral_state::{Actor, Role};

use crate::figures::{Report, Samples};
use crate::process_cluster::ProcessCluster;

/// Options of `corral-bench failover`.
#[derive(Args)]
pub struct FailoverArgs {
    /// Leader kills.
    #[arg(long, default_value_t = 10)]
    trials: usize,
    /// Seconds of idleness over which term changes are counted (0 skips it).
    #[arg(long, default_value_t = 60)]
    idle_seconds: u64,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    json: bool,
}

fn mark(name: &str) -> Command {
    let account = Account { name: name.into(), parent: Some("root".into()), shares: 1, default_qos: None, description: String::new() };
    Command::SetAccount { account, by: Actor { user: "root".into(), role: Role::Admin } }
}

async fn leader_of(client: &LeaderClient, cluster: &ProcessCluster) -> Option<(u64, u64)> {
    for id in cluster.ids() {
        if let Ok(m) = client.metrics(id).await
            && m.role == "Leader"
        {
            return Some((id, m.term));
        }
    }
    None
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
pub fn run(args: &FailoverArgs) -> anyhow::Result<()> {
    let mut cluster = ProcessCluster::start(3, Vec::new())?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let client = Arc::new(cluster.client(Duration::from_secs(30)));
        client.propose(vec![mark("warmup")]).await.map_err(|e| anyhow::anyhow!("no leader at start: {e}"))?;
        // Light background load: one write every 20 ms from another client.
        let background = Arc::new(cluster.client(Duration::from_secs(30)));
        let stop = Arc::new(AtomicBool::new(false));
        let load = {
            let (background, stop) = (Arc::clone(&background), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let _ = background.propose(vec![mark(&format!("load{i}"))]).await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        let mut failovers = Samples::default();
        for trial in 0..args.trials {
            let (leader, _) = leader_of(&client, &cluster).await.ok_or_else(|| anyhow::anyhow!("no leader before trial {trial}"))?;
            let killed_at = Instant::now();
            cluster.kill(leader)?;
            client.propose(vec![mark(&format!("after{trial}"))]).await.map_err(|e| anyhow::anyhow!("no write after kill {trial}: {e}"))?;
            failovers.push(killed_at.elapsed());
            cluster.launch(leader, false)?;
            // Let the restarted replica rejoin before the next kill.
            let deadline = Instant::now() + Duration::from_secs(30);
            while client.metrics(leader).await.map_or(true, |m| m.leader.is_none()) {
                anyhow::ensure!(Instant::now() < deadline, "replica {leader} did not rejoin");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let _ = load.await;
        let mut report = Report::default();
        report.put("trials", args.trials as u64);
        report.put("failover_ms_median", failovers.quantile(0.5) / 1e3);
        report.put("failover_ms_max", failovers.quantile(1.0) / 1e3);
        report.put("failover_ms_min", failovers.quantile(0.0) / 1e3);
        if args.idle_seconds > 0 {
            let before = max_term(&client, &cluster).await;
            tokio::time::sleep(Duration::from_secs(args.idle_seconds)).await;
            let after = max_term(&client, &cluster).await;
            report.put("idle_seconds", args.idle_seconds);
            report.put("idle_term_changes", after.saturating_sub(before));
        }
        let timing = RaftTiming::default();
        report.put("heartbeat_ms", timing.heartbeat_ms);
        report.put("election_timeout_ms", format!("{}-{}", timing.election_min_ms, timing.election_max_ms));
        report.print(args.json)
    })
}
