//! corral-bench: benchmarks that print figures, human-readable or as one JSON
//! object with `--json`. Build with `--release`; debug figures mean nothing.
//!
//! Subcommands: `state` (apply cost of the replicated state machine),
//! `scheduler` (pass time of the scheduling policy), `raft` (commit throughput
//! through replica processes), `failover` (leader kill to next commit),
//! `failover-jobs` (what leader kills and stops do to running jobs on a local
//! cluster), `xid` (XID injection to requeue and restart on a local cluster)
//! `nvml` (health sampling cost on this node's real GPUs), `test-only` (a
//! user looping `--test-only` against others' submit latency) and `watch`
//! (what open job watches cost the controllers).

mod failover_bench;
mod failover_jobs_bench;
mod figures;
mod gpu_occupancy;
mod local_cluster;
mod nvml_bench;
mod process_cluster;
mod raft_bench;
mod replica_process;
mod scheduler_bench;
mod state_bench;
mod synthetic_cluster;
mod test_only_bench;
mod watch_bench;
mod xid_bench;

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
    /// Commit throughput and latency of job submissions through a replica group
    /// of real processes (fsync on).
    Raft(raft_bench::RaftArgs),
    /// Time from SIGKILL of the leader's process to the next committed write, and
    /// term changes while idle.
    Failover(failover_bench::FailoverArgs),
    /// What leader SIGKILLs, SIGSTOPs and an outage of every controller do to
    /// running jobs: jobs killed, GPUs given twice, agents' reattach times
    /// (local cluster of processes).
    FailoverJobs(failover_jobs_bench::FailoverJobsArgs),
    /// Time from an XID on a running 2-node job's GPU to its requeue being
    /// committed and to its next attempt running (local cluster of processes).
    Xid(xid_bench::XidArgs),
    /// Whether one user looping `--test-only` slows others' submissions (local
    /// cluster of processes, a queue of pending jobs).
    TestOnly(test_only_bench::TestOnlyArgs),
    /// What open job watches (`corral wait`) cost the controllers: submission
    /// latency and controller CPU with none and with many open (local cluster
    /// of processes, a queue of pending jobs).
    Watch(watch_bench::WatchArgs),
    /// What health sampling costs per GPU through NVML, on this node's real
    /// GPUs (needs the NVIDIA driver).
    Nvml(nvml_bench::NvmlArgs),
    /// One replica process (started by the raft and failover benchmarks).
    #[command(hide = true)]
    Replica(replica_process::ReplicaArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.bench {
        Bench::State(args) => state_bench::run(&args),
        Bench::Scheduler(args) => scheduler_bench::run(&args),
        Bench::Raft(args) => raft_bench::run(&args),
        Bench::Failover(args) => failover_bench::run(&args),
        Bench::FailoverJobs(args) => failover_jobs_bench::run(&args),
        Bench::Xid(args) => xid_bench::run(&args),
        Bench::Nvml(args) => nvml_bench::run(&args),
        Bench::TestOnly(args) => test_only_bench::run(&args),
        Bench::Watch(args) => watch_bench::run(&args),
        Bench::Replica(args) => replica_process::run(&args),
    }
}
