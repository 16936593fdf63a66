//! `corral-bench xid`: time from an XID injected into a GPU of a running 2-node
//! job to its requeue being committed, and to its next attempt running, on a
//! local cluster of real processes (3 `corrald`, 4 `corral-agent` with simulated
//! GPUs, started by `corral local up`). Polls the leader's client API.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use corral_pki::TlsMaterial;
use corral_proto::api::corral_client::CorralClient;
use corral_proto::api::{
    CancelJobsRequest, Empty, GetJobRequest, NodeAction, SetNodeStateRequest, SubmitJobRequest,
};
use corral_proto::records;
use corral_state::job::{Job, JobState};
use tonic::transport::{Channel, Endpoint};

use crate::figures::{Report, Samples};

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
    let corral = sibling("corral")?;
    let dir = tempfile::tempdir()?;
    // CORRAL_BENCH_KEEP=1 keeps the cluster's directory (configs, logs) for a look.
    let dir_path = dir.path().to_path_buf();
    let dir = if std::env::var_os("CORRAL_BENCH_KEEP").is_some() {
        eprintln!("keeping {}", dir_path.display());
        Kept::Path(dir.keep())
    } else {
        Kept::Temp(dir)
    };
    let up = Command::new(&corral)
        .args(["--json", "local", "up", "--dir"])
        .arg(dir.path())
        .args(["--controllers", "3", "--nodes", "4"])
        .output()
        .context("running corral local up")?;
    if !up.status.success() {
        bail!(
            "corral local up failed: {}",
            String::from_utf8_lossy(&up.stderr)
        );
    }
    let result = trials(args, dir.path()).await;
    let _ = Command::new(&corral)
        .args(["local", "down", "--dir"])
        .arg(dir.path())
        .output();
    let (requeue, restart) = result?;
    let (mut requeue, mut restart) = (requeue, restart);
    let mut report = Report::default();
    report.put("trials", requeue.len() as u64);
    report.put("xid", u64::from(args.xid));
    report.put("xid_to_requeue_ms_median", requeue.quantile(0.5) / 1000.0);
    report.put("xid_to_requeue_ms_max", requeue.quantile(1.0) / 1000.0);
    report.put("xid_to_restart_ms_median", restart.quantile(0.5) / 1000.0);
    report.put("xid_to_restart_ms_max", restart.quantile(1.0) / 1000.0);
    report.print(args.json)
}

async fn trials(args: &XidArgs, dir: &Path) -> anyhow::Result<(Samples, Samples)> {
    let me = String::from_utf8(Command::new("id").arg("-un").output()?.stdout)?
        .trim()
        .to_string();
    let admin = client(dir, "user-corral-admin").await?;
    let user = client(dir, &format!("user-{me}")).await?;
    let (mut requeue, mut restart) = (Samples::default(), Samples::default());
    for _ in 0..args.trials {
        let id = submit(&user, dir).await?;
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

async fn client(dir: &Path, principal: &str) -> anyhow::Result<CorralClient<Channel>> {
    let certs = dir.join("certs");
    let tls = TlsMaterial::load(
        &certs.join("ca.pem"),
        &certs.join(format!("{principal}.pem")),
        &certs.join(format!("{principal}.key")),
    )?;
    let env = std::fs::read_to_string(dir.join("env"))?;
    let addresses: Vec<String> = env
        .lines()
        .find_map(|l| l.strip_prefix("export CORRAL_CLUSTER="))
        .context("no CORRAL_CLUSTER in the local cluster's env file")?
        .split(',')
        .map(String::from)
        .collect();
    // Talk to the leader: its state is the first to show a commit.
    let first = connect(&tls, &addresses[0]).await?;
    let status = CorralClient::new(first)
        .cluster_status(Empty {})
        .await?
        .into_inner();
    let leader = if status.leader_api_addr.is_empty() {
        addresses[0].clone()
    } else {
        status.leader_api_addr
    };
    Ok(CorralClient::new(connect(&tls, &leader).await?))
}

async fn connect(tls: &TlsMaterial, address: &str) -> anyhow::Result<Channel> {
    Ok(Endpoint::from_shared(format!("https://{address}"))?
        .tls_config(tls.client_config())?
        .connect()
        .await?)
}

async fn submit(user: &CorralClient<Channel>, dir: &Path) -> anyhow::Result<u64> {
    let script = "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --gpus-per-node=8\n#SBATCH --output=/dev/null\nsleep 600\n";
    let reply = user
        .clone()
        .submit_job(SubmitJobRequest {
            script_path: "xid-bench.sh".into(),
            script_text: script.into(),
            cwd: dir.display().to_string(),
            uid: own_uid(),
            gid: own_gid(),
            submit_host: "localhost".into(),
            ..SubmitJobRequest::default()
        })
        .await?;
    Ok(reply.into_inner().first_job_id)
}

async fn poll(
    client: &CorralClient<Channel>,
    id: u64,
    patience: Duration,
    done: impl Fn(&Job) -> bool,
) -> anyhow::Result<Job> {
    let deadline = Instant::now() + patience;
    loop {
        let reply = client
            .clone()
            .get_job(GetJobRequest { job_id: id })
            .await?
            .into_inner();
        let job: Job = records::decode("job", &reply.job_json)?;
        if done(&job) {
            return Ok(job);
        }
        if Instant::now() > deadline {
            bail!(
                "job {id} did not get there in {patience:?}: state {}",
                job.state.slurm_name()
            );
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The cluster directory: removed at the end unless kept.
enum Kept {
    Temp(tempfile::TempDir),
    Path(PathBuf),
}

impl Kept {
    fn path(&self) -> &Path {
        match self {
            Kept::Temp(dir) => dir.path(),
            Kept::Path(path) => path,
        }
    }
}

/// This process's uid (the owner of `/proc/self`).
fn own_uid() -> u32 {
    std::fs::metadata("/proc/self").map_or(0, |m| std::os::unix::fs::MetadataExt::uid(&m))
}

/// This process's gid.
fn own_gid() -> u32 {
    std::fs::metadata("/proc/self").map_or(0, |m| std::os::unix::fs::MetadataExt::gid(&m))
}

/// A workspace binary beside this one (`cargo build --release --bins` builds them).
fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let path = exe.with_file_name(name);
    if !path.exists() {
        bail!(
            "{} not found: build the binaries first (`cargo build --release --bins`)",
            path.display()
        );
    }
    Ok(path)
}
