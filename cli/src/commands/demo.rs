//! `corral demo`: a local cluster (3 controllers, 4 nodes with 8 simulated GPUs
//! each) running real jobs: a 2-node "training" gang that checkpoints and resumes
//! from `CORRAL_RESUME_FROM`, an array, and a dependency chain. Midway it injects
//! an XID into one of the training job's GPUs and shows the job killed on both
//! nodes, requeued and resumed from its last checkpoint, then prints a summary.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use corral_proto::api::{GetJobRequest, ListJobsRequest, SubmitJobRequest};
use corral_proto::records;
use corral_state::job::{Job, JobState};
use corral_state::time::Timestamp;

use crate::args::{DemoArgs, LocalGpuBackend, LocalUpArgs};
use crate::connection::{Cluster, ClusterSettings, Retry};
use crate::format::acct::{AcctOptions, acct_table};
use crate::format::acct_fields::AcctContext;
use crate::format::queue_fields::QueueContext;
use crate::format::queue_rows::rows;
use crate::format::{QueueOptions, queue_table};
use crate::when;

/// Steps the training job runs in all.
const TRAIN_STEPS: u64 = 40;

/// Runs the demo.
pub async fn run(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let scratch;
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => {
            scratch = std::env::temp_dir().join(format!("corral-demo-{}", std::process::id()));
            scratch.clone()
        }
    };
    say(&format!("starting a local cluster in {}", dir.display()));
    let cluster = super::local::up(&LocalUpArgs {
        dir: dir.clone(),
        restore: None,
        controllers: 3,
        nodes: Some(4),
        gpus_per_node: Some(8),
        gpu_backend: LocalGpuBackend::Simulated,
        corrald: None,
        corral_agent: None,
        no_agents: false,
        netns: false,
        fault_proxy: false,
        config: None,
        mail_program: None,
        metrics: true,
    })
    .await?;
    let outcome = drive(&cluster.dir, &cluster.addresses, &cluster.user).await;
    if args.keep {
        say(&format!(
            "metrics: every process's endpoint is in {} (Prometheus file_sd_configs)",
            cluster.dir.join("metrics-targets.json").display()
        ));
        say(&format!(
            "the cluster keeps running: source {} ; stop it with corral local down --dir {} --purge",
            cluster.dir.join("env").display(),
            cluster.dir.display()
        ));
    } else {
        super::local::down(&cluster.dir)?;
        let _ = std::fs::remove_dir_all(&cluster.dir);
        say("cluster stopped and removed");
    }
    outcome
}

