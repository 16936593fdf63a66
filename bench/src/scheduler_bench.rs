//! `corral-bench scheduler`: how long a scheduling pass takes on a large cluster.
//!
//! - `pass_ms_*`: full passes over the whole pending queue (backfill and
//!   preemption included) on a half-full cluster, with fair-share usage charged.
//!   The queue was submitted over the previous 48 hours, so jobs differ in age.
//! - `state_clone_ms_median`: copying that whole state (what a reader that
//!   keeps a snapshot makes the next apply pay, once).
//! - `placements_per_s`: one pass on an empty cluster over a queue of the mix's
//!   single-node jobs (1 GPU and whole nodes) that exactly fills it, so every
//!   job in the pass is placed: allocations per second of pass time.
//! - `empty_pass_*`: one pass on an empty cluster over the full mix (its gangs
//!   fill the cluster after ~1,500 jobs; the rest of the queue is skipped).
//! - `gang_512node_place_ms`: placing one 512-node, topology-aware gang on a
//!   cluster where half the nodes have one GPU taken at random (view prebuilt;
//!   `view_build_ms` is reported separately).

use std::time::Instant;

use clap::Args;
use corral_scheduler::place::{Constraints, place};
use corral_scheduler::view::View;
use corral_state::command::{Command, Outcome, PlannedAllocation};
use corral_state::job::NodeAllocation;
use corral_state::slurm::gres::GpuRequest;
use corral_state::{ClusterState, JobId, Timestamp};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::figures::{Report, Samples, peak_rss_mb};
use crate::synthetic_cluster;

/// Options of `corral-bench scheduler`.
#[derive(Args)]
pub struct SchedulerArgs {
    /// Nodes in the synthetic cluster (3-level fat tree, 32 nodes per leaf switch).
    #[arg(long, default_value_t = 10_000)]
    nodes: u32,
    /// GPUs per node.
    #[arg(long, default_value_t = 8)]
    gpus_per_node: u32,
    /// Pending jobs.
    #[arg(long, default_value_t = 100_000)]
    pending: u32,
    /// Measured passes.
    #[arg(long, default_value_t = 20)]
    passes: u32,
    /// Seed of the job mix.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    json: bool,
}

fn cluster(args: &SchedulerArgs) -> anyhow::Result<ClusterState> {
    let mut state = synthetic_cluster::build(args.nodes, args.gpus_per_node)?;
    synthetic_cluster::add_fat_tree(&mut state, args.nodes)?;
    Ok(state)
}

/// How long the benchmark queue took to build up: submissions are spread evenly
/// over this window, as a real queue of this size accumulates, so age differs.
const QUEUE_WINDOW_MS: u64 = 48 * 3600 * 1000;

fn submit_mix(
    state: &mut ClusterState,
    args: &SchedulerArgs,
    rng: &mut StdRng,
) -> anyhow::Result<Timestamp> {
    let mut at = state.clock();
    let step_ms = (QUEUE_WINDOW_MS / u64::from(args.pending.max(1))).max(1);
    for _ in 0..args.pending {
        at = Timestamp(at.as_ms() + step_ms);
        let (spec, batch, by) = synthetic_cluster::scheduler_job(rng, args.gpus_per_node);
        match state.apply(Command::Submit {
            spec,
            batch,
            by,
            at,
            key: None,
        }) {
            Ok(Outcome::Submitted { .. }) => {}
            other => anyhow::bail!("benchmark submission refused: {other:?}"),
        }
    }
    Ok(at)
}

fn apply(
    state: &mut ClusterState,
    allocations: Vec<PlannedAllocation>,
    at: Timestamp,
) -> anyhow::Result<()> {
    match state.apply(Command::ApplyPlan {
        allocations,
        preemptions: vec![],
        reasons: vec![],
        at,
    }) {
        Ok(Outcome::Plan(p)) if p.rejected.is_empty() => Ok(()),
        other => anyhow::bail!("benchmark plan not applied whole: {other:?}"),
    }
}

