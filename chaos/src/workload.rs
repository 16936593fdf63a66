//! The clients: each a thread that submits trainers, reads jobs and now and
//! then cancels one, through the `corral` CLI as a user would, recording
//! every operation as invoked and then ok, failed (certainly not done) or
//! info (unknown: a timeout, every controller unreachable). Seeded: the same
//! seed asks for the same operations in each client.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use corral_jepsen::history::{Call, EventKind, JobView, Reply};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::cluster::Cluster;
use crate::recorder::Recorder;
use crate::trainer::{self, OnNotice};

/// What the clients do.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// Client threads.
    pub clients: u32,
    /// Pause between one client's operations.
    pub pace: Duration,
    /// The seed.
    pub seed: u64,
    /// GPUs per node (the largest request).
    pub gpus_per_node: u32,
    /// Percent of trainers that run 20-25 s instead of 3-9 s (long enough
    /// to outlive a node's down declaration).
    pub long_pct: u32,
    /// Whether trainers answer a preemption notice (seeded: about half
    /// trap it and checkpoint, the rest ignore it or die of it).
    pub preemption: bool,
}

/// What the clients share.
pub struct Shared<'a> {
    pub cluster: &'a Cluster,
    pub recorder: &'a Recorder,
    pub run_dir: PathBuf,
    pub stop: AtomicBool,
    pub next_op: AtomicU64,
    /// Jobs some client was told of.
    pub jobs: Mutex<Vec<u64>>,
}

/// How long one CLI call may take before it is killed (and its outcome is
/// unknown).
const CALL_DEADLINE: Duration = Duration::from_secs(20);

/// Runs every client until `shared.stop`.
pub fn run(workload: Workload, shared: &Shared<'_>) {
    std::thread::scope(|scope| {
        for process in 0..workload.clients {
            scope.spawn(move || client(workload, process, shared));
        }
    });
}

fn client(workload: Workload, process: u32, shared: &Shared<'_>) {
    let mut rng = StdRng::seed_from_u64(workload.seed ^ (u64::from(process) << 32));
    while !shared.stop.load(Ordering::SeqCst) {
        let op = shared.next_op.fetch_add(1, Ordering::SeqCst);
        let known = shared
            .jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let roll = rng.random_range(0..10);
        if known.is_empty() || roll < 5 {
            submit(workload, process, op, &mut rng, shared);
        } else if roll < 9 {
            let job = known[rng.random_range(0..known.len())];
            read(process, op, job, shared);
        } else {
            let job = known[rng.random_range(0..known.len())];
            cancel(process, op, job, shared);
        }
        std::thread::sleep(workload.pace);
    }
}

/// How a CLI call ended.
enum Ended {
    Ok(Vec<u8>),
    /// Refused or a usage error: it did not happen.
    Failed(String),
    /// Unknown.
    Unknown(String),
}

fn run_cli(shared: &Shared<'_>, args: &[&str]) -> Ended {
    match shared.cluster.corral(args, CALL_DEADLINE) {
        Ok(out) if out.status.success() => Ended::Ok(out.stdout),
        Ok(out) => {
            let error = String::from_utf8_lossy(&out.stderr).trim().to_string();
            // 1: refused; 2: usage (corral's exit statuses). Anything else
            // (3: unreachable, a kill at the deadline) may have happened.
            match out.status.code() {
                Some(1 | 2) => Ended::Failed(error),
                code => Ended::Unknown(format!("exit {code:?}: {error}")),
            }
        }
        Err(e) => Ended::Unknown(e.to_string()),
    }
}

fn outcome(
    process: u32,
    op: u64,
    ended: Ended,
    reply: impl FnOnce(&[u8]) -> Option<Reply>,
) -> (EventKind, Option<Reply>) {
    match ended {
        Ended::Ok(stdout) => match reply(&stdout) {
            Some(r) => (
                EventKind::Ok {
                    process,
                    op,
                    replica: None,
                    reply: r.clone(),
                },
                Some(r),
            ),
            None => (
                EventKind::Info {
                    process,
                    op,
                    error: format!(
                        "an answer the runner cannot read: {}",
                        String::from_utf8_lossy(&stdout).trim()
                    ),
                },
                None,
            ),
        },
        Ended::Failed(error) => (
            EventKind::Fail {
                process,
                op,
                replica: None,
                error,
            },
            None,
        ),
        Ended::Unknown(error) => (EventKind::Info { process, op, error }, None),
    }
}

