//! corral-chaos: starts a real corral cluster (three controllers and agents
//! with simulated GPUs, as processes), runs a seeded workload of trainer jobs
//! and client operations while a nemesis injects faults, records the history,
//! and checks it with corral-jepsen's checkers. Every run prints the verdict
//! table, writes `history.jsonl` and `report.html`, and exits 1 on any
//! violation. With `--cluster` it tests an existing deployment instead, with
//! the fault commands the operator allows (`--nemesis-exec`). `check` checks a
//! history recorded elsewhere.
//!
//! Start at `run` below, then `workload` (clients), `trainer` (the jobs),
//! `nemesis` (faults) and `recorder` (the history).

mod cluster;
mod control;
mod disk_stall;
mod finals;
mod nemesis;
mod preemption_watch;
mod preemptors;
mod process_sampler;
mod recorder;
mod scenario;
mod site;
mod skew;
mod soak;
mod trainer;
mod workload;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use corral_jepsen::history::{EventKind, HISTORY_VERSION, Header, History};
use corral_jepsen::recovery::recovery;
use corral_jepsen::report::{recovery_table, timeline_html, verdict_table};
use corral_jepsen::{Verdict, check_all};

use crate::cluster::{Cluster, Deployment, LocalNetwork};
use crate::control::Control;
use crate::recorder::Recorder;

#[derive(Parser)]
#[command(
    name = "corral-chaos",
    about = "Fault injection against a real corral cluster, checked from the recorded history"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario on a fresh local cluster and check it.
    Run(Box<RunArgs>),
    /// Check a recorded history (`history.jsonl`).
    Check {
        /// The history.
        history: PathBuf,
        /// Write the timeline page here.
        #[arg(long)]
        report: Option<PathBuf>,
    },
    /// The scenarios `run` knows.
    List {
        /// Only those of the CI matrix, each with its seconds of workload.
        #[arg(long)]
        matrix: bool,
    },
    /// Run a scenario (mixed by default) back to back on fresh clusters for
    /// hours, printing every checker's verdicts after each hour
    /// (`corral-chaos soak --hours 1 --duration-s 300`).
    Soak(Box<SoakArgs>),
}

