//! `corral-bench watch`: what open job watches cost the controllers. Users
//! wait for their jobs (`corral wait`, `sbatch --wait`, dashboards) through
//! `WatchJobs` streams that stay open for hours. On a local cluster whose GPUs
//! are all taken, with a queue of pending jobs, it times the local user's
//! submissions and the controllers' CPU use: first with no watch open, then
//! with many watches open, each on one job as `corral wait` opens them. A
//! watch should cost what the changes cost, not what the queue holds.

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use corral_proto::api::ListJobsRequest;

use crate::figures::Report;
use crate::local_cluster::{LocalCluster, current_user};
use crate::test_only_bench::{take_every_gpu_and_queue, timed_submissions};

/// Arguments of `corral-bench watch`.
#[derive(Args)]
pub struct WatchArgs {
    /// Pending jobs in the queue.
    #[arg(long, default_value_t = 10_000)]
    queued: u32,
    /// Watches held open during the second round, spread over the
    /// controllers.
    #[arg(long, default_value_t = 200)]
    watches: usize,
    /// Submissions timed in each round.
    #[arg(long, default_value_t = 200)]
    submissions: usize,
    /// Take the daemons from this directory (another build), not beside this
    /// program.
    #[arg(long)]
    bin_dir: Option<std::path::PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs the benchmark.
pub fn run(args: &WatchArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(run_async(args))
}

async fn run_async(args: &WatchArgs) -> anyhow::Result<()> {
    let cluster = LocalCluster::up(args.bin_dir.as_deref(), 2)?;
    let me = format!("user-{}", current_user()?);
    let user = cluster.leader_client(&me).await?;
    let dir = cluster.dir().to_path_buf();
    let blocker = take_every_gpu_and_queue(&user, &dir, args.queued).await?;

    let cpu_before = controllers_cpu(&cluster)?;
    let started = Instant::now();
    let mut alone = timed_submissions(&user, &dir, args.submissions).await?;
    let alone_cpu = cpu_share(&cluster, cpu_before, started.elapsed())?;

    // Each watch waits for one pending job, as `corral wait` does; they are
    // spread over the three controllers.
    let mut streams = Vec::with_capacity(args.watches);
    for i in 0..args.watches {
        let mut client = cluster
            .client_at(&me, &cluster.addresses[i % cluster.addresses.len()])
            .await
            .context("connecting a watch")?;
        let request = ListJobsRequest {
            job_ids: vec![blocker + 1 + (i as u64 % u64::from(args.queued.max(1)))],
            ..ListJobsRequest::default()
        };
        let mut stream = client
            .watch_jobs(request)
            .await
            .context("opening a watch")?
            .into_inner();
        // Its first event is the job as it is now.
        tokio::time::timeout(Duration::from_secs(30), stream.message())
            .await
            .context("a watch sent nothing in 30 s")?
            .context("a watch failed")?;
        streams.push(stream);
    }
    // Let every stream settle into its polling.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cpu_before = controllers_cpu(&cluster)?;
    let started = Instant::now();
    let mut watched = timed_submissions(&user, &dir, args.submissions).await?;
    let watched_cpu = cpu_share(&cluster, cpu_before, started.elapsed())?;
    drop(streams);

    let mut report = Report::default();
    report.put("queued_jobs", u64::from(args.queued));
    report.put("watches", args.watches as u64);
    report.put("submissions", args.submissions as u64);
    report.put("submit_ms_p50_alone", alone.quantile(0.5) / 1000.0);
    report.put("submit_ms_p99_alone", alone.quantile(0.99) / 1000.0);
    report.put("submit_ms_p50_watched", watched.quantile(0.5) / 1000.0);
    report.put("submit_ms_p99_watched", watched.quantile(0.99) / 1000.0);
    report.put("controllers_cpu_pct_alone", alone_cpu);
    report.put("controllers_cpu_pct_watched", watched_cpu);
    report.print(args.json)
}

/// CPU time (user + system) the three controllers have used, in clock ticks.
fn controllers_cpu(cluster: &LocalCluster) -> anyhow::Result<u64> {
    let mut ticks = 0;
    for id in 1..=cluster.addresses.len() {
        let pid = cluster.pid(&format!("controller-{id}"))?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .with_context(|| format!("reading controller-{id}'s CPU time"))?;
        // Fields after the command name (which may hold spaces) start at the
        // state; utime and stime are the 12th and 13th of those.
        let after = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .context("a /proc stat line without a command name")?;
        let fields: Vec<&str> = after.split_whitespace().collect();
        for index in [11, 12] {
            ticks += fields
                .get(index)
                .context("a short /proc stat line")?
                .parse::<u64>()?;
        }
    }
    Ok(ticks)
}

/// The controllers' CPU use since `before`, over `elapsed`, in percent of one
/// core.
fn cpu_share(cluster: &LocalCluster, before: u64, elapsed: Duration) -> anyhow::Result<f64> {
    let used = controllers_cpu(cluster)?.saturating_sub(before);
    // Linux reports CPU time in ticks of 1/100 s (USER_HZ).
    Ok(used as f64 / 100.0 / elapsed.as_secs_f64().max(1e-9) * 100.0)
}
