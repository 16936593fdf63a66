//! corral-bench: benchmarks that print figures, human-readable or as one JSON
//! object with `--json`. Build with `--release`; debug figures mean nothing.
//!
//! Subcommands today: `state` (apply cost of the replicated state machine) and
//! `scheduler` (pass time of the scheduling policy). The Raft and failover
//! benchmarks join as those parts are built.

mod figures;
mod scheduler_bench;
mod state_bench;
mod synthetic_cluster;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "corral-bench",
    about = "corral benchmarks; build with --release"
)]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// Apply cost of the state machine: Submit, ApplyPlan, Tick, exits, digest and
    /// snapshot on a large synthetic cluster.
    State(state_bench::StateArgs),
    /// Scheduling pass time on a large fat-tree cluster: full passes over a large
    /// queue on a half-full cluster, placements per second on an empty one, and one
    /// 512-node gang on a fragmented one.
    Scheduler(scheduler_bench::SchedulerArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.bench {
        Bench::State(args) => state_bench::run(&args),
        Bench::Scheduler(args) => scheduler_bench::run(&args),
    }
}
