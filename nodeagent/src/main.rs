//! corral-agent: the node agent. Connects to the controllers over QUIC (mutual
//! TLS), registers the node, heartbeats GPU health, runs and kills the attempts
//! the leader places here, fails fast on critical XID errors, reports checkpoints,
//! runs job steps (`srun`) with the other nodes' agents, and kills its jobs when
//! it cannot renew its lease.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use corral_agent::attempt_journal::Journal;
use corral_agent::fence_watch;
use corral_agent::gpu::{
    GpuBackend, XidAction, backend_from_spec, classify_xid, sample_periodically,
};
use corral_agent::gpu_probe;
use corral_agent::job::process::task_pid;
use corral_agent::lease::{Fencing, FencingWatchdog, Lease};
use corral_agent::link::{self, LinkParts, LinkSettings};
use corral_agent::outage;
use corral_agent::outbox::Outbox;
use corral_agent::recovery;
use corral_agent::resources;
use corral_agent::step;
use corral_agent::supervisor::{Supervisor, SupervisorSettings};
use corral_pki::TlsMaterial;
use corral_proto::agent::{AgentReport, NodeResources};
use corral_proto::step::STEP_ALPN;

/// How often acknowledged attempts older than a day are forgotten.
const JOURNAL_PRUNE_EVERY: Duration = Duration::from_secs(60 * 60);

/// How long a stopping agent waits for the leader to acknowledge its last reports.
const STOP_REPORT_PATIENCE: Duration = Duration::from_secs(5);