/// Runs the benchmark and prints its figures.
pub fn run(args: &SchedulerArgs) -> anyhow::Result<()> {
    let mut report = Report::default();
    report.put("nodes", args.nodes);
    report.put("gpus_per_node", args.gpus_per_node);
    report.put("pending", args.pending);

    // Empty cluster: one pass places as much as fits.
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut state = cluster(args)?;
    let submitted_at = submit_mix(&mut state, args, &mut rng)?;
    let now = submitted_at.plus_secs(60);

    let t = Instant::now();
    let first = corral_scheduler::plan(&state, now);
    let secs = t.elapsed().as_secs_f64();
    report.put("empty_pass_ms", secs * 1e3);
    report.put("empty_pass_placements", first.allocations.len() as u64);
    placement_rate(args, &mut report)?;

    // Half-full: start the first plan's allocations until half the GPUs are used,
    // let them run an hour (charging fair-share usage), then time full passes.
    let total_gpus = u64::from(args.nodes) * u64::from(args.gpus_per_node);
    let mut used = 0u64;
    let mut half = Vec::new();
    for allocation in first.allocations {
        if used * 2 >= total_gpus {
            break;
        }
        used += allocation
            .nodes
            .iter()
            .map(|n| n.gpus.len() as u64)
            .sum::<u64>();
        half.push(allocation);
    }
    apply(&mut state, half, now)?;
    let later = now.plus_secs(3600);
    state
        .apply(Command::Tick { at: later })
        .map_err(|e| anyhow::anyhow!("tick refused: {e}"))?;
    report.put("running_jobs", state.active_jobs().count() as u64);
    report.put("queued_jobs", state.queued_jobs().count() as u64);
    let mut passes = Samples::default();
    let mut last = None;
    for _ in 0..args.passes {
        let t = Instant::now();
        let plan = corral_scheduler::plan(&state, later);
        passes.push(t.elapsed());
        last = Some(plan);
    }
    let mut clones = Samples::default();
    for _ in 0..args.passes.min(5) {
        let t = Instant::now();
        let copy = state.clone();
        clones.push(t.elapsed());
        drop(copy);
    }
    report.put("state_clone_ms_median", clones.quantile(0.5) / 1e3);
    report.put("pass_ms_median", passes.quantile(0.5) / 1e3);
    report.put("pass_ms_p99", passes.quantile(0.99) / 1e3);
    if let Some(plan) = last {
        report.put("pass_allocations", plan.allocations.len() as u64);
        report.put("pass_reservations", plan.reservations.len() as u64);
        report.put("pass_shape_cache_hits", plan.stats.shape_cache_hits as u64);
        report.put("pass_placements_tried", plan.stats.placements_tried as u64);
        report.put("pass_backfilled", plan.stats.backfilled as u64);
    }
    drop(state);

    gang_on_fragmented_cluster(args, &mut report)?;
    if let Some(rss) = peak_rss_mb() {
        report.put("peak_rss_mb", rss);
    }
    report.print(args.json)
}

/// An empty cluster and a queue of single-node jobs that exactly fills it.
fn placement_rate(args: &SchedulerArgs, report: &mut Report) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(args.seed.wrapping_add(2));
    let mut state = cluster(args)?;
    let capacity = u64::from(args.nodes) * u64::from(args.gpus_per_node);
    let mut queued = 0u64;
    let mut at = state.clock();
    while queued < capacity {
        let (spec, batch, by) = synthetic_cluster::scheduler_job(&mut rng, args.gpus_per_node);
        let gpus = u64::from(spec.gpus_per_node.as_ref().map_or(0, |g| g.count));
        if spec.nodes != 1 || queued + gpus > capacity {
            continue;
        }
        at = Timestamp(at.as_ms() + 1);
        if !matches!(
            state.apply(Command::Submit {
                spec,
                batch,
                by,
                at,
                key: None,
            }),
            Ok(Outcome::Submitted { .. })
        ) {
            anyhow::bail!("placement-rate submission refused");
        }
        queued += gpus;
    }
    let mut samples = Samples::default();
    let mut placed = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let plan = corral_scheduler::plan(&state, at.plus_secs(1));
        samples.push(t.elapsed());
        placed = plan.allocations.len();
    }
    let secs = samples.quantile(0.5) / 1e6;
    report.put("placement_queue_jobs", state.queued_jobs().count() as u64);
    report.put("placement_pass_ms", secs * 1e3);
    report.put("placements_per_s", placed as f64 / secs);
    Ok(())
}

