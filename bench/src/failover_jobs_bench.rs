//! `corral-bench failover-jobs`: what losing the leader does to running jobs,
//! as their users and their GPUs see it. On a local cluster of real processes
//! (3 `corrald`, 4 `corral-agent` with 8 simulated GPUs each) six jobs fill
//! every GPU: two 2-node gangs whose ranks run through `srun`, and four
//! single-node jobs. Then the leader is SIGKILLed `--kills` times (and started
//! again each time), SIGSTOPped for each of `--stops` seconds, and every
//! controller is killed for each of `--outage` seconds and started again
//! (`--kills 0 --stops 0 --outage 60,300`: the controllers away for a minute,
//! then five, which the agents ride through on each other's word).
//!
//! Figures: jobs killed (a job whose attempt changed, or that no longer runs,
//! lost its work since its last checkpoint), fencing events in the agents'
//! logs, GPUs seen held by two attempts at once (every process's environment
//! in `/proc`, every 50 ms), the election (fault to a new leader, polled every
//! 5 ms), each agent's reattach time after the election (its node's new
//! registration, stamped by the leader) and how long `corral submit` took when
//! typed 100 ms after the leader stopped.
//!
//! `--bin-dir` runs other builds' binaries (`corral`, `corrald`,
//! `corral-agent`), to compare before and after a change.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Args;
use corral_proto::api::corral_client::CorralClient;
use corral_proto::api::{CancelJobsRequest, Empty, ListNodesRequest};
use corral_proto::records;
use corral_state::job::JobState;
use corral_state::node::Node;
use tonic::transport::Channel;

use crate::figures::{Report, Samples};
use crate::gpu_occupancy::Watcher;
use crate::local_cluster::{LocalCluster, current_user, job, poll, submit};

/// Options of the benchmark.
#[derive(Debug, Args)]
pub struct FailoverJobsArgs {
    /// Leader SIGKILLs (each followed by a restart of the killed controller).
    #[arg(long, default_value_t = 10)]
    kills: usize,
    /// Leader SIGSTOPs, each this many seconds long (comma-separated; 0: none).
    #[arg(long, value_delimiter = ',', default_value = "3,12")]
    stops: Vec<u64>,
    /// Outages of every controller, each this many seconds long
    /// (comma-separated; 0 or none: no outage). Longer than the lease and
    /// margin (15 s), they show that agents keep their jobs while the
    /// controllers are away.
    #[arg(long, value_delimiter = ',', default_value = "2")]
    outage: Vec<u64>,
    /// Where `corral`, `corrald` and `corral-agent` are (default: beside this program).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// The faults, in the order they are done.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Kill,
    Stop(u64),
    Outage(u64),
}

/// What one fault did.
struct Trial {
    election: Duration,
    reattach: Vec<Duration>,
    submit: Option<Duration>,
}

/// Runs the benchmark.
pub fn run(args: &FailoverJobsArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(run_async(args))
}

async fn run_async(args: &FailoverJobsArgs) -> anyhow::Result<()> {
    let cluster = LocalCluster::up(args.bin_dir.as_deref(), 4)?;
    let watcher = Watcher::start(Duration::from_millis(50), cluster.dir().to_path_buf());
    let jobs = start_jobs(&cluster).await?;
    let mut faults: Vec<Fault> = vec![Fault::Kill; args.kills];
    faults.extend(
        args.stops
            .iter()
            .filter(|s| **s > 0)
            .map(|s| Fault::Stop(*s)),
    );
    faults.extend(
        args.outage
            .iter()
            .filter(|s| **s > 0)
            .map(|s| Fault::Outage(*s)),
    );
    let mut report = Report::default();
    let (mut election, mut reattach) = (Samples::default(), Samples::default());
    for fault in &faults {
        let trial = trial(&cluster, *fault)
            .await
            .with_context(|| format!("during {fault:?}"))?;
        let (name, seconds) = match fault {
            Fault::Kill => ("kill", 0),
            Fault::Stop(s) => ("stop", *s),
            Fault::Outage(s) => ("outage", *s),
        };
        let mut agents = Samples::default();
        for r in &trial.reattach {
            agents.push(*r);
        }
        if !matches!(fault, Fault::Kill) {
            let prefix = format!("{name}_{seconds}s");
            report.put(
                &format!("{prefix}_election_ms"),
                trial.election.as_secs_f64() * 1000.0,
            );
            report.put(
                &format!("{prefix}_reattach_ms_max"),
                agents.quantile(1.0) / 1000.0,
            );
            if let Some(submit) = trial.submit {
                report.put(
                    &format!("{prefix}_submit_ms"),
                    submit.as_secs_f64() * 1000.0,
                );
            }
        }
        election.push(trial.election);
        reattach.merge(agents);
    }
    let findings = watcher.stop();
    let admin = cluster.leader_client("user-corral-admin").await?;
    let mut killed = 0u64;
    for id in &jobs {
        let job = job(&admin, *id).await?;
        if job.state != JobState::Running || job.attempts.len() > 1 {
            killed += 1;
        }
    }
    let fenced = fence_events(&cluster)?;
    admin
        .clone()
        .cancel_jobs(CancelJobsRequest {
            jobs: jobs.iter().map(u64::to_string).collect(),
            ..CancelJobsRequest::default()
        })
        .await?;
    for (at, node, gpu, attempts) in findings.double_booked.iter().take(5) {
        eprintln!(
            "{node} GPU {gpu} held by {attempts:?} at {:.1} s",
            at.as_secs_f64()
        );
    }
    report.put("jobs", jobs.len() as u64);
    report.put("faults", faults.len() as u64);
    report.put("jobs_killed", killed);
    report.put("agent_fence_events", fenced);
    report.put("gpu_looks", findings.looks);
    report.put(
        "gpus_double_booked_looks",
        findings.double_booked.len() as u64,
    );
    report.put("kills", args.kills as u64);
    report.put("election_ms_median", election.quantile(0.5) / 1000.0);
    report.put("election_ms_max", election.quantile(1.0) / 1000.0);
    report.put(
        "reattach_after_election_ms_median",
        reattach.quantile(0.5) / 1000.0,
    );
    report.put(
        "reattach_after_election_ms_max",
        reattach.quantile(1.0) / 1000.0,
    );
    report.print(args.json)
}

