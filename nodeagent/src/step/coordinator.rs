//! The step socket: `srun` inside a job connects to its node's agent over a
//! Unix socket, and that agent coordinates the step. It checks the caller's
//! uid (the job's user, root, or the agent's own user), lays the step out on
//! the allocation, runs this node's share itself and the other nodes' shares
//! through their agents ([`super::peer`]), merges every share's output and
//! exits into one stream back to `srun`, and forwards `srun`'s signals. `srun`
//! going away aborts the step everywhere.
//!
//! `corral checkpoint` inside a job reaches the same socket: the checkpoint is
//! recorded only for the attempt that runs here now, and only for its user.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use std::sync::Arc;
use std::time::Duration;

use corral_pki::{Identity, Role};
use corral_proto::agent::{AgentReport, Launch, read_frame, write_frame};
use corral_proto::step::{
    ALLOCATION_HOLD_COMMAND, SrunRequest, StepControl, StepEvent, StepLaunch,
};
use corral_state::ids::JobId;
use corral_state::job::ExitStatus;
use corral_state::slurm::signal::Signal;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::UnixListener;
use tokio::sync::{mpsc, watch};

use super::allocation::{ATTACH_PATIENCE, Allocations, Release};
use super::peer::run_remote_share;
use super::shape::plan_step;
use super::tasks::{InputPiece, run_node_share};
use crate::gpu::GpuSample;
use crate::job::environment::{LaunchContext, allocation_environment};
use crate::supervisor::Supervisor;

/// Serves `srun` on a Unix socket at `path` (replacing a stale one). The socket
/// is open to every local user; each request is checked against the caller's
/// uid.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(listener)
}

/// What serves step requests: the attempts, the way to other agents
/// (`None`: this agent runs single-node steps only), and the allocations held
/// from login nodes.
#[derive(Clone)]
pub struct StepService {
    /// This node's attempts.
    pub supervisor: Supervisor,
    /// Reaches the other nodes' agents.
    pub endpoint: Option<quinn::Endpoint>,
    /// Allocations held by `srun` and `salloc` on login nodes.
    pub allocations: Allocations,
    /// The GPUs' latest health samples (for `sstat`).
    pub gpu_samples: watch::Receiver<Vec<GpuSample>>,
    /// How this node stands with the controllers, for other agents that ask.
    pub standing: crate::outage::Standing,
}

/// Who asks.
#[derive(Debug, Clone)]
pub enum Caller {
    /// A process on this node, by uid (the step socket).
    Local(u32),
    /// A user elsewhere (a login node), by certificate (the QUIC channel).
    Remote(Identity),
}

impl Caller {
    /// Whether this caller may start steps in (or hold) a job of `owner`
    /// (name) with uid `owner_uid`: the job's user, and root or the agent's
    /// own user locally, or an admin certificate remotely, as Slurm lets
    /// root and SlurmUser.
    pub fn may_use(&self, owner: &str, owner_uid: u32) -> bool {
        match self {
            Caller::Local(uid) => {
                *uid == 0 || *uid == nix::unistd::geteuid().as_raw() || *uid == owner_uid
            }
            Caller::Remote(identity) => identity.name == owner || identity.role == Role::Admin,
        }
    }

    /// The caller in words, for refusals.
    pub fn describe(&self) -> String {
        match self {
            Caller::Local(uid) => format!("uid {uid}"),
            Caller::Remote(identity) => format!("user {}", identity.name),
        }
    }
}

/// Accepts `srun` connections until the listener fails.
pub async fn serve(listener: UnixListener, service: StepService) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let service = service.clone();
                tokio::spawn(async move {
                    let result = async {
                        let caller = Caller::Local(stream.peer_cred()?.uid());
                        let (mut reader, writer) = stream.into_split();
                        let first = read_frame::<_, StepControl>(&mut reader).await?;
                        handle(first, reader, writer, caller, service).await
                    };
                    if let Err(e) = result.await {
                        tracing::debug!("step connection: {e}");
                    }
                });
            }
            Err(e) => {
                tracing::error!("the step socket failed: {e}; srun no longer works on this node");
                return;
            }
        }
    }
}