/// Half the nodes get one GPU taken at random; then one 512-node gang is placed.
fn gang_on_fragmented_cluster(args: &SchedulerArgs, report: &mut Report) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(args.seed.wrapping_add(1));
    let mut state = cluster(args)?;
    let at = state.clock().plus_secs(1);
    let fragments: Vec<u32> = (0..args.nodes).filter(|_| rng.random_bool(0.5)).collect();
    let mut allocations = Vec::with_capacity(fragments.len());
    for node in fragments {
        let (mut spec, batch, by) = synthetic_cluster::job(&mut rng, args.gpus_per_node);
        spec.nodes = 1;
        spec.gpus_per_node = Some(GpuRequest {
            gpu_type: None,
            count: 1,
        });
        let Ok(Outcome::Submitted { first, .. }) = state.apply(Command::Submit {
            spec,
            batch,
            by,
            at,
            key: None,
        }) else {
            anyhow::bail!("fragment submission refused");
        };
        let gpu = rng.random_range(0..args.gpus_per_node);
        let part = NodeAllocation {
            node: synthetic_cluster::node_name(node),
            gpus: vec![gpu],
            cpus: 1,
            memory_mb: 0,
        };
        allocations.push(PlannedAllocation {
            job: first,
            attempt: 1,
            nodes: vec![part],
        });
    }
    apply(&mut state, allocations, at)?;
    let (mut spec, batch, by) = synthetic_cluster::job(&mut rng, args.gpus_per_node);
    spec.nodes = 512.min(args.nodes);
    spec.gpus_per_node = Some(GpuRequest {
        gpu_type: None,
        count: args.gpus_per_node,
    });
    let Ok(Outcome::Submitted { first: gang, .. }) = state.apply(Command::Submit {
        spec,
        batch,
        by,
        at,
        key: None,
    }) else {
        anyhow::bail!("gang submission refused");
    };
    let job = state
        .job(gang)
        .ok_or_else(|| anyhow::anyhow!("gang {gang} missing"))?;
    let mut builds = Samples::default();
    let mut places = Samples::default();
    let mut spanned = 0usize;
    for _ in 0..args.passes.max(1) {
        let t = Instant::now();
        let view = View::build(&state, at);
        builds.push(t.elapsed());
        let allowed = |_: usize| true;
        let t = Instant::now();
        let placed = place(
            &view,
            job,
            &Constraints {
                allowed: &allowed,
                enforce_switches: true,
            },
        );
        places.push(t.elapsed());
        let nodes = placed.map_err(|f| anyhow::anyhow!("512-node gang did not place: {f:?}"))?;
        spanned = leaves_spanned(&view, &nodes);
    }
    report.put("gang_512node_place_ms", places.quantile(0.5) / 1e3);
    report.put("gang_512node_leaf_switches", spanned as u64);
    report.put("view_build_ms", builds.quantile(0.5) / 1e3);
    let _: JobId = gang;
    Ok(())
}

fn leaves_spanned(view: &View<'_>, nodes: &[NodeAllocation]) -> usize {
    let leaves: std::collections::BTreeSet<Option<usize>> = nodes
        .iter()
        .filter_map(|n| view.index(&n.node))
        .map(|i| view.layout.topology.leaf_of[i])
        .collect();
    leaves.len()
}