async fn drive(dir: &Path, addresses: &[String], user: &str) -> anyhow::Result<ExitCode> {
    let client = Cluster::new(ClusterSettings {
        addresses: addresses.to_vec(),
        ca: dir.join("certs/ca.pem"),
        cert: dir.join(format!("certs/user-{user}.pem")),
        key: dir.join(format!("certs/user-{user}.key")),
        patience: Duration::from_secs(30),
    })?;
    let work = dir.join("demo");
    std::fs::create_dir_all(&work)?;
    let train = write(&work, "train.sh", &train_script(&dir.join("bin")))?;
    let array = write(&work, "array.sh", ARRAY_SCRIPT)?;
    let prepare = write(&work, "prepare.sh", PREPARE_SCRIPT)?;
    let evaluate = write(&work, "evaluate.sh", EVALUATE_SCRIPT)?;

    let train_id = submit(&client, &work, &train, &[]).await?;
    let array_id = submit(&client, &work, &array, &[]).await?;
    let prepare_id = submit(&client, &work, &prepare, &[]).await?;
    let evaluate_id = submit(
        &client,
        &work,
        &evaluate,
        &[format!("--dependency=afterok:{prepare_id}")],
    )
    .await?;
    say(&format!(
        "submitted: training gang {train_id} (2 nodes x 8 GPUs), array {array_id} (4 tasks), chain {prepare_id} -> {evaluate_id}"
    ));

    // Let the training job checkpoint a few times, showing the queue.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last_print = Instant::now() - Duration::from_secs(10);
    let victim = loop {
        let job = get(&client, train_id).await?;
        if last_print.elapsed() >= Duration::from_secs(2) {
            show_queue(&client).await?;
            last_print = Instant::now();
        }
        let step = job.last_checkpoint.as_ref().map_or(0, |c| c.step);
        if job.state == JobState::Running && step >= 10 {
            break job;
        }
        if Instant::now() > deadline {
            bail!(
                "the training job did not reach a checkpoint in 2 minutes (state {})",
                job.state.slurm_name()
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let attempt = victim
        .current_attempt()
        .context("the running training job has no attempt")?;
    let node = attempt
        .allocation
        .get(1)
        .or_else(|| attempt.allocation.first())
        .context("the training job has no nodes")?;
    let gpu = node.gpus.first().copied().unwrap_or(0);
    let checkpoint = victim.last_checkpoint.as_ref().map_or(0, |c| c.step);
    say(&format!(
        "injecting XID 79 (GPU fallen off the bus) into {} GPU {gpu}; last checkpoint: step {checkpoint}",
        node.node
    ));
    let injected = Instant::now();
    super::local::inject_xid(dir, &node.node, gpu, 79)?;

    // The job is requeued, then runs again as attempt 2 and resumes.
    let requeued = wait_for(&client, train_id, Duration::from_secs(60), |job| {
        job.requeue_count >= 1
    })
    .await?;
    say(&format!(
        "job {train_id} requeued {} ms after the XID (restart count {}); {} GPU {gpu} marked failed and the node drained (XID 79 needs a reboot)",
        injected.elapsed().as_millis(),
        requeued.requeue_count,
        node.node
    ));
    let resumed = wait_for(&client, train_id, Duration::from_secs(60), |job| {
        job.state == JobState::Running && job.attempts.len() >= 2
    })
    .await?;
    say(&format!(
        "job {train_id} running again as attempt {} on {} ({} ms after the XID), resuming from step {checkpoint}",
        resumed.attempts.len(),
        resumed
            .current_attempt()
            .map(|a| a
                .allocation
                .iter()
                .map(|n| n.node.as_str())
                .collect::<Vec<_>>()
                .join(","))
            .unwrap_or_default(),
        injected.elapsed().as_millis()
    ));

    // Everything finishes.
    let ids = [train_id, array_id, prepare_id, evaluate_id];
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let jobs = list(&client, &ids).await?;
        if !jobs.is_empty() && jobs.iter().all(|j| j.state.is_terminal()) {
            break;
        }
        if last_print.elapsed() >= Duration::from_secs(3) {
            show_queue(&client).await?;
            last_print = Instant::now();
        }
        if Instant::now() > deadline {
            bail!("the demo's jobs did not finish within 3 minutes");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let jobs = list(&client, &ids).await?;
    println!();
    print!(
        "{}",
        acct_table(
            &jobs,
            &AcctContext {
                now: Timestamp(when::now_ms()),
                ..AcctContext::default()
            },
            &AcctOptions {
                attempts: true,
                ..AcctOptions::default()
            }
        )
    );
    let output =
        std::fs::read_to_string(work.join(format!("train-{train_id}.out"))).unwrap_or_default();
    let resumed: Vec<&str> = output.lines().filter(|l| l.contains("resuming")).collect();
    println!("\ntraining output (srun -l, one rank per node):");
    if resumed.is_empty() {
        println!("  (no resume line in the output)");
    }
    for line in resumed {
        println!("  {line}");
    }
    let all_completed = jobs.iter().all(|j| j.state == JobState::Completed);
    say(if all_completed {
        "every job completed; the training job lost at most the steps since its last checkpoint"
    } else {
        "some jobs did not complete: see the table above"
    });
    Ok(if all_completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn say(text: &str) {
    println!("==> {text}");
}

fn write(dir: &Path, name: &str, text: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

async fn submit(
    client: &Cluster,
    workdir: &Path,
    script: &Path,
    extra: &[String],
) -> anyhow::Result<u64> {
    let request = SubmitJobRequest {
        args: extra.to_vec(),
        script_path: script.display().to_string(),
        script_text: std::fs::read_to_string(script)?,
        command: script.display().to_string(),
        ..super::submit::from_this_shell(workdir)
    };
    let reply = client
        .call(Retry::Idempotent, |mut c| {
            let request = request.clone();
            async move { c.submit_job(request).await }
        })
        .await?;
    Ok(reply.first_job_id)
}

async fn get(client: &Cluster, id: u64) -> anyhow::Result<Job> {
    let reply = client
        .call(Retry::Idempotent, |mut c| async move {
            c.get_job(GetJobRequest {
                job_id: id,
                consistent: true,
            })
            .await
        })
        .await?;
    Ok(records::decode("job", &reply.job_json)?)
}

async fn list(client: &Cluster, ids: &[u64]) -> anyhow::Result<Vec<Job>> {
    let request = ListJobsRequest {
        job_ids: ids.to_vec(),
        all: true,
        ..ListJobsRequest::default()
    };
    Ok(super::queue::list_jobs(client, request).await?.0)
}

async fn show_queue(client: &Cluster) -> anyhow::Result<()> {
    let (jobs, as_of_ms) =
        super::queue::list_jobs_with_priorities(client, ListJobsRequest::default()).await?;
    let ctx = QueueContext {
        now: Timestamp(as_of_ms),
        ..QueueContext::default()
    };
    println!();
    print!(
        "{}",
        queue_table(&rows(&jobs, true), &ctx, &QueueOptions::default())
    );
    Ok(())
}

async fn wait_for(
    client: &Cluster,
    id: u64,
    patience: Duration,
    done: impl Fn(&Job) -> bool,
) -> anyhow::Result<Job> {
    let deadline = Instant::now() + patience;
    loop {
        let job = get(client, id).await?;
        if done(&job) {
            return Ok(job);
        }
        if Instant::now() > deadline {
            bail!(
                "job {id} did not get there within {} s (state {}, {} attempts)",
                patience.as_secs(),
                job.state.slurm_name(),
                job.attempts.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The training job, written as Slurm scripts are: `srun` starts one rank per
/// node (as `srun torchrun ...` would), each rank resumes from
/// `CORRAL_RESUME_FROM` (a file holding the step), and rank 0 checkpoints every
/// 5 steps through `corral checkpoint`. `bin` holds the cluster's `srun`,
/// `scontrol` and `corral`.
fn train_script(bin: &Path) -> String {
    format!(
        r#"#!/bin/bash
#SBATCH --job-name=train
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --time=10:00
#SBATCH --output=train-%j.out
export PATH="{bin}:$PATH"
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
srun -l bash -c '
step=0
if [ -n "$CORRAL_RESUME_FROM" ] && [ -f "$CORRAL_RESUME_FROM" ]; then
  step=$(cat "$CORRAL_RESUME_FROM")
  echo "attempt $CORRAL_ATTEMPT, rank $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME (master $MASTER_ADDR): resuming from step $step"
else
  echo "attempt $CORRAL_ATTEMPT, rank $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME (master $MASTER_ADDR): starting from step 0"
fi
while [ "$step" -lt {TRAIN_STEPS} ]; do
  sleep 0.3
  step=$((step + 1))
  if [ "$SLURM_PROCID" = 0 ] && [ $((step % 5)) -eq 0 ]; then
    echo "$step" > "$CORRAL_CHECKPOINT_DIR/step-$step"
    corral checkpoint --step "$step" --path "$CORRAL_CHECKPOINT_DIR/step-$step"
    echo "checkpoint at step $step"
  fi
done
echo "training done at step $step"
'
"#,
        bin = bin.display()
    )
}

const ARRAY_SCRIPT: &str = r#"#!/bin/bash
#SBATCH --job-name=sweep
#SBATCH --array=1-4
#SBATCH --gpus-per-node=1
#SBATCH --time=5:00
#SBATCH --output=sweep-%A_%a.out
echo "sweep task $SLURM_ARRAY_TASK_ID of job $SLURM_ARRAY_JOB_ID on $SLURMD_NODENAME, GPUs $CUDA_VISIBLE_DEVICES"
sleep 2
"#;

const PREPARE_SCRIPT: &str = r#"#!/bin/bash
#SBATCH --job-name=prepare
#SBATCH --time=5:00
#SBATCH --output=prepare-%j.out
echo "preparing data on $SLURMD_NODENAME"
sleep 1
"#;

const EVALUATE_SCRIPT: &str = r#"#!/bin/bash
#SBATCH --job-name=evaluate
#SBATCH --gpus-per-node=1
#SBATCH --time=5:00
#SBATCH --output=evaluate-%j.out
echo "evaluating on $SLURMD_NODENAME after the preparation finished"
sleep 1
"#;
