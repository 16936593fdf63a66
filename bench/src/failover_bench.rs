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
    /// Leader heartbeat, ms.
    #[arg(long, default_value_t = RaftTiming::default().heartbeat_ms)]
    heartbeat_ms: u64,
    /// Election timeout range, ms.
    #[arg(long, default_value_t = RaftTiming::default().election_min_ms)]
    election_min_ms: u64,
    /// Election timeout range, ms.
    #[arg(long, default_value_t = RaftTiming::default().election_max_ms)]
    election_max_ms: u64,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    json: bool,
}

impl FailoverArgs {
    fn timing_args(&self) -> Vec<String> {
        vec![
            format!("--heartbeat-ms={}", self.heartbeat_ms),
            format!("--election-min-ms={}", self.election_min_ms),
            format!("--election-max-ms={}", self.election_max_ms),
        ]
    }
}

fn mark(name: &str) -> Command {
    let account = Account {
        name: name.into(),
        parent: Some("root".into()),
        shares: 1,
        default_qos: None,
        description: String::new(),
        limits: Default::default(),
    };
    Command::SetAccount {
        account,
        by: Actor {
            user: "root".into(),
            role: Role::Admin,
        },
    }
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

/// Waits until every replica names the same leader in the same term, and that
/// holds for `settle` (so a rejoining replica has settled in).
async fn stable(
    client: &LeaderClient,
    cluster: &ProcessCluster,
    settle: Duration,
) -> anyhow::Result<(u64, u64)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut since: Option<(Instant, (u64, u64))> = None;
    loop {
        let mut seen = std::collections::BTreeSet::new();
        for id in cluster.ids() {
            match client.metrics(id).await {
                Ok(m) => seen.insert((m.leader, m.term)),
                Err(_) => seen.insert((None, 0)),
            };
        }
        let agreed = match seen.into_iter().collect::<Vec<_>>().as_slice() {
            [(Some(leader), term)] => Some((*leader, *term)),
            _ => None,
        };
        since = match (agreed, since) {
            (Some(now), Some((at, then))) if now == then => {
                if at.elapsed() >= settle {
                    return Ok(now);
                }
                Some((at, then))
            }
            (Some(now), _) => Some((Instant::now(), now)),
            (None, _) => None,
        };
        anyhow::ensure!(
            Instant::now() < deadline,
            "the cluster did not settle on one leader"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
    let mut cluster = ProcessCluster::start(3, args.timing_args())?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let client = Arc::new(cluster.client(Duration::from_secs(30)));
        client
            .propose(vec![mark("warmup")])
            .await
            .map_err(|e| anyhow::anyhow!("no leader at start: {e}"))?;
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
        let mut elections = Samples::default();
        for trial in 0..args.trials {
            stable(&client, &cluster, Duration::from_millis(500)).await?;
            let (leader, term) = leader_of(&client, &cluster)
                .await
                .ok_or_else(|| anyhow::anyhow!("no leader before trial {trial}"))?;
            let killed_at = Instant::now();
            cluster.kill(leader)?;
            // Election time: until a survivor reports itself leader in a later term.
            let watcher = {
                let client = Arc::clone(&client);
                let survivors: Vec<u64> = cluster
                    .ids()
                    .into_iter()
                    .filter(|id| *id != leader)
                    .collect();
                tokio::spawn(async move {
                    loop {
                        for id in &survivors {
                            if let Ok(m) = client.metrics(*id).await
                                && m.role == "Leader"
                                && m.term > term
                            {
                                return killed_at.elapsed();
                            }
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                })
            };
            client
                .propose(vec![mark(&format!("after{trial}"))])
                .await
                .map_err(|e| anyhow::anyhow!("no write after kill {trial}: {e}"))?;
            failovers.push(killed_at.elapsed());
            if let Ok(Ok(elected)) = tokio::time::timeout(Duration::from_secs(10), watcher).await {
                elections.push(elected);
            }
            cluster.launch(leader, false)?;
        }
        stop.store(true, Ordering::Relaxed);
        let _ = load.await;
        let mut report = Report::default();
        report.put("trials", args.trials as u64);
        report.put("failover_ms_median", failovers.quantile(0.5) / 1e3);
        report.put("failover_ms_max", failovers.quantile(1.0) / 1e3);
        report.put("failover_ms_min", failovers.quantile(0.0) / 1e3);
        report.put("election_ms_median", elections.quantile(0.5) / 1e3);
        report.put("election_ms_max", elections.quantile(1.0) / 1e3);
        if args.idle_seconds > 0 {
            stable(&client, &cluster, Duration::from_secs(1)).await?;
            let before = max_term(&client, &cluster).await;
            tokio::time::sleep(Duration::from_secs(args.idle_seconds)).await;
            let after = max_term(&client, &cluster).await;
            report.put("idle_seconds", args.idle_seconds);
            report.put("idle_term_changes", after.saturating_sub(before));
        }
        report.put("heartbeat_ms", args.heartbeat_ms);
        report.put(
            "election_timeout_ms",
            format!("{}-{}", args.election_min_ms, args.election_max_ms),
        );
        report.print(args.json)
    })
}
