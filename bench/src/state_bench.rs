//! `corral-bench state`: what `apply` costs on a large cluster. These are the
//! per-command costs every replica pays, so they bound Raft throughput.

use std::time::Instant;

use clap::Args;
use corral_state::command::{Command, Outcome};
use corral_state::job::ExitStatus;
use corral_state::{JobId, Timestamp, snapshot};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::figures::{Report, Samples, peak_rss_mb};
use crate::synthetic_cluster;

/// Options of `corral-bench state`.
#[derive(Args)]
pub struct StateArgs {
    /// Nodes in the synthetic cluster.
    #[arg(long, default_value_t = 10_000)]
    nodes: u32,
    /// GPUs per node.
    #[arg(long, default_value_t = 8)]
    gpus_per_node: u32,
    /// Jobs submitted.
    #[arg(long, default_value_t = 100_000)]
    jobs: u32,
    /// Allocations per ApplyPlan command.
    #[arg(long, default_value_t = 256)]
    plan_batch: usize,
    /// Seed of the job mix.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    json: bool,
}

/// The timestamps the benchmark stamps commands with, advancing like a leader's.
struct LeaderClock(Timestamp);

impl LeaderClock {
    fn advance(&mut self, ms: u64) -> Timestamp {
        self.0 = Timestamp(self.0.as_ms() + ms);
        self.0
    }
}

/// Runs the benchmark and prints its figures.
pub fn run(args: &StateArgs) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(args.seed);
    let started = Instant::now();
    let mut state = synthetic_cluster::build(args.nodes, args.gpus_per_node)?;
    let setup_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut clock = LeaderClock(state.clock());

    // Submissions.
    let mut submit = Samples::default();
    let mut ids = Vec::with_capacity(args.jobs as usize);
    for _ in 0..args.jobs {
        let (spec, batch, by) = synthetic_cluster::job(&mut rng, args.gpus_per_node);
        let command = Command::Submit {
            spec,
            batch,
            by,
            at: clock.advance(1),
            key: None,
        };
        let t = Instant::now();
        let outcome = state.apply(command);
        submit.push(t.elapsed());
        match outcome {
            Ok(Outcome::Submitted { first, .. }) => ids.push(first),
            other => anyhow::bail!("benchmark submission was refused: {other:?}"),
        }
    }

    // Plans: first-fit until half the GPUs are allocated.
    let names: Vec<String> = state.nodes().keys().cloned().collect();
    let total_gpus = u64::from(args.nodes) * u64::from(args.gpus_per_node);
    let mut allocated_gpus = 0u64;
    let mut cursor = 0usize;
    let mut plan = Samples::default();
    let mut started_jobs: Vec<JobId> = Vec::new();
    let mut queue = ids.iter().copied();
    while allocated_gpus * 2 < total_gpus {
        let mut batch = Vec::with_capacity(args.plan_batch);
        let mut taken = synthetic_cluster::Taken::new();
        for id in queue.by_ref() {
            if let Some(planned) =
                synthetic_cluster::first_fit(&state, id, &mut cursor, &names, &mut taken)
            {
                allocated_gpus += planned
                    .nodes
                    .iter()
                    .map(|n| n.gpus.len() as u64)
                    .sum::<u64>();
                batch.push(planned);
            }
            if batch.len() == args.plan_batch || allocated_gpus * 2 >= total_gpus {
                break;
            }
        }
        if batch.is_empty() {
            break;
        }
        let command = Command::ApplyPlan {
            allocations: batch,
            preemptions: vec![],
            reasons: vec![],
            at: clock.advance(10),
        };
        let t = Instant::now();
        let outcome = state.apply(command);
        plan.push(t.elapsed());
        match outcome {
            Ok(Outcome::Plan(p)) if p.rejected.is_empty() => started_jobs.extend(p.started),
            other => anyhow::bail!("benchmark plan was not applied whole: {other:?}"),
        }
    }
    let plan_commands = started_jobs.len().div_ceil(args.plan_batch.max(1));

    // A clock tick with every started job running.
    let t = Instant::now();
    state
        .apply(Command::Tick {
            at: clock.advance(1000),
        })
        .map_err(|e| anyhow::anyhow!("tick refused: {e}"))?;
    let tick_ms = t.elapsed().as_secs_f64() * 1e3;

    // Single-node jobs finishing.
    let mut exits = Samples::default();
    for id in started_jobs.iter().take(10_000) {
        let Some(job) = state.job(*id) else { continue };
        if job.resources.nodes != 1 {
            continue;
        }
        let node = job
            .current_attempt()
            .and_then(|a| a.batch_host())
            .unwrap_or_default()
            .to_string();
        let command = Command::BatchExited {
            job: *id,
            attempt: 1,
            node,
            status: ExitStatus {
                code: 0,
                signal: None,
            },
            at: clock.advance(1),
        };
        let t = Instant::now();
        state
            .apply(command)
            .map_err(|e| anyhow::anyhow!("exit refused: {e}"))?;
        exits.push(t.elapsed());
    }

    let t = Instant::now();
    let digest = state.digest();
    let digest_ms = t.elapsed().as_secs_f64() * 1e3;
    // What a copy of the state costs (`sbatch --test-only` plans on one).
    let t = Instant::now();
    let copy = state.clone();
    let clone_ms = t.elapsed().as_secs_f64() * 1e3;
    drop(copy);
    let t = Instant::now();
    let bytes = snapshot::encode(&state)?;
    let encode_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let restored = snapshot::decode(&bytes)?;
    let decode_ms = t.elapsed().as_secs_f64() * 1e3;
    anyhow::ensure!(restored.digest() == digest, "snapshot did not round-trip");

    let mut report = Report::default();
    report.put("nodes", args.nodes);
    report.put("gpus_per_node", args.gpus_per_node);
    report.put("jobs", args.jobs);
    report.put("setup_ms", setup_ms);
    report.put("submit_us_median", submit.quantile(0.5));
    report.put("submit_us_p99", submit.quantile(0.99));
    report.put(
        "submits_per_s",
        f64::from(args.jobs) / (submit.total_us() / 1e6),
    );
    report.put("plan_allocations", started_jobs.len() as u64);
    report.put("plan_batch", args.plan_batch as u64);
    report.put("plan_command_ms_median", plan.quantile(0.5) / 1e3);
    report.put(
        "plan_us_per_allocation",
        plan.total_us() / started_jobs.len().max(1) as f64,
    );
    report.put("plan_commands", plan_commands as u64);
    report.put("tick_ms_with_running_jobs", tick_ms);
    report.put("exit_us_median", exits.quantile(0.5));
    report.put("exit_us_p99", exits.quantile(0.99));
    report.put("digest_ms", digest_ms);
    report.put("state_clone_ms", clone_ms);
    report.put("snapshot_bytes", bytes.len() as u64);
    report.put("snapshot_encode_ms", encode_ms);
    report.put("snapshot_decode_ms", decode_ms);
    if let Some(rss) = peak_rss_mb() {
        report.put("peak_rss_mb", rss);
    }
    report.print(args.json)
}
