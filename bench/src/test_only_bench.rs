//! `corral-bench test-only`: does one user looping `sbatch --test-only` slow
//! everyone else's submissions? On a local cluster whose GPUs are all taken by
//! one running job, with a queue of pending jobs for the scheduler to plan
//! around, it times the submissions the local user makes one after another:
//! first alone, then while `bob` runs `--test-only` submissions in a loop from
//! several connections at once. It reports both latencies and how many test
//! plans bob got through.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use corral_proto::api::SubmitJobRequest;
use corral_proto::api::corral_client::CorralClient;
use tonic::transport::Channel;

use crate::figures::{Report, Samples};
use crate::local_cluster::{LocalCluster, current_user, submit};

/// Arguments of `corral-bench test-only`.
#[derive(Args)]
pub struct TestOnlyArgs {
    /// Pending jobs in the queue (submitted as arrays of up to 1000).
    #[arg(long, default_value_t = 2000)]
    queued: u32,
    /// Submissions timed, alone and then under the test-only loop.
    #[arg(long, default_value_t = 100)]
    submissions: usize,
    /// Connections over which bob loops `--test-only`.
    #[arg(long, default_value_t = 4)]
    loops: usize,
    /// Take the daemons from this directory (another build), not beside this
    /// program.
    #[arg(long)]
    bin_dir: Option<std::path::PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs the benchmark.
pub fn run(args: &TestOnlyArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(run_async(args))
}

async fn run_async(args: &TestOnlyArgs) -> anyhow::Result<()> {
    let cluster = LocalCluster::up(args.bin_dir.as_deref(), 2)?;
    let me = format!("user-{}", current_user()?);
    let user = cluster.leader_client(&me).await?;
    let bob = cluster.leader_client("user-bob").await?;
    let dir = cluster.dir().to_path_buf();
    take_every_gpu_and_queue(&user, &dir, args.queued).await?;
    let alone = timed_submissions(&user, &dir, args.submissions).await?;

    let stop = Arc::new(AtomicBool::new(false));
    let mut loops = Vec::new();
    for _ in 0..args.loops {
        let bob = bob.clone();
        let stop = Arc::clone(&stop);
        let dir = dir.display().to_string();
        loops.push(tokio::spawn(
            async move { test_only_loop(bob, dir, stop).await },
        ));
    }
    // Let the loop get going before timing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let loaded = timed_submissions(&user, &dir, args.submissions).await?;
    stop.store(true, Ordering::SeqCst);
    let mut plans = Samples::default();
    let mut failed = 0u64;
    for handle in loops {
        let (samples, errors) = handle.await.context("a test-only loop")?;
        plans.merge(samples);
        failed += errors;
    }
    let (mut alone, mut loaded) = (alone, loaded);
    let mut report = Report::default();
    report.put("queued_jobs", u64::from(args.queued));
    report.put("submissions", args.submissions as u64);
    report.put("test_only_loops", args.loops as u64);
    report.put("submit_ms_p50_alone", alone.quantile(0.5) / 1000.0);
    report.put("submit_ms_p99_alone", alone.quantile(0.99) / 1000.0);
    report.put(
        "submit_ms_p50_under_test_only",
        loaded.quantile(0.5) / 1000.0,
    );
    report.put(
        "submit_ms_p99_under_test_only",
        loaded.quantile(0.99) / 1000.0,
    );
    report.put("test_only_plans", plans.len() as u64);
    report.put("test_only_failed", failed);
    report.put("test_only_ms_p50", plans.quantile(0.5) / 1000.0);
    report.print(args.json)
}

/// Submits one job that takes every GPU of the two nodes for an hour, then
/// queues `count` pending jobs behind it; returns the blocker's id.
pub(crate) async fn take_every_gpu_and_queue(
    user: &CorralClient<Channel>,
    dir: &std::path::Path,
    count: u32,
) -> anyhow::Result<u64> {
    let blocker = submit(
        user,
        dir,
        "blocker.sh",
        "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --gpus-per-node=8\nsleep 3600\n",
    )
    .await
    .context("submitting the job that takes every GPU")?;
    queue_pending(user, dir, count).await?;
    Ok(blocker)
}

/// Queues `count` pending jobs that ask for whole nodes (arrays of up to 1,000).
async fn queue_pending(
    user: &CorralClient<Channel>,
    dir: &std::path::Path,
    count: u32,
) -> anyhow::Result<()> {
    let mut queued = 0;
    while queued < count {
        let batch = (count - queued).min(1000);
        submit(
            user,
            dir,
            "queued.sh",
            &format!(
                "#!/bin/bash\n#SBATCH --array=0-{}\n#SBATCH --gpus-per-node=8\ntrue\n",
                batch - 1
            ),
        )
        .await
        .context("queueing jobs")?;
        queued += batch;
    }
    Ok(())
}

/// Times `count` held submissions made one after another.
pub(crate) async fn timed_submissions(
    user: &CorralClient<Channel>,
    dir: &std::path::Path,
    count: usize,
) -> anyhow::Result<Samples> {
    let mut samples = Samples::default();
    for _ in 0..count {
        let started = Instant::now();
        submit(
            user,
            dir,
            "held.sh",
            "#!/bin/bash\n#SBATCH --hold\n#SBATCH --gpus-per-node=1\ntrue\n",
        )
        .await
        .context("a timed submission")?;
        samples.push(started.elapsed());
    }
    Ok(samples)
}

/// Bob's `--test-only` submissions, one after another until `stop`: their
/// latencies and how many failed.
async fn test_only_loop(
    bob: CorralClient<Channel>,
    dir: String,
    stop: Arc<AtomicBool>,
) -> (Samples, u64) {
    let mut samples = Samples::default();
    let mut failed = 0;
    while !stop.load(Ordering::SeqCst) {
        let started = Instant::now();
        let reply = bob
            .clone()
            .submit_job(SubmitJobRequest {
                args: vec!["-N".into(), "2".into(), "--gpus-per-node=8".into()],
                script_path: "probe.sh".into(),
                script_text: "#!/bin/bash\ntrue\n".into(),
                cwd: dir.clone(),
                submit_host: "localhost".into(),
                test_only: true,
                ..SubmitJobRequest::default()
            })
            .await;
        match reply {
            Ok(_) => samples.push(started.elapsed()),
            Err(_) => failed += 1,
        }
    }
    (samples, failed)
}
