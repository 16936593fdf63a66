//! `corral-bench xid`: time from an XID injected into a GPU of a running 2-node
//! job to its requeue being committed, and to its next attempt running, on a
//! local cluster of real processes (3 `corrald`, 4 `corral-agent` with simulated
//! GPUs, started by `corral local up`). Polls the leader's client API.

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use corral_proto::api::{CancelJobsRequest, NodeAction, SetNodeStateRequest};
use corral_state::job::JobState;

use crate::figures::{Report, Samples};
use crate::local_cluster::{LocalCluster, current_user, poll, submit};

/// Options of the XID benchmark.
#[derive(Debug, Args)]
pub struct XidArgs {
    /// XID injections.
    #[arg(long, default_value_t = 10)]
    trials: usize,
    /// The XID to inject (79: fallen off the bus; drains GPU and node, undone
    /// between trials).
    #[arg(long, default_value_t = 79)]
    xid: u32,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs the benchmark.
pub fn run(args: &XidArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(run_async(args))
}

async fn run_async(args: &XidArgs) -> anyhow::Result<()> {
    let cluster = LocalCluster::up(None, 4)?;
    let (mut requeue, mut restart) = trials(args, &cluster).await?;
    drop(cluster);
    let mut report = Report::default();
    report.put("trials", requeue.len() as u64);
    report.put("xid", u64::from(args.xid));
    report.put("xid_to_requeue_ms_median", requeue.quantile(0.5) / 1000.0);
    report.put("xid_to_requeue_ms_max", requeue.quantile(1.0) / 1000.0);
    report.put("xid_to_restart_ms_median", restart.quantile(0.5) / 1000.0);
    report.put("xid_to_restart_ms_max", restart.quantile(1.0) / 1000.0);
    report.print(args.json)
}

async fn trials(args: &XidArgs, cluster: &LocalCluster) -> anyhow::Result<(Samples, Samples)> {
    let dir = cluster.dir();
    let admin = cluster.leader_client("user-corral-admin").await?;
    let user = cluster
        .leader_client(&format!("user-{}", current_user()?))
        .await?;
    let (mut requeue, mut restart) = (Samples::default(), Samples::default());
    for _ in 0..args.trials {
        let script = "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --gpus-per-node=8\n#SBATCH --output=/dev/null\nsleep 600\n";
        let id = submit(&user, dir, "xid-bench.sh", script).await?;
        let job = poll(&admin, id, Duration::from_secs(60), |j| {
            j.state == JobState::Running
                && j.current_attempt()
                    .is_some_and(|a| a.started_on.len() == a.allocation.len())
        })
        .await?;
        let attempts = job.attempts.len();
        let allocation = job
            .current_attempt()
            .context("running job without an attempt")?
            .allocation
            .clone();
        let node = allocation[allocation.len() - 1].node.clone();
        let gpu = allocation[allocation.len() - 1].gpus[0];
        let control = dir.join("agents").join(&node).join("gpu-control.sock");
        let injected = Instant::now();
        corral_agent::gpu::inject(
            &control,
            &corral_agent::gpu::FaultCommand::Xid { gpu, xid: args.xid },
        )?;
        poll(&admin, id, Duration::from_secs(30), |j| {
            j.requeue_count >= 1
        })
        .await?;
        requeue.push(injected.elapsed());
        poll(&admin, id, Duration::from_secs(60), |j| {
            j.state == JobState::Running
                && j.attempts.len() > attempts
                && j.current_attempt()
                    .is_some_and(|a| !a.started_on.is_empty())
        })
        .await?;
        restart.push(injected.elapsed());
        // Clean up: cancel, put the GPU and node back, heal the simulated GPU.
        admin
            .clone()
            .cancel_jobs(CancelJobsRequest {
                jobs: vec![id.to_string()],
                ..CancelJobsRequest::default()
            })
            .await?;
        poll(&admin, id, Duration::from_secs(60), |j| {
            j.state.is_terminal()
        })
        .await?;
        corral_agent::gpu::inject(&control, &corral_agent::gpu::FaultCommand::Heal { gpu })?;
        for gpu in [Some(gpu), None] {
            admin
                .clone()
                .set_node_state(SetNodeStateRequest {
                    nodes: node.clone(),
                    action: NodeAction::Resume as i32,
                    gpu,
                    reason: String::new(),
                })
                .await?;
        }
    }
    Ok((requeue, restart))
}