/// Fills every GPU: two 2-node gangs (4 GPUs a node, a rank per node through
/// srun) and four single-node 4-GPU jobs; returns once each runs on every node.
async fn start_jobs(cluster: &LocalCluster) -> anyhow::Result<Vec<u64>> {
    let user = cluster
        .leader_client(&format!("user-{}", current_user()?))
        .await?;
    let admin = cluster.leader_client("user-corral-admin").await?;
    let gang = "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --gpus-per-node=4\n#SBATCH --output=job-%j.out\nexport PATH=\"$SLURM_SUBMIT_DIR/bin:$PATH\"\nsrun sleep 100000\n";
    let single = "#!/bin/bash\n#SBATCH -N 1\n#SBATCH --gpus-per-node=4\n#SBATCH --output=job-%j.out\nsleep 100000\n";
    let mut ids = Vec::new();
    for script in [gang, gang, single, single, single, single] {
        ids.push(submit(&user, cluster.dir(), "failover-jobs.sh", script).await?);
    }
    for id in &ids {
        poll(&admin, *id, Duration::from_secs(60), |j| {
            j.state == JobState::Running
                && j.current_attempt()
                    .is_some_and(|a| a.started_on.len() == a.allocation.len())
        })
        .await?;
    }
    Ok(ids)
}

/// Does `fault` to the leader (or every controller) and measures what follows;
/// returns once every agent is attached again and every controller runs.
async fn trial(cluster: &LocalCluster, fault: Fault) -> anyhow::Result<Trial> {
    let (old_leader, old_term) = leader(cluster, &[]).await?;
    let ids: Vec<u64> = (1..=cluster.addresses.len() as u64).collect();
    let started_ms = wall_ms();
    let started = Instant::now();
    let mut submitter = None;
    match fault {
        Fault::Kill => signal(cluster, old_leader, "KILL")?,
        Fault::Stop(_) => {
            signal(cluster, old_leader, "STOP")?;
            // What a user typing right after the stop waits for.
            let corral = cluster.corral.clone();
            let (addresses, dir) = (cluster.addresses.clone(), cluster.dir().to_path_buf());
            submitter = Some(std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                submit_with_cli(&corral, &addresses, &dir)
            }));
        }
        Fault::Outage(seconds) => {
            for id in &ids {
                signal(cluster, *id, "KILL")?;
            }
            tokio::time::sleep(Duration::from_secs(seconds)).await;
            for id in &ids {
                cluster.start(&format!("controller-{id}"))?;
            }
        }
    }
    let skip: Vec<u64> = match fault {
        Fault::Kill | Fault::Stop(_) => vec![old_leader],
        Fault::Outage(_) => Vec::new(),
    };
    // After an outage the old leader may lead again in its own term (its
    // committed vote survives the restart); otherwise the term moves on.
    let newer_than = match fault {
        Fault::Outage(_) => old_term.saturating_sub(1),
        Fault::Kill | Fault::Stop(_) => old_term,
    };
    let (new_leader, elected_ms) = elected(cluster, &skip, newer_than).await?;
    let election = Duration::from_millis(elected_ms.saturating_sub(started_ms));
    let reattach = reattached(cluster, new_leader, started_ms, elected_ms).await?;
    match fault {
        Fault::Kill => {
            cluster.start(&format!("controller-{old_leader}"))?;
            rejoined(cluster, old_leader).await?;
        }
        Fault::Stop(seconds) => {
            tokio::time::sleep_until((started + Duration::from_secs(seconds)).into()).await;
            signal(cluster, old_leader, "CONT")?;
            rejoined(cluster, old_leader).await?;
        }
        Fault::Outage(_) => {
            for id in &ids {
                rejoined(cluster, *id).await?;
            }
        }
    }
    let submit = match submitter {
        Some(thread) => Some(
            thread
                .join()
                .map_err(|_| anyhow::anyhow!("the submitting thread panicked"))??,
        ),
        None => None,
    };
    Ok(Trial {
        election,
        reattach,
        submit,
    })
}