#[derive(Args)]
struct SoakArgs {
    /// Hours to run.
    #[arg(long, default_value_t = 1)]
    hours: u32,
    /// Where the runs go (`DIR/hour-H/seed-S`).
    #[arg(long, default_value = "chaos-runs/soak")]
    soak_dir: PathBuf,
    /// Each run, as `run` takes it (`--seed` is the first run's).
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Args, Clone)]
struct RunArgs {
    /// The scenario (`corral-chaos list`).
    #[arg(long, default_value = "mixed")]
    scenario: String,
    /// The seed of the workload and the fault schedule.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seconds of workload and faults (the cluster then drains).
    #[arg(long, default_value_t = 45)]
    duration_s: u64,
    /// Seconds after the last fault healed within which every job must end,
    /// plus what the backlog queued at the heal needs beyond one round of
    /// the cluster's slots (a long fault that cut nodes off queues jobs).
    #[arg(long, default_value_t = 120)]
    liveness_s: u64,
    /// Where the cluster, the jobs' files, the history and the report go
    /// (emptied first; default: chaos-runs/SCENARIO-SEED).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The `corral` binary (default: beside this one).
    #[arg(long)]
    corral: Option<PathBuf>,
    /// Controller replicas (3 or 5; the ring partition needs 5).
    #[arg(long, default_value_t = 3)]
    controllers: u32,
    /// Nodes (agents), 8 simulated GPUs each.
    #[arg(long, default_value_t = 4)]
    nodes: u32,
    /// `netns`: every process in a network namespace of its own on a private
    /// bridge, so partitions can be injected (root, iproute2, iptables);
    /// `proxy`: on loopback, each process with an address of its own and a
    /// fault-injecting proxy between them (no root; agents are not parted
    /// from each other); `loopback`: all on 127.0.0.1, partitions skipped;
    /// `auto`: netns where this machine allows it, else proxy.
    #[arg(long, value_enum, default_value_t = Network::Auto)]
    network: Network,
    /// Client threads.
    #[arg(long, default_value_t = 3)]
    clients: u32,
    /// Test an existing deployment instead of a local cluster: its
    /// controllers' client addresses (`host:port,...`). Needs --ca, --cert and
    /// --key, and --out on a file system every node mounts at the same path
    /// (the jobs write their records there).
    #[arg(long, value_name = "ADDRESSES")]
    cluster: Option<String>,
    /// The deployment's CA certificate.
    #[arg(long, requires = "cluster")]
    ca: Option<PathBuf>,
    /// The certificate and key of the user the workload submits as.
    #[arg(long, requires = "cluster")]
    cert: Option<PathBuf>,
    #[arg(long, requires = "cluster")]
    key: Option<PathBuf>,
    /// An administrator's certificate and key (for `corral cluster`;
    /// default: the user's).
    #[arg(long, requires = "cluster")]
    admin_cert: Option<PathBuf>,
    #[arg(long, requires = "cluster")]
    admin_key: Option<PathBuf>,
    /// A fault command the runner may run against the deployment,
    /// `NAME=COMMAND` (repeatable), e.g. `kill-controller='ssh {host}
    /// systemctl kill -s KILL corrald'`. Names: kill-, stop-, start-, pause-,
    /// resume-controller ({host}, {id}); kill-, start-, pause-, resume-agent
    /// ({host}, {node}); cut ({host}, {peer}); heal ({host}); xid ({host},
    /// {node}, {gpu}, {xid}). Faults whose commands are missing are skipped.
    #[arg(
        long = "nemesis-exec",
        value_name = "NAME=COMMAND",
        requires = "cluster"
    )]
    nemesis_exec: Vec<String>,
    /// The `corral` the jobs call on the deployment's nodes.
    #[arg(long, default_value = "corral", requires = "cluster")]
    job_corral: PathBuf,
    /// A directory the jobs put first on PATH on the deployment's nodes
    /// (where `srun` is, if not on their PATH already).
    #[arg(long, requires = "cluster")]
    job_path: Option<PathBuf>,
    /// Percent of trainers that run 20-25 s (the rest 3-9 s).
    #[arg(long, default_value_t = 15)]
    long_pct: u32,
}

/// Where the cluster's processes talk (see `RunArgs::network`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Network {
    Auto,
    Netns,
    Proxy,
    Loopback,
}

impl Network {
    /// The local cluster's network; `auto` says why not namespaces when it
    /// cannot have them.
    fn resolve(self) -> LocalNetwork {
        match self {
            Network::Netns => LocalNetwork::Netns,
            Network::Proxy => LocalNetwork::Proxy,
            Network::Loopback => LocalNetwork::Loopback,
            Network::Auto => {
                if namespaces_possible() {
                    LocalNetwork::Netns
                } else {
                    println!(
                        "corral-chaos: on loopback behind a fault proxy (namespaces need root, \
                         iproute2, iptables and nsenter): agents are not parted from each other"
                    );
                    LocalNetwork::Proxy
                }
            }
        }
    }
}

/// Whether this machine lets a cluster have network namespaces: root, the
/// tools, and namespaces that can be made (root in a container may still be
/// refused them).
fn namespaces_possible() -> bool {
    let root = nix::unistd::geteuid().is_root();
    let tools = ["ip", "iptables", "nsenter"].iter().all(|program| {
        std::process::Command::new(program)
            .arg("--version")
            .output()
            .is_ok()
    });
    if !(root && tools) {
        return false;
    }
    let probe = format!("crl-chaos-probe-{}", std::process::id());
    let made = std::process::Command::new("ip")
        .args(["netns", "add", &probe])
        .output()
        .is_ok_and(|out| out.status.success());
    if made {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &probe])
            .output();
    }
    made
}