/// How often GPU health is sampled for heartbeats.
const HEALTH_SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// The node agent. `corral-agent gpus --help` shows this node's GPUs as the
/// agent sees them.
#[derive(Debug, Parser)]
#[command(name = "corral-agent", version)]
struct Args {
    /// Controllers' client addresses, `host:port[,host:port...]` (agents use the same ports over UDP).
    #[arg(long, env = "CORRAL_CLUSTER", value_delimiter = ',', required = true)]
    controllers: Vec<String>,
    /// The cluster CA certificate.
    #[arg(long)]
    ca: PathBuf,
    /// This agent's certificate (role agent, named after the node).
    #[arg(long)]
    cert: PathBuf,
    /// This agent's key.
    #[arg(long)]
    key: PathBuf,
    /// GPUs: `nvml`, `simulated:COUNT:TYPE` (e.g. simulated:8:h100) or `none`.
    #[arg(long, default_value = "nvml")]
    gpus: String,
    /// Scripts, sockets and other agent files.
    #[arg(long, default_value = "/var/lib/corral/agent")]
    state_dir: PathBuf,
    /// Checkpoint directories (`CORRAL_CHECKPOINT_DIR` = ROOT/JOBID); shared storage on a real cluster.
    #[arg(long, default_value = "/var/lib/corral/checkpoints")]
    checkpoint_root: PathBuf,
    /// CPUs to offer (default: what the kernel reports).
    #[arg(long)]
    cpus: Option<u32>,
    /// Memory to offer, MiB (default: MemTotal).
    #[arg(long)]
    memory_mb: Option<u64>,
    /// Where to accept job steps (`srun`) from other nodes' agents, `ip:port`
    /// (QUIC over UDP), or `off` (steps then run on this node only).
    #[arg(long, default_value = "0.0.0.0:6818")]
    step_listen: String,
    /// The address other agents reach this one at for steps (default: the
    /// listening address, or this node's name with its port when listening on
    /// every interface).
    #[arg(long)]
    step_advertise: Option<String>,
    /// The IP address this agent's channel to the controllers comes from
    /// (the kernel's choice when not given): one of this host's addresses.
    #[arg(long, value_name = "IP")]
    source_ip: Option<std::net::IpAddr>,
    /// Longest random pause, in ms, before looking for a new leader after
    /// losing one (spreads a cluster's agents over this window).
    #[arg(long, default_value_t = 100)]
    reattach_jitter_ms: u64,
    /// Seconds processes may survive SIGKILL before their attempt is given up
    /// on and the node drained (Slurm's UnkillableStepTimeout).
    #[arg(long, env = "CORRAL_AGENT_UNKILLABLE_TIMEOUT_S", default_value_t = 60)]
    unkillable_timeout_s: u64,
    /// Seconds between SIGTERM and SIGKILL for the jobs of this node when the
    /// agent is stopped (SIGTERM or Ctrl-C).
    #[arg(long, default_value_t = 10)]
    stop_grace_s: u64,
    /// Serve metrics (`GET /metrics`, Prometheus' text format) on this
    /// address, e.g. `0.0.0.0:9181`; none when not given.
    #[arg(long, env = "CORRAL_AGENT_METRICS_LISTEN")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Fault injection for tests and the chaos suite: every launch first
    /// stalls this many seconds on its blocking thread, as when the job's
    /// shared storage hangs. Heartbeats must go on meanwhile.
    #[arg(
        long,
        hide = true,
        env = "CORRAL_AGENT_FAULT_LAUNCH_STALL_S",
        default_value_t = 0
    )]
    fault_launch_stall_s: u64,
}

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    match argv.next().as_deref() {
        Some(fence_watch::SUBCOMMAND) => {
            return match argv.next() {
                Some(agent_id) => fence_watch::run(&agent_id),
                None => ExitCode::from(2),
            };
        }
        Some(gpu_probe::SUBCOMMAND) => return gpu_probe::run(argv),
        Some(task_pid::SUBCOMMAND) => return task_pid::run(std::env::args_os().skip(2)),
        _ => {}
    }
    let args = Args::parse();
    corral_logging::init_daemon("info");
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("corral-agent: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("corral-agent: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A checkpoint root every user may write to lets one user make the
/// directory of another's future job first; the agent then refuses to hand
/// it over and that job fails to start. Said once, at the start.
fn warn_if_users_may_write(root: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let writable = std::fs::metadata(root).is_ok_and(|m| m.permissions().mode() & 0o002 != 0);
    if writable {
        tracing::warn!(
            root = %root.display(),
            "every user may write to the checkpoint root: one could make the directory of another's job ahead of it, which the agent will not hand over (that job fails to start); let only root write there (the agent makes each job's directory)"
        );
    }
}

/// This agent's cgroups, where the node has cgroup v2 and the agent may make
/// them; what it found is logged either way.
fn open_cgroups(agent_id: &str) -> Option<corral_agent::job::process::Cgroups> {
    match corral_agent::job::process::Cgroups::open(agent_id) {
        Ok(Some(cgroups)) => {
            tracing::info!(
                cgroups = %cgroups.dir().display(),
                "every attempt runs in a cgroup of its own"
            );
            Some(cgroups)
        }
        Ok(None) => {
            tracing::info!(
                "no cgroup v2 here: job processes are found by process group and environment (one that leaves its group and clears its environment escapes the fence)"
            );
            None
        }
        Err(e) => {
            tracing::warn!(
                "cannot make cgroups below this agent's own: {e}; job processes are found by process group and environment only (run the agent as root, under systemd with Delegate=yes)"
            );
            None
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    // Before any job can start: jobs get these at their default action
    // whatever the agent's parent ignored (see `job_signals`).
    corral_agent::job_signals::catch_for_jobs().context("installing signal handlers")?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    corral_pki::install_crypto_provider();
    // Before anything makes an instrument: one made earlier records nowhere.
    let _metrics_server = match args.metrics_listen {
        Some(listen) => {
            Some(corral_telemetry::start("corral-agent", listen, "--metrics-listen").await?)
        }
        None => None,
    };
    let tls = TlsMaterial::load(&args.ca, &args.cert, &args.key)?;
    let identity = tls.identity().context("reading this agent's certificate")?;
    if identity.role != corral_pki::Role::Agent {
        anyhow::bail!(
            "{} is a {} certificate; the agent needs an agent certificate (`corral certs DIR --agents NODE`)",
            args.cert.display(),
            identity.role
        );
    }
    let node = identity.name.clone();
    for dir in [&args.state_dir, &args.checkpoint_root] {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    warn_if_users_may_write(&args.checkpoint_root);
    // One agent per state directory: a second one would take the first one's
    // journal for its own and kill its jobs as leftovers.
    let lock_path = args.state_dir.join("agent.lock");
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("cannot open {}", lock_path.display()))?;
    let _state_dir_lock = nix::fcntl::Flock::lock(
        lock_file,
        nix::fcntl::FlockArg::LockExclusiveNonblock,
    )
    .map_err(|(_, errno)| {
        anyhow::anyhow!(
            "{} is in use by another corral-agent ({errno}); give each agent its own --state-dir",
            args.state_dir.display()
        )
    })?;
    let slots = backend_from_spec(&args.gpus, &args.state_dir)?;
    let gpu_devices = slots.devices();
    let gpus: Arc<dyn GpuBackend> = Arc::new(slots);
    let gpu_holders = corral_agent::supervisor::GpuHolders::new(Arc::clone(&gpus));
    let outbox = Outbox::default();
    let run_as_job_user = nix::unistd::geteuid().is_root();
    let step_socket = args.state_dir.join("step.sock");
    let boot_id = format!("{:032x}", rand::random::<u128>());
    let agent_id = format!("{node}:{boot_id}");
    let unkillable_timeout = Duration::from_secs(args.unkillable_timeout_s);
    let journal_dir = args.state_dir.join("attempts");
    let (journal, records) = Journal::open(&journal_dir)
        .with_context(|| format!("cannot open the attempt journal {}", journal_dir.display()))?;
    let journal = Arc::new(journal);
    let cgroups = open_cgroups(&agent_id);
    // Before any hello: what earlier agents of this node left behind.
    let recovered = recovery::recover(
        &agent_id,
        &journal,
        records,
        unkillable_timeout,
        (cgroups.as_ref(), Some(&gpu_holders)),
    )
    .await;
    if let Some(cgroups) = &cgroups {
        let removed = cgroups.remove_stale_siblings(&node);
        if removed > 0 {
            tracing::info!(
                removed,
                "removed the empty cgroups of earlier agents of this node"
            );
        }
    }
    let lease = Lease::default();
    let supervisor = Supervisor::new(
        SupervisorSettings {
            node: node.clone(),
            scripts_dir: args.state_dir.join("scripts"),
            checkpoint_root: args.checkpoint_root.clone(),
            run_as_job_user,
            step_socket: Some(step_socket.clone()),
            agent_id: agent_id.clone(),
            unkillable_timeout,
            lease: Some(lease.clone()),
            launch_stall: Duration::from_secs(args.fault_launch_stall_s),
            working_controller: args.controllers.first().cloned(),
            gpu_devices,
            cgroups,
            gpus: Some(gpu_holders),
        },
        outbox.clone(),
        Arc::clone(&journal),
    );
    for (key, end) in recovered {
        let report = outbox.push(end);
        supervisor.hold_recovered(key, report);
    }
    // Without steps the node still runs batch jobs: a step channel or socket
    // that cannot be set up is reported, not fatal.
    let (step_endpoint, step_address) = match step_channel(&args, &tls, &node) {
        Ok(channel) => channel,
        Err(e) => {
            tracing::error!("{e:#}; srun steps will not reach this node");
            (None, None)
        }
    };
    let health = sample_periodically(Arc::clone(&gpus), HEALTH_SAMPLE_EVERY);
    let (roster, held_roster) = tokio::sync::watch::channel(None);
    let standing = outage::Standing {
        lease: lease.clone(),
        roster: held_roster,
    };
    let step_service = step::coordinator::StepService {
        supervisor: supervisor.clone(),
        endpoint: step_endpoint.clone(),
        allocations: step::allocation::Allocations::default(),
        gpu_samples: health.clone(),
        standing: standing.clone(),
    };
    if let Some(endpoint) = step_endpoint {
        tokio::spawn(step::peer::serve(endpoint.clone(), step_service.clone()));
        // Through a controller outage, the jobs run on while most nodes say so.
        tokio::spawn(outage::keep_through_outages(
            node.clone(),
            endpoint,
            standing,
        ));
    } else {
        tracing::warn!(
            "without a step channel this agent cannot ask other nodes whether the controllers are away: an outage of the controllers longer than the lease ends its jobs"
        );
    }
    match step::coordinator::bind(&step_socket) {
        Ok(listener) => {
            tokio::spawn(step::coordinator::serve(listener, step_service));
        }
        Err(e) => tracing::error!(
            "cannot serve srun on {}: {e}; srun will not work in jobs on this node (a shorter --state-dir helps if the path is long)",
            step_socket.display()
        ),
    }
    std::fs::create_dir_all(args.state_dir.join("scripts"))?;
    if let Some(ip) = args.source_ip {
        std::net::UdpSocket::bind((ip, 0)).with_context(|| {
            format!("--source-ip {ip}: no UDP socket can use it; give an address of this host")
        })?;
    }
    let settings = LinkSettings {
        controllers: args.controllers.clone(),
        node: node.clone(),
        boot_id,
        resources: NodeResources {
            cpus: args.cpus.unwrap_or_else(resources::cpus),
            memory_mb: args.memory_mb.unwrap_or_else(resources::memory_mb),
            gpus: gpus
                .gpus()
                .into_iter()
                .map(|g| (g.index, g.model))
                .collect(),
        },
        step_address,
        reattach_jitter: Duration::from_millis(args.reattach_jitter_ms),
        source_ip: args.source_ip,
    };
    tracing::info!(%node, gpus = %args.gpus, run_as_job_user, "agent starting");
    match std::env::current_exe() {
        Ok(binary) => {
            if let Err(e) = task_pid::use_wrapper(binary, run_as_job_user) {
                tracing::warn!("{e}");
            }
        }
        Err(e) => {
            tracing::warn!("cannot find this agent's binary ({e}): SLURM_TASK_PID will not be set")
        }
    }
    // If this agent dies, its jobs end when its lease does.
    if let Err(e) = fence_watch::start(&agent_id, &lease) {
        tracing::error!(
            "cannot start the fencing watchdog ({e}); if this agent dies, its jobs run on until it starts again"
        );
    }

    let metrics = Arc::new(corral_agent::metrics::AgentMetrics::register(
        &health,
        lease.expiry(),
    ));
    // XID fail-fast: kill the attempts using the GPU at once, then tell the leader.
    let mut xids = gpus.xid_events();
    {
        let supervisor = supervisor.clone();
        let metrics = Arc::clone(&metrics);
        tokio::spawn(async move {
            while let Some(event) = xids.recv().await {
                metrics.xid(event.gpu, event.xid);
                let class = classify_xid(event.xid);
                if matches!(class.action, XidAction::Ignore) {
                    tracing::info!(
                        gpu = event.gpu,
                        xid = event.xid,
                        "XID {}: {} (no action)",
                        event.xid,
                        class.meaning
                    );
                    continue;
                }
                let reason = format!("XID {}: {} {}", event.xid, class.meaning, event.detail);
                supervisor.kill_users_of_gpu(event.gpu, |killed| {
                    tracing::warn!(
                        gpu = event.gpu,
                        xid = event.xid,
                        ?killed,
                        "critical XID {}: {}",
                        event.xid,
                        class.meaning
                    );
                    if class.action.drains() {
                        AgentReport::GpuFailed {
                            gpu: event.gpu,
                            xid: Some(event.xid),
                            reason,
                            drain_node: matches!(class.action, XidAction::DrainNode),
                        }
                    } else {
                        // An application error: the GPU stays in service.
                        AgentReport::XidKilled {
                            gpu: event.gpu,
                            xid: event.xid,
                            attempts: killed,
                            reason,
                        }
                    }
                });
            }
        });
    }
    // Self-fencing: no renewed lease, no running jobs.
    {
        let (supervisor, lease) = (supervisor.clone(), lease.clone());
        let metrics = Arc::clone(&metrics);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(Duration::from_millis(100));
            let mut watchdog = FencingWatchdog::default();
            loop {
                ticks.tick().await;
                let lapsed = lease.lapsed();
                // Asked only when it matters.
                let holds = lapsed && !supervisor.held().is_empty();
                match watchdog.tick(lapsed, lease.ever_held(), holds) {
                    Fencing::Nothing => continue,
                    Fencing::Quietly => {}
                    Fencing::Announced => {
                        tracing::error!(
                            "lease lapsed: no leader acknowledged a heartbeat in time; killing every job on this node"
                        );
                        metrics.fenced();
                    }
                }
                supervisor.fence();
            }
        });
    }
    // Acknowledged attempts are remembered for a day, then forgotten.
    {
        let journal = Arc::clone(&journal);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(JOURNAL_PRUNE_EVERY);
            loop {
                ticks.tick().await;
                let journal = Arc::clone(&journal);
                match tokio::task::spawn_blocking(move || journal.prune()).await {
                    Ok(Err(e)) => tracing::warn!("pruning the attempt journal: {e}"),
                    Err(e) => tracing::warn!("pruning the attempt journal: {e}"),
                    Ok(Ok(_)) => {}
                }
            }
        });
    }
    let client = tls.quic_client_config()?;
    let link = tokio::spawn(link::run(
        settings,
        client,
        LinkParts {
            supervisor: supervisor.clone(),
            outbox: outbox.clone(),
            lease,
            health,
            roster,
        },
    ));
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = term.recv() => {}
        _ = link => {}
    }
    // A stopped agent leaves nothing running: no lease would fence it. Its
    // jobs get SIGTERM, then SIGKILL, and are reported lost (requeued).
    let held = supervisor.held().len();
    tracing::info!(
        attempts = held,
        "agent stopping: ending this node's jobs (SIGTERM, SIGKILL after {} s); they are requeued",
        args.stop_grace_s
    );
    supervisor
        .stop_all(Duration::from_secs(args.stop_grace_s))
        .await;
    let deadline = tokio::time::Instant::now() + STOP_REPORT_PATIENCE;
    while !outbox.is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if !outbox.is_empty() {
        tracing::warn!(
            "stopped before the leader acknowledged every report; the next start sends them again"
        );
    }
    Ok(())
}