fn submit(workload: Workload, process: u32, op: u64, rng: &mut StdRng, shared: &Shared<'_>) {
    let name = format!("w{op}");
    let nodes = rng.random_range(1..=2);
    let choices = [1, 2, workload.gpus_per_node.max(1)];
    let gpus = choices[rng.random_range(0..choices.len())];
    let steps = if rng.random_range(0..100) < workload.long_pct {
        rng.random_range(200..=250)
    } else {
        rng.random_range(30..=90)
    };
    // Drawn only where it matters: other scenarios keep their sequence.
    let on_notice = if workload.preemption {
        match rng.random_range(0..10) {
            0..=4 => OnNotice::Checkpoint,
            5..=8 => OnNotice::Ignore,
            _ => OnNotice::Die,
        }
    } else {
        OnNotice::Die
    };
    let script = trainer::batch_script(
        &name,
        (nodes, gpus),
        (steps, 10),
        &shared.run_dir,
        (
            shared.cluster.job_path.as_deref(),
            &shared.cluster.job_corral,
        ),
        (on_notice, &[]),
    );
    submit_script(shared, (process, op), &name, (nodes, gpus), &script);
}

/// Submits `script` (job `name`, `nodes` x `gpus`) as operation `op` of
/// client `process`, recording it, and remembers the job made.
pub fn submit_script(
    shared: &Shared<'_>,
    (process, op): (u32, u64),
    name: &str,
    (nodes, gpus): (u32, u32),
    script: &str,
) {
    let path = shared.run_dir.join("scripts").join(format!("{name}.sh"));
    if let Err(e) = std::fs::write(&path, script) {
        eprintln!("corral-chaos: cannot write {}: {e}", path.display());
        return;
    }
    let call = Call::Submit {
        key: format!("cli-{op}"),
        name: name.to_string(),
        nodes,
        gpus_per_node: gpus,
    };
    let path_text = path.display().to_string();
    let reply = operation(
        shared,
        (process, op, call),
        &["--json", "submit", &path_text],
        |stdout| {
            let value: serde_json::Value = serde_json::from_slice(stdout).ok()?;
            Some(Reply::Submitted {
                job: value["job_id"].as_u64()?,
            })
        },
    );
    if let Some(Reply::Submitted { job }) = reply {
        shared
            .jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(job);
    }
}

fn read(process: u32, op: u64, job: u64, shared: &Shared<'_>) {
    let id = job.to_string();
    let args = ["--json", "queue", "-t", "all", "-j", &id];
    operation(shared, (process, op, Call::Read { job }), &args, |stdout| {
        let jobs: serde_json::Value = serde_json::from_slice(stdout).ok()?;
        // A list without the job is an answer: the reads checker judges it.
        match jobs
            .as_array()?
            .iter()
            .find(|j| j["id"].as_u64() == Some(job))
        {
            Some(record) => Some(Reply::Read(job_view(record)?)),
            None => Some(Reply::NotFound),
        }
    });
}

fn cancel(process: u32, op: u64, job: u64, shared: &Shared<'_>) {
    let id = job.to_string();
    operation(
        shared,
        (process, op, Call::Cancel { job }),
        &["cancel", &id],
        |_| Some(Reply::Cancelled),
    );
}

/// One operation: invoked, run through the CLI, and its outcome recorded;
/// the reply when it succeeded.
fn operation(
    shared: &Shared<'_>,
    (process, op, call): (u32, u64, Call),
    args: &[&str],
    reply: impl FnOnce(&[u8]) -> Option<Reply>,
) -> Option<Reply> {
    shared
        .recorder
        .record(EventKind::Invoke { process, op, call });
    let (event, reply) = outcome(process, op, run_cli(shared, args), reply);
    shared.recorder.record(event);
    reply
}

/// A job record (`corral --json queue`) as a read's view.
pub fn job_view(record: &serde_json::Value) -> Option<JobView> {
    Some(JobView {
        state: slurm_state(record["state"].as_str()?),
        attempts: record["attempts"].as_array()?.len() as u32,
        requeues: record["requeue_count"].as_u64()? as u32,
    })
}

/// corral's state names (serde) as Slurm's.
pub fn slurm_state(state: &str) -> String {
    match state {
        "NodeFail" => "NODE_FAIL".into(),
        "RequeueHold" => "REQUEUE_HOLD".into(),
        other => other.to_uppercase(),
    }
}

/// Where scripts and events go.
pub fn prepare(run_dir: &Path) -> anyhow::Result<()> {
    for sub in ["scripts", "events", "out"] {
        std::fs::create_dir_all(run_dir.join(sub))?;
    }
    trainer::install_rank_program(run_dir)?;
    Ok(())
}