/// Sends `signal` to controller `id`'s process.
fn signal(cluster: &LocalCluster, id: u64, signal: &str) -> anyhow::Result<()> {
    let pid = cluster.pid(&format!("controller-{id}"))?;
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()?;
    if !status.success() {
        bail!("kill -{signal} {pid} failed");
    }
    Ok(())
}

/// `corral submit --hold --wrap true` with every controller's address: how
/// long the user waits (the job is held, so it never runs).
fn submit_with_cli(
    corral: &std::path::Path,
    addresses: &[String],
    dir: &std::path::Path,
) -> anyhow::Result<Duration> {
    let certs = dir.join("certs");
    let user = format!("user-{}", current_user()?);
    let started = Instant::now();
    let out = Command::new(corral)
        .arg("--cluster")
        .arg(addresses.join(","))
        .arg("--ca")
        .arg(certs.join("ca.pem"))
        .arg("--cert")
        .arg(certs.join(format!("{user}.pem")))
        .arg("--key")
        .arg(certs.join(format!("{user}.key")))
        .args(["submit", "--hold", "--wrap", "true"])
        .current_dir(dir)
        .env_remove("CORRAL_CONFIG")
        .output()?;
    let took = started.elapsed();
    if !out.status.success() {
        bail!(
            "corral submit failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(took)
}

/// The leader and its term, as a controller that leads says (controllers in
/// `skip` are not asked).
async fn leader(cluster: &LocalCluster, skip: &[u64]) -> anyhow::Result<(u64, u64)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(found) = leading(cluster, skip).await {
            return Ok(found);
        }
        if Instant::now() > deadline {
            bail!("no leader within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A controller (not in `skip`) that says it leads, and its term.
async fn leading(cluster: &LocalCluster, skip: &[u64]) -> Option<(u64, u64)> {
    for (index, address) in cluster.addresses.iter().enumerate() {
        let id = index as u64 + 1;
        if skip.contains(&id) {
            continue;
        }
        let Ok(mut client) = cluster.client_at("user-corral-admin", address).await else {
            continue;
        };
        let Ok(status) = client.cluster_status(Empty {}).await else {
            continue;
        };
        let status = status.into_inner();
        if status.leader_id == Some(status.this_id) {
            return Some((status.this_id, status.term));
        }
    }
    None
}

/// Waits for a leader (not in `skip`) of a term after `old_term`; returns it
/// and when it was first seen (wall clock, ms).
async fn elected(
    cluster: &LocalCluster,
    skip: &[u64],
    old_term: u64,
) -> anyhow::Result<(u64, u64)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some((id, term)) = leading(cluster, skip).await
            && term > old_term
        {
            return Ok((id, wall_ms()));
        }
        if Instant::now() > deadline {
            bail!("no new leader within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until every node registered again after `since_ms`; returns each
/// node's registration time after `elected_ms`.
async fn reattached(
    cluster: &LocalCluster,
    leader: u64,
    since_ms: u64,
    elected_ms: u64,
) -> anyhow::Result<Vec<Duration>> {
    let address = &cluster.addresses[leader as usize - 1];
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut client: Option<CorralClient<Channel>> = None;
    loop {
        if client.is_none() {
            client = cluster.client_at("user-corral-admin", address).await.ok();
        }
        if let Some(c) = client.as_mut()
            && let Ok(reply) = c.list_nodes(ListNodesRequest::default()).await
        {
            let nodes: Vec<Node> = reply
                .into_inner()
                .nodes_json
                .iter()
                .map(|json| records::decode("node", json))
                .collect::<Result<_, _>>()?;
            let registered: BTreeMap<String, u64> = nodes
                .iter()
                .filter_map(|n| Some((n.name.clone(), n.registration.as_ref()?.at.as_ms())))
                .filter(|(_, at)| *at >= since_ms)
                .collect();
            if registered.len() == nodes.len() {
                return Ok(registered
                    .values()
                    .map(|at| Duration::from_millis(at.saturating_sub(elected_ms)))
                    .collect());
            }
        }
        if Instant::now() > deadline {
            bail!("not every agent reattached within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until controller `id` answers and follows a leader.
async fn rejoined(cluster: &LocalCluster, id: u64) -> anyhow::Result<()> {
    let address = &cluster.addresses[id as usize - 1];
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(mut client) = cluster.client_at("user-corral-admin", address).await
            && let Ok(status) = client.cluster_status(Empty {}).await
            && status.into_inner().leader_id.is_some()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("controller {id} did not rejoin within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// "lease lapsed" lines in the agents' logs: each is an agent that killed every
/// job on its node.
fn fence_events(cluster: &LocalCluster) -> anyhow::Result<u64> {
    let mut count = 0;
    for entry in std::fs::read_dir(cluster.dir().join("logs"))? {
        let path = entry?.path();
        let is_agent = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("agent-"));
        if is_agent {
            count += std::fs::read_to_string(&path)?
                .matches("lease lapsed")
                .count() as u64;
        }
    }
    Ok(count)
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