/// How long `corral checkpoint` inside a job waits for the cluster to commit
/// its report before saying it is only held by the agent.
const CHECKPOINT_COMMIT_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a request from a login node waits for this node to hear of the
/// job's attempt from the leader (the job shows RUNNING once its allocation
/// commits, a moment before the launch reaches the agent).
const LAUNCH_PATIENCE: Duration = Duration::from_secs(30);

/// How often an attached login node's hold looks whether its attempt still runs.
const HOLD_CHECK: Duration = Duration::from_millis(250);

/// Answers one request, `first` being its first message, from `caller`.
pub async fn handle<R, W>(
    first: Option<StepControl>,
    reader: R,
    mut writer: W,
    caller: Caller,
    service: StepService,
) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin,
{
    match (first, &caller) {
        (Some(StepControl::Run(request)), _) => {
            step(*request, reader, writer, caller, service).await
        }
        (
            Some(StepControl::Checkpoint {
                job,
                attempt,
                step,
                path,
            }),
            Caller::Local(uid),
        ) => {
            let answer = checkpoint(&service.supervisor, (job, attempt), *uid, step, path).await;
            write_frame(&mut writer, &answer).await?;
            Ok(())
        }
        (Some(StepControl::AwaitRelease { job, attempt }), Caller::Local(uid)) => {
            let key = (job, attempt);
            let supervisor = &service.supervisor;
            let refusal = match supervisor.step_attempt(key) {
                Some(launch) if caller.may_use(&launch.job.spec.user, launch.job.spec.uid) => None,
                Some(_) => Some(format!("uid {uid} may not hold job {job}")),
                None => Some(format!(
                    "job {job} attempt {attempt} does not run on {}",
                    supervisor.node()
                )),
            };
            if let Some(refusal) = refusal {
                write_frame(&mut writer, &StepEvent::Refused(refusal)).await?;
                return Ok(());
            }
            let allocations = &service.allocations;
            allocations.sweep(key, |k| supervisor.step_attempt(k).is_some());
            // The holder going away (killed with its attempt) ends the wait.
            let mut reader = reader;
            let mut byte = [0u8; 1];
            tokio::select! {
                release = allocations.await_release(key, ATTACH_PATIENCE) => {
                    let answer = StepEvent::Released(release.code, release.why);
                    write_frame(&mut writer, &answer).await?;
                }
                _ = reader.read(&mut byte) => {}
            }
            Ok(())
        }
        (Some(StepControl::Usage { job }), _) => {
            let answer = super::usage::of_job(&service, job, &caller).await;
            write_frame(&mut writer, &answer).await?;
            Ok(())
        }
        (Some(StepControl::Attach { job }), Caller::Remote(_)) => {
            attach(job, reader, writer, &caller, &service).await
        }
        (first, _) => {
            let what = match first {
                None => "nothing",
                Some(StepControl::Run(_)) => "Run",
                Some(StepControl::Launch(_)) => "Launch",
                Some(StepControl::Signal(_)) => "Signal",
                Some(StepControl::Checkpoint { .. }) => "Checkpoint",
                Some(StepControl::Attach { .. }) => "Attach",
                Some(StepControl::Release(_)) => "Release",
                Some(StepControl::AwaitRelease { .. }) => "AwaitRelease",
                Some(StepControl::Usage { .. }) => "Usage",
                Some(StepControl::Stdin(_)) => "Stdin",
                Some(StepControl::StdinEnd) => "StdinEnd",
                Some(StepControl::Resize(_)) => "Resize",
                Some(StepControl::Reach) => "Reach",
            };
            let refusal = StepEvent::Refused(format!(
                "{} may not open a step request with {what}",
                caller.describe()
            ));
            write_frame(&mut writer, &refusal).await?;
            Ok(())
        }
    }
}

