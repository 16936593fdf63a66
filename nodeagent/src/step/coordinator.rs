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

use corral_proto::agent::{read_frame, write_frame};
use corral_proto::step::{SrunRequest, StepControl, StepEvent, StepLaunch};
use corral_state::slurm::signal::Signal;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;

use super::peer::run_remote_share;
use super::shape::plan_step;
use super::tasks::run_node_share;
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

/// Accepts `srun` connections until the listener fails. `endpoint` reaches the
/// other nodes' agents (`None`: this agent runs single-node steps only).
pub async fn serve(
    listener: UnixListener,
    supervisor: Supervisor,
    endpoint: Option<quinn::Endpoint>,
) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let (supervisor, endpoint) = (supervisor.clone(), endpoint.clone());
                tokio::spawn(async move {
                    if let Err(e) = coordinate(stream, supervisor, endpoint).await {
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

/// One `srun`: from its request to the step's end.
async fn coordinate(
    stream: UnixStream,
    supervisor: Supervisor,
    endpoint: Option<quinn::Endpoint>,
) -> anyhow::Result<()> {
    let caller = stream.peer_cred()?.uid();
    let (mut reader, mut writer) = stream.into_split();
    let request = match read_frame::<_, StepControl>(&mut reader).await? {
        Some(StepControl::Run(request)) => *request,
        Some(StepControl::Checkpoint {
            job,
            attempt,
            step,
            path,
        }) => {
            let answer = match supervisor.record_checkpoint((job, attempt), caller, step, path) {
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
            };
            write_frame(&mut writer, &answer).await?;
            return Ok(());
        }
        _ => {
            let refusal = StepEvent::Refused("the first message was not a step request".into());
            write_frame(&mut writer, &refusal).await?;
            return Ok(());
        }
    };
    let (step, routes) = match plan(&supervisor, endpoint.as_ref(), caller, &request) {
        Ok(planned) => planned,
        Err(reason) => {
            write_frame(&mut writer, &StepEvent::Refused(reason)).await?;
            return Ok(());
        }
    };
    write_frame(&mut writer, &StepEvent::Started(step.layout.clone())).await?;
    let key = (step.job, step.attempt);
    let (events_tx, mut events) = mpsc::channel(256);
    let mut controls: Vec<mpsc::Sender<Signal>> = Vec::new();
    for (node, route) in step.layout.nodes.iter().zip(routes) {
        let (control_tx, control) = mpsc::channel(16);
        controls.push(control_tx);
        let events = events_tx.clone();
        match route {
            Route::Here => {
                let share = run_node_share(supervisor.clone(), key, step.clone(), events, control);
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
                );
                tokio::spawn(share);
            }
        }
    }
    drop(events_tx);
    // srun's signals; its connection closing aborts the step.
    let (signals_tx, mut signals) = mpsc::channel::<Signal>(16);
    tokio::spawn(async move {
        while let Ok(Some(StepControl::Signal(signal))) = read_frame(&mut reader).await {
            if signals_tx.send(signal).await.is_err() {
                return;
            }
        }
    });
    let mut open = step.layout.nodes.len();
    let mut srun_present = true;
    while open > 0 {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { break };
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
    if srun_present {
        write_frame(&mut writer, &StepEvent::Finished).await?;
    }
    Ok(())
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
    caller: u32,
    request: &SrunRequest,
) -> Result<(StepLaunch, Vec<Route>), String> {
    let node = supervisor.node();
    let (key, launch) = supervisor.step_attempt_of_job(request.job).ok_or_else(|| {
        format!(
            "job {} has no running attempt on {node}; srun runs inside a job's allocation, on one of its nodes",
            request.job
        )
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
    let own = nix::unistd::geteuid().as_raw();
    if caller != 0 && caller != own && caller != job.spec.uid {
        return Err(format!(
            "uid {caller} may not start steps in job {}, which belongs to {} (uid {})",
            job.id, job.spec.user, job.spec.uid
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
    };
    Ok((step, routes))
}