/// The agents' lease (corral's default), which bounds how long a cut-off
/// node's attempt may run on.
const LEASE_MS: u64 = 10_000;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(&args),
        Command::Check { history, report } => check(&history, report.as_deref()),
        Command::List { matrix } => {
            for s in scenario::all() {
                match (matrix, s.matrix_s) {
                    (false, _) => println!("{:<22} {}", s.name, s.about),
                    (true, Some(seconds)) => println!("{} {seconds}", s.name),
                    (true, None) => {}
                }
            }
            Ok(true)
        }
        Command::Soak(args) => {
            soak::soak(args.hours, args.run.seed, &args.soak_dir, |seed, dir| {
                let mut one = args.run.clone();
                one.seed = seed;
                one.out = Some(dir.to_path_buf());
                run(&one)
            })
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("corral-chaos: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Checks a history file; true when every promise held.
fn check(path: &Path, report: Option<&Path>) -> anyhow::Result<bool> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let history = History::parse(&text).with_context(|| format!("reading {}", path.display()))?;
    let verdicts = check_all(&history);
    print!("{}", recovery_table(&recovery(&history)));
    print!("{}", verdict_table(&verdicts));
    if let Some(report) = report {
        std::fs::write(report, timeline_html(&history, &verdicts))
            .with_context(|| format!("writing {}", report.display()))?;
        println!("report: {}", report.display());
    }
    Ok(verdicts.iter().all(Verdict::holds))
}

fn run(args: &RunArgs) -> anyhow::Result<bool> {
    let scenario = scenario::named(&args.scenario).with_context(|| {
        format!(
            "no scenario '{}': `corral-chaos list` names them",
            args.scenario
        )
    })?;
    let corral = match &args.corral {
        Some(path) => path.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("this program has no directory")?
            .join("corral"),
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("chaos-runs/{}-{}", scenario.name, args.seed)));
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("emptying {}", out.display()))?;
    }
    std::fs::create_dir_all(&out)?;
    let out = out.canonicalize()?;
    workload::prepare(&out)?;
    println!(
        "corral-chaos: scenario {} (seed {}): {}",
        scenario.name, args.seed, scenario.about
    );
    let site = if scenario.preemption {
        if args.cluster.is_some() {
            anyhow::bail!(
                "scenario {} needs a cluster set up for preemption (site.rs): on a local cluster only",
                scenario.name
            );
        }
        Some(site::write(&out, args.nodes)?)
    } else {
        None
    };
    let cluster = match &args.cluster {
        None => Cluster::up(
            &corral,
            &out.join("cluster"),
            (args.controllers, args.nodes),
            args.network.resolve(),
            site.as_deref(),
        )?,
        Some(addresses) => {
            let given = |value: &Option<PathBuf>, flag: &str| {
                value
                    .clone()
                    .with_context(|| format!("--cluster needs {flag}"))
            };
            let admin = match (&args.admin_cert, &args.admin_key) {
                (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
                (None, None) => None,
                _ => anyhow::bail!("give both --admin-cert and --admin-key, or neither"),
            };
            Cluster::existing(
                &corral,
                Deployment {
                    addresses: addresses.clone(),
                    ca: given(&args.ca, "--ca")?,
                    cert: given(&args.cert, "--cert")?,
                    key: given(&args.key, "--key")?,
                    admin,
                    commands: Control::exec_commands(&args.nemesis_exec)?,
                    job_corral: args.job_corral.clone(),
                    job_path: args.job_path.clone(),
                },
            )?
        }
    };
    let recorder = Recorder::new(Header {
        corral_history: HISTORY_VERSION,
        scenario: scenario.name.to_string(),
        seed: args.seed,
        lease_ms: LEASE_MS,
        liveness_bound_ms: args.liveness_s * 1000,
        clock_tolerance_ms: 500,
        preemption: scenario.preemption.then_some(site::TIMES),
        faults: scenario.faults.iter().map(|f| f.name()).collect(),
    });
    let shared = workload::Shared {
        cluster: &cluster,
        recorder: &recorder,
        run_dir: out.clone(),
        stop: AtomicBool::new(false),
        next_op: AtomicU64::new(1),
        jobs: Mutex::new(Vec::new()),
    };
    let faults_stop = AtomicBool::new(false);
    let unhealed_fault: Mutex<Option<String>> = Mutex::new(None);
    let observer_stop = AtomicBool::new(false);
    let load = workload::Workload {
        clients: args.clients,
        // Slower where urgent gangs take most GPUs every few seconds: the
        // same pace would queue more than the cluster can run.
        pace: Duration::from_millis(if scenario.preemption { 2500 } else { 1500 }),
        seed: args.seed,
        gpus_per_node: 4,
        long_pct: args.long_pct.min(100),
        preemption: scenario.preemption,
    };
    let sampled: Vec<String> = cluster
        .controllers
        .iter()
        .map(|id| format!("controller-{id}"))
        .chain(cluster.nodes.iter().map(|n| format!("agent-{n}")))
        .collect();
    let drained = std::thread::scope(|outer| {
        outer.spawn(|| observe_leaders(&cluster, &recorder, &observer_stop));
        if let Control::Local { dir, .. } = &cluster.control {
            outer.spawn(|| process_sampler::run(dir, &sampled, &recorder, &observer_stop));
        }
        std::thread::scope(|scope| {
            scope.spawn(|| workload::run(load, &shared));
            if scenario.preemption {
                scope.spawn(|| preemptors::run(args.clients, args.seed, &shared));
            }
            let faults = scope.spawn(|| {
                nemesis::run(
                    &cluster,
                    &recorder,
                    (&scenario.faults, scenario.interval, args.seed),
                    &faults_stop,
                )
            });
            std::thread::sleep(Duration::from_secs(args.duration_s));
            shared.stop.store(true, Ordering::SeqCst);
            faults_stop.store(true, Ordering::SeqCst);
            if let Ok(Err(unhealed)) = faults.join() {
                eprintln!("corral-chaos: {unhealed}");
                *unhealed_fault.lock().unwrap_or_else(|p| p.into_inner()) = Some(unhealed);
            }
        });
        // The clients and the nemesis are done: the last fault is healed.
        // Let every job end, then note who leads; the observer watches the
        // replicas rejoin for the liveness checker's whole window after the
        // heal, however soon the jobs drained.
        let healed_at = Instant::now();
        let queued = queue_length(&cluster).unwrap_or(0);
        let bound =
            Duration::from_secs(args.liveness_s) + backlog_allowance(queued, cluster.nodes.len());
        recorder.set_liveness_bound_ms(bound.as_millis() as u64);
        let drained = drain(&cluster, bound);
        let window = Duration::from_millis(corral_jepsen::checkers::rejoin::REJOIN_WITHIN + 1_000);
        std::thread::sleep(window.saturating_sub(healed_at.elapsed()));
        if let Some((leader, term)) = cluster.leader() {
            recorder.record(EventKind::Leader {
                replica: leader,
                term,
            });
        }
        observer_stop.store(true, Ordering::SeqCst);
        drained
    });
    let finals = finals::read(&cluster, &recorder)?;
    finals::record(&recorder, finals);
    recorder.read_job_events(&out.join("events"))?;
    let history = recorder.history();
    let history_path = out.join("history.jsonl");
    std::fs::write(&history_path, history.to_jsonl())?;
    let verdicts = check_all(&history);
    let report_path = out.join("report.html");
    std::fs::write(&report_path, timeline_html(&history, &verdicts))?;
    summary(&history, &verdicts, drained);
    println!(
        "history: {}\nreport:  {}",
        history_path.display(),
        report_path.display()
    );
    if let Some(unhealed) = unhealed_fault
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
    {
        anyhow::bail!("{unhealed}");
    }
    Ok(verdicts.iter().all(Verdict::holds))
}