/// `corral checkpoint` inside a job.
async fn checkpoint(
    supervisor: &Supervisor,
    key: crate::supervisor::AttemptKey,
    caller: u32,
    step: u64,
    path: String,
) -> StepEvent {
    let (job, attempt) = key;
    match supervisor.record_checkpoint(key, caller, step, path) {
        Ok(None) => StepEvent::Accepted,
        Ok(Some(report)) => {
            match supervisor
                .report_settled(report, CHECKPOINT_COMMIT_PATIENCE)
                .await
            {
                Some(true) => StepEvent::Accepted,
                Some(false) => StepEvent::Refused(format!(
                    "the cluster refused checkpoint {step} of job {job} attempt \
                     {attempt}: the attempt had already ended"
                )),
                None => StepEvent::Held(format!(
                    "checkpoint {step} of job {job} is held by this node's agent, but the \
                     cluster has not committed it within {} s (no leader reachable?); the \
                     agent keeps reporting it, and a requeued attempt resumes from it only \
                     once it is committed",
                    CHECKPOINT_COMMIT_PATIENCE.as_secs()
                )),
            }
        }
        Err(reason) => StepEvent::Refused(reason),
    }
}

/// The running attempt of `job` here; a request from a login node waits up
/// to [`LAUNCH_PATIENCE`] for it.
async fn running_attempt(
    supervisor: &Supervisor,
    job: JobId,
    caller: &Caller,
) -> Option<(crate::supervisor::AttemptKey, Arc<Launch>)> {
    let deadline = tokio::time::Instant::now() + LAUNCH_PATIENCE;
    let mut pause = Duration::from_millis(5);
    loop {
        let found = supervisor.step_attempt_of_job(job);
        if found.is_some()
            || matches!(caller, Caller::Local(_))
            || tokio::time::Instant::now() >= deadline
        {
            return found;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// A login node's command holds job `job`'s allocation, on its batch host,
/// until it releases it, goes away, or the attempt ends here (then it is told).
async fn attach<R, W>(
    job: JobId,
    mut reader: R,
    mut writer: W,
    caller: &Caller,
    service: &StepService,
) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let supervisor = &service.supervisor;
    let node = supervisor.node().to_string();
    let Some((key, launch)) = running_attempt(supervisor, job, caller).await else {
        let refusal = format!("job {job} has no running attempt on {node}");
        write_frame(&mut writer, &StepEvent::Refused(refusal)).await?;
        return Ok(());
    };
    let spec = &launch.job.spec;
    let batch_host = launch
        .job
        .attempts
        .iter()
        .find(|a| a.number == key.1)
        .and_then(corral_state::job::Attempt::batch_host);
    let refusal = if !caller.may_use(&spec.user, spec.uid) {
        Some(format!(
            "{} may not hold job {job}, which belongs to {}",
            caller.describe(),
            spec.user
        ))
    } else if batch_host != Some(node.as_str()) {
        Some(format!(
            "job {job}'s allocation is held on its first node, not on {node}"
        ))
    } else if !launch.script.script.contains(ALLOCATION_HOLD_COMMAND) {
        Some(format!(
            "job {job} is a batch job, not an allocation of srun or salloc; run steps in it with srun --jobid={job}"
        ))
    } else {
        service
            .allocations
            .attach(key, |k| supervisor.step_attempt(k).is_some())
            .err()
    };
    if let Some(refusal) = refusal {
        write_frame(&mut writer, &StepEvent::Refused(refusal)).await?;
        return Ok(());
    }
    let environment = allocation_variables(supervisor, &launch, key.1);
    let attached = StepEvent::Attached {
        attempt: key.1,
        environment,
    };
    write_frame(&mut writer, &attached).await?;
    let went_away = || Release {
        code: 1,
        why: Some(format!(
            "the srun or salloc holding this allocation ({}) went away before its command ended",
            caller.describe()
        )),
    };
    let mut check = tokio::time::interval(HOLD_CHECK);
    let mut frames = Box::pin(async move { read_frame::<_, StepControl>(&mut reader).await });
    loop {
        tokio::select! {
            frame = &mut frames => {
                let release = match frame {
                    Ok(Some(StepControl::Release(code))) => Release { code, why: None },
                    _ => went_away(),
                };
                service.allocations.release(key, release);
                return Ok(());
            }
            _ = check.tick() => {
                if supervisor.step_attempt(key).is_none() {
                    let why = format!("job {job} attempt {} ended on {node}", key.1);
                    let ended = Release { code: 0, why: Some(why.clone()) };
                    service.allocations.release(key, ended);
                    write_frame(&mut writer, &StepEvent::Released(0, Some(why))).await?;
                    return Ok(());
                }
            }
        }
    }
}

/// The job-wide variables of the batch environment, for `salloc`'s command.
fn allocation_variables(
    supervisor: &Supervisor,
    launch: &Launch,
    attempt: corral_state::ids::AttemptNumber,
) -> std::collections::BTreeMap<String, String> {
    let job = &launch.job;
    let Some(attempt) = job.attempts.iter().find(|a| a.number == attempt) else {
        return Default::default();
    };
    let cluster_name = supervisor.cluster_name();
    let checkpoint_dir = supervisor.checkpoint_dir(job.id).display().to_string();
    let mut env = allocation_environment(&LaunchContext {
        job,
        attempt,
        node: supervisor.node(),
        cluster_name: &cluster_name,
        checkpoint_dir: &checkpoint_dir,
        base_env: &Default::default(),
        dispatched_by: launch.dispatched_by,
        topology: launch.topology.get(supervisor.node()),
    });
    // salloc sets it too.
    if let Some(value) = supervisor.working_cluster() {
        env.insert("SLURM_WORKING_CLUSTER".to_string(), value);
    }
    env
}

/// One `srun`: from its request to the step's end.
async fn step<R, W>(
    request: SrunRequest,
    mut reader: R,
    mut writer: W,
    caller: Caller,
    service: StepService,
) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin,
{
    let supervisor = service.supervisor.clone();
    let running = running_attempt(&supervisor, request.job, &caller).await;
    let (step, routes) = match plan(
        &supervisor,
        service.endpoint.as_ref(),
        &caller,
        running,
        &request,
    ) {
        Ok(planned) => planned,
        Err(reason) => {
            write_frame(&mut writer, &StepEvent::Refused(reason)).await?;
            return Ok(());
        }
    };
    write_frame(&mut writer, &StepEvent::Started(step.layout.clone())).await?;
    let key = (step.job, step.attempt);
    let record = StepOutcome::started(&supervisor, &step, &request);
    let (events_tx, mut events) = mpsc::channel(256);
    let mut controls: Vec<mpsc::Sender<Signal>> = Vec::new();
    // Only the shares with a task the input reaches get it.
    let mut inputs: Vec<mpsc::UnboundedSender<InputPiece>> = Vec::new();
    for (node, route) in step.layout.nodes.iter().zip(routes) {
        let (control_tx, control) = mpsc::channel(16);
        controls.push(control_tx);
        let (input_tx, input) = mpsc::unbounded_channel();
        if reads_input(&step, node) {
            inputs.push(input_tx);
        }
        let events = events_tx.clone();
        match route {
            Route::Here => {
                let share = run_node_share(
                    supervisor.clone(),
                    key,
                    step.clone(),
                    events,
                    control,
                    input,
                );
                tokio::spawn(share);
            }
            Route::Peer(endpoint, address) => {
                let share = run_remote_share(
                    endpoint,
                    node.clone(),
                    address,
                    step.clone(),
                    events,
                    control,
                    input,
                );
                tokio::spawn(share);
            }
        }
    }
    drop(events_tx);
    // srun's signals and input; its connection closing aborts the step. The
    // input is queued for the shares without waiting (each task's writer
    // bounds what waits for it), so a signal, or srun going away, is read
    // at once whatever the tasks do with their input.
    let (signals_tx, mut signals) = mpsc::channel::<Signal>(16);
    tokio::spawn(async move {
        loop {
            match read_frame(&mut reader).await {
                Ok(Some(StepControl::Signal(signal))) => {
                    if signals_tx.send(signal).await.is_err() {
                        return;
                    }
                }
                Ok(Some(StepControl::Stdin(piece))) => {
                    for input in &inputs {
                        let _ = input.send(InputPiece::Data(piece.clone()));
                    }
                }
                Ok(Some(StepControl::Resize(size))) => {
                    for input in &inputs {
                        let _ = input.send(InputPiece::Resize(size));
                    }
                }
                Ok(Some(StepControl::StdinEnd)) => {
                    for input in inputs.drain(..) {
                        let _ = input.send(InputPiece::End);
                    }
                }
                _ => return,
            }
        }
    });
    let mut open = step.layout.nodes.len();
    let mut srun_present = true;
    let mut outcome = record;
    while open > 0 {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { break };
                outcome.saw(&event);
                if matches!(event, StepEvent::Finished | StepEvent::NodeLost { .. }) {
                    open -= 1;
                }
                if matches!(event, StepEvent::NodeLost { .. }) {
                    // As Slurm does on a node failure: the step is aborted
                    // everywhere (ranks would otherwise wait on the lost ones).
                    controls.clear();
                }
                if matches!(event, StepEvent::Finished) {
                    continue;
                }
                if write_frame(&mut writer, &event).await.is_err() {
                    // srun is gone: dropping the controls aborts every share.
                    controls.clear();
                    outcome.saw_abort();
                    break;
                }
            }
            signal = signals.recv(), if srun_present => match signal {
                Some(signal) => {
                    // Never block here: a share may itself wait for this loop
                    // to take its output. A share 16 signals behind misses one.
                    for control in &controls {
                        let _ = control.try_send(signal);
                    }
                }
                None => {
                    srun_present = false;
                    controls.clear();
                }
            },
        }
    }
    outcome.ended(&supervisor);
    if srun_present {
        write_frame(&mut writer, &StepEvent::Finished).await?;
    }
    Ok(())
}