/// The QUIC endpoint other agents send step launches to (which also opens this
/// agent's connections to them), and the address it is advertised at; neither
/// with `--step-listen off`.
fn step_channel(
    args: &Args,
    tls: &TlsMaterial,
    node: &str,
) -> anyhow::Result<(Option<quinn::Endpoint>, Option<String>)> {
    if args.step_listen == "off" {
        return Ok((None, None));
    }
    let listen: std::net::SocketAddr = args.step_listen.parse().with_context(|| {
        format!(
            "--step-listen {}: not an address; give ip:port (e.g. 0.0.0.0:6818) or off",
            args.step_listen
        )
    })?;
    let mut endpoint = quinn::Endpoint::server(tls.quic_server_config_for(STEP_ALPN)?, listen)
        .with_context(|| format!("cannot listen for steps on {listen} (UDP)"))?;
    endpoint.set_default_client_config(tls.quic_client_config_for(STEP_ALPN)?);
    let bound = endpoint.local_addr()?;
    let advertised = args.step_advertise.clone().unwrap_or_else(|| {
        if bound.ip().is_unspecified() {
            format!("{node}:{}", bound.port())
        } else {
            bound.to_string()
        }
    });
    tracing::info!(%bound, %advertised, "accepting job steps from other agents");
    Ok((Some(endpoint), Some(advertised)))
}