/// How often the replicas' catch-up is recorded when it does not change, so
/// a checker finds a reading in any window of a few seconds.
const REPLICAS_AT_LEAST_EVERY: Duration = Duration::from_secs(1);

/// Polls who leads until `stop`, recording each change of leader or term,
/// and which replicas the leader sees caught up (on a change, and at least
/// every [`REPLICAS_AT_LEAST_EVERY`]).
fn observe_leaders(cluster: &Cluster, recorder: &Recorder, stop: &AtomicBool) {
    let mut last = None;
    let mut last_replicas: Option<(Instant, Vec<u64>, Vec<u64>)> = None;
    while !stop.load(Ordering::SeqCst) {
        if let Some(view) = cluster.leader_view() {
            if last != Some((view.leader, view.term)) {
                last = Some((view.leader, view.term));
                recorder.record(EventKind::Leader {
                    replica: view.leader,
                    term: view.term,
                });
            }
            let due = last_replicas
                .as_ref()
                .is_none_or(|(at, members, caught_up)| {
                    at.elapsed() >= REPLICAS_AT_LEAST_EVERY
                        || *members != view.members
                        || *caught_up != view.caught_up
                });
            if due && !view.caught_up.is_empty() {
                recorder.record(EventKind::Replicas {
                    leader: view.leader,
                    members: view.members.clone(),
                    caught_up: view.caught_up.clone(),
                });
                last_replicas = Some((Instant::now(), view.members, view.caught_up));
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Waits until no job is pending or running, up to `patience`; how long it
/// took, or `None` when jobs were left.
/// The longest trainer the workload runs, seconds (250 steps of 100 ms).
const LONGEST_TRAINER_S: u64 = 25;

/// What a backlog of `queued` unfinished jobs needs beyond the first round
/// of a cluster of `nodes`: each node runs at least two of the workload's
/// jobs at once (4 GPUs of 8 each, or one rank of a 2-node gang), and each
/// further round is counted at the longest trainer.
fn backlog_allowance(queued: usize, nodes: usize) -> Duration {
    let slots = (nodes * 2).max(1);
    let rounds = queued.div_ceil(slots).saturating_sub(1) as u64;
    Duration::from_secs(rounds * LONGEST_TRAINER_S)
}

/// How many jobs the queue holds now (pending and running).
fn queue_length(cluster: &Cluster) -> Option<usize> {
    let out = cluster
        .corral(&["--json", "queue"], Duration::from_secs(10))
        .ok()?;
    let queue: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    queue.as_array().map(Vec::len)
}

fn drain(cluster: &Cluster, patience: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < patience {
        if let Ok(out) = cluster.corral(&["--json", "queue"], Duration::from_secs(10))
            && out.status.success()
            && serde_json::from_slice::<serde_json::Value>(&out.stdout)
                .ok()
                .and_then(|v| v.as_array().map(Vec::is_empty))
                == Some(true)
        {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    None
}

/// The verdict table and what the run did.
fn summary(history: &History, verdicts: &[Verdict], drained: Option<Duration>) {
    let count =
        |f: &dyn Fn(&EventKind) -> bool| history.events.iter().filter(|e| f(&e.kind)).count();
    let faults = count(&|k| matches!(k, EventKind::FaultBegin { .. }));
    let skipped = count(&|k| matches!(k, EventKind::FaultSkipped { .. }));
    let operations = count(&|k| matches!(k, EventKind::Invoke { .. }));
    let jobs = history.finals().count();
    let attempts: usize = history.finals().map(|j| j.attempts.len()).sum();
    println!(
        "{:.0} s: {faults} faults injected ({skipped} skipped), {operations} client operations, {jobs} jobs, {attempts} attempts; drained {}",
        history.end() as f64 / 1000.0,
        drained.map_or("NOT within the bound".to_string(), |d| format!(
            "in {:.1} s",
            d.as_secs_f64()
        ))
    );
    print!("{}", recovery_table(&recovery(history)));
    print!("{}", verdict_table(verdicts));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backlog_beyond_one_round_of_slots_lengthens_the_drain() {
        assert_eq!(backlog_allowance(0, 4), Duration::ZERO);
        assert_eq!(backlog_allowance(8, 4), Duration::ZERO, "one round");
        assert_eq!(backlog_allowance(9, 4), Duration::from_secs(25));
        // The 300 s scenario's backlog: ~600 jobs on 4 nodes.
        assert_eq!(backlog_allowance(600, 4), Duration::from_secs(74 * 25));
        assert_eq!(backlog_allowance(3, 0), Duration::from_secs(50));
    }
}