/// The most characters of a step's program name its record keeps.
const MAX_STEP_NAME_CHARS: usize = 256;

/// A step's record for the cluster (sacct's `N.S` row): its start reported
/// when it launches, its worst task's status when its last share ends.
struct StepOutcome {
    job: corral_state::JobId,
    attempt: corral_state::AttemptNumber,
    step: u32,
    worst: Option<ExitStatus>,
}

impl StepOutcome {
    /// Reports the step's start.
    fn started(supervisor: &Supervisor, step: &StepLaunch, request: &SrunRequest) -> StepOutcome {
        let name: String = request
            .argv
            .first()
            .map(|program| program.rsplit('/').next().unwrap_or(program))
            .unwrap_or_default()
            .chars()
            .take(MAX_STEP_NAME_CHARS)
            .collect();
        let per_task = request
            .shape
            .cpus_per_task
            .or_else(|| {
                supervisor
                    .step_attempt((step.job, step.attempt))
                    .map(|launch| launch.job.spec.cpus_per_task)
            })
            .unwrap_or(1);
        supervisor.report_step(AgentReport::StepStarted {
            job: step.job,
            attempt: step.attempt,
            step: step.layout.step,
            name,
            nodes: step.layout.nodes.clone(),
            ntasks: step.layout.ntasks(),
            cpus: step.layout.ntasks().saturating_mul(per_task),
        });
        StepOutcome {
            job: step.job,
            attempt: step.attempt,
            step: step.layout.step,
            worst: None,
        }
    }

    /// Keeps the worst status an event shows: a task killed by a signal over
    /// any exit code, else the highest code; a task that never started counts
    /// as exit code 2 and a lost node as 1, as srun counts them.
    fn saw(&mut self, event: &StepEvent) {
        let status = match event {
            StepEvent::TaskExited { status, .. } => *status,
            StepEvent::TaskFailed { .. } => ExitStatus {
                code: 2,
                signal: None,
            },
            StepEvent::NodeLost { .. } => ExitStatus {
                code: 1,
                signal: None,
            },
            _ => return,
        };
        let rank = |s: &ExitStatus| (s.signal.is_some(), s.code);
        if self.worst.is_none_or(|worst| rank(&status) > rank(&worst)) {
            self.worst = Some(status);
        }
    }

    /// The step is aborted without waiting for its tasks (srun went away):
    /// it ends as killed.
    fn saw_abort(&mut self) {
        self.worst = Some(ExitStatus {
            code: 0,
            signal: Some(Signal::KILL),
        });
    }

    /// Reports the step's end.
    fn ended(self, supervisor: &Supervisor) {
        supervisor.report_step(AgentReport::StepEnded {
            job: self.job,
            attempt: self.attempt,
            step: self.step,
            status: self.worst.unwrap_or(ExitStatus {
                code: 0,
                signal: None,
            }),
        });
    }
}

/// Whether the step's input reaches a task on `node`.
fn reads_input(step: &StepLaunch, node: &str) -> bool {
    step.layout
        .ranks_on(node)
        .is_some_and(|(ranks, _)| ranks.into_iter().any(|rank| step.input.reaches(rank)))
}

/// Where the other nodes' agents take steps: node → address.
type Peers = std::collections::BTreeMap<String, String>;

/// How a node's share of a step is run.
enum Route {
    /// By this agent.
    Here,
    /// By the agent at this address, reached through this endpoint.
    Peer(quinn::Endpoint, String),
}

/// The route to each of `nodes`, in order; a node this agent cannot reach
/// refuses the step before anything starts.
fn route(
    here: &str,
    endpoint: Option<&quinn::Endpoint>,
    nodes: &[String],
    peers: &Peers,
) -> Result<Vec<Route>, String> {
    nodes
        .iter()
        .map(|node| {
            if node == here {
                return Ok(Route::Here);
            }
            let endpoint = endpoint.ok_or_else(|| {
                format!(
                    "the agent of {here} serves no step channel (--step-listen), so it cannot reach {node}"
                )
            })?;
            let address = peers.get(node).ok_or_else(|| {
                format!("the agent of {node} registered no step address; start it with --step-listen")
            })?;
            Ok(Route::Peer(endpoint.clone(), address.clone()))
        })
        .collect()
}

/// Checks the caller, lays the step out and routes its shares; every refusal
/// says why.
fn plan(
    supervisor: &Supervisor,
    endpoint: Option<&quinn::Endpoint>,
    caller: &Caller,
    running: Option<(crate::supervisor::AttemptKey, Arc<Launch>)>,
    request: &SrunRequest,
) -> Result<(StepLaunch, Vec<Route>), String> {
    let node = supervisor.node();
    let (key, launch) = running.ok_or_else(|| match caller {
        Caller::Local(_) => format!(
            "job {} has no running attempt on {node}; srun runs inside a job's allocation, on one of its nodes",
            request.job
        ),
        Caller::Remote(_) => format!(
            "job {} has no running attempt on {node} (it ended, or has not started)",
            request.job
        ),
    })?;
    if let Some(attempt) = request.attempt
        && attempt != key.1
    {
        return Err(format!(
            "this srun belongs to attempt {attempt} of job {}, which has ended; attempt {} runs now",
            key.0, key.1
        ));
    }
    let job = &launch.job;
    if !caller.may_use(&job.spec.user, job.spec.uid) {
        return Err(format!(
            "{} may not start steps in job {}, which belongs to {} (uid {})",
            caller.describe(),
            job.id,
            job.spec.user,
            job.spec.uid
        ));
    }
    let attempt = job
        .attempts
        .iter()
        .find(|a| a.number == key.1)
        .ok_or_else(|| format!("job {} has no attempt {}", key.0, key.1))?;
    if request.argv.is_empty() {
        return Err("no command given: srun [OPTIONS] COMMAND [ARGS...]".into());
    }
    // Lay out and route before taking a step number.
    let mut layout = plan_step(job, attempt, &request.shape, 0).map_err(|e| e.to_string())?;
    let routes = route(node, endpoint, &layout.nodes, &launch.step_peers)?;
    layout.step = supervisor
        .next_step(key)
        .ok_or_else(|| format!("job {} is ending on {node}", key.0))?;
    let step = StepLaunch {
        job: key.0,
        attempt: key.1,
        layout,
        argv: request.argv.clone(),
        env: request.env.clone(),
        workdir: request.workdir.clone(),
        input: request.input,
        pty: request.pty,
        files: request.files.clone(),
    };
    Ok((step, routes))
}
