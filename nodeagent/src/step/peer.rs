//! The agent-to-agent step channel (QUIC, mutual TLS against the cluster CA,
//! agent certificates both ends): the coordinating agent opens one stream per
//! node's share, sends a [`StepControl::Launch`] and then any signals; the
//! other agent answers with the share's [`StepEvent`]s, ending with `Finished`
//! (or `Refused`). The stream closing before `Finished` aborts the share.
//!
//! Users' `srun` and `salloc` on login nodes open the same channel with their
//! own certificates for steps into their running jobs and for the hold on an
//! allocation ([`super::coordinator::handle`]); only agents send shares.
//!
//! Agents also ask each other here whether a leader reaches them
//! ([`StepControl::Reach`], see [`crate::outage`]).
//!
//! A launch is accepted only from the agent of a node of the same attempt's
//! allocation, and only for the attempt that runs here now: a step of a
//! requeued attempt cannot start on its old nodes (fencing).

use std::net::SocketAddr;
use std::time::Duration;

use corral_pki::{Identity, Role, identity_of_connection};
use corral_proto::agent::{read_frame, write_frame};
use corral_proto::step::{StepControl, StepEvent, StepLaunch};
use corral_state::slurm::signal::Signal;
use tokio::sync::mpsc;

use super::coordinator::{Caller, StepService, handle};
use super::tasks::{InputPiece, run_node_share};
use crate::supervisor::Supervisor;

/// How long a step launch waits for this node's own launch of the attempt.
const LAUNCH_PATIENCE: Duration = Duration::from_secs(30);

/// How long a user's stream may take to send its request.
const FIRST_FRAME_PATIENCE: Duration = Duration::from_secs(10);

/// How long connecting to another node's agent may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Accepts step launches from other agents, and steps and allocation holds
/// from users' `srun` and `salloc` on login nodes, until the endpoint closes.
pub async fn serve(endpoint: quinn::Endpoint, service: StepService) {
    while let Some(incoming) = endpoint.accept().await {
        let service = service.clone();
        tokio::spawn(async move {
            let connection = match incoming.await {
                Ok(connection) => connection,
                Err(e) => {
                    tracing::debug!("step connection failed: {e}");
                    return;
                }
            };
            let identity = match identity_of_connection(&connection) {
                Ok(identity) => identity,
                Err(e) => {
                    tracing::warn!("refused a step connection: {e}");
                    connection.close(1u32.into(), b"no identity");
                    return;
                }
            };
            while let Ok((send, recv)) = connection.accept_bi().await {
                let service = service.clone();
                let identity = identity.clone();
                match identity.role {
                    Role::Agent => {
                        tokio::spawn(serve_share(service, identity.name, send, recv));
                    }
                    Role::User | Role::Operator | Role::Admin => {
                        tokio::spawn(serve_user(service, identity, send, recv));
                    }
                    Role::Controller => {
                        tracing::warn!(%identity, "refused a step stream: controllers send none");
                        connection.close(1u32.into(), b"not a step client");
                        return;
                    }
                }
            }
        });
    }
}

/// A request from a user's `srun` or `salloc` elsewhere: a step, or the hold
/// on an allocation (never a share: those come from agents only).
async fn serve_user(
    service: StepService,
    identity: Identity,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) {
    let first = match tokio::time::timeout(FIRST_FRAME_PATIENCE, read_frame(&mut recv)).await {
        Err(_) => {
            tracing::debug!(%identity, "a step stream sent no request in time");
            return;
        }
        Ok(read) => read,
    };
    let first = match first {
        Ok(Some(StepControl::Launch(_))) => {
            tracing::warn!(%identity, "refused a step share: not an agent");
            let refusal = StepEvent::Refused("only agents send step shares".into());
            let _ = write_frame(&mut send, &refusal).await;
            let _ = send.finish();
            return;
        }
        Ok(first) => first,
        Err(e) => {
            tracing::debug!(%identity, "reading a step request: {e}");
            return;
        }
    };
    let caller = Caller::Remote(identity);
    if let Err(e) = handle(first, recv, &mut send, caller, service).await {
        tracing::debug!("step request from a login node: {e}");
    }
    let _ = send.finish();
    let _ = tokio::time::timeout(Duration::from_secs(1), send.stopped()).await;
}

/// One share asked for by the agent of node `from`, or its question whether
/// this node reaches a leader (see [`crate::outage`]).
async fn serve_share(
    service: StepService,
    from: String,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) {
    let supervisor = service.supervisor;
    let launch = match read_frame::<_, StepControl>(&mut recv).await {
        Ok(Some(StepControl::Launch(launch))) => *launch,
        Ok(Some(StepControl::Reach)) => {
            let _ = write_frame(&mut send, &service.standing.answer()).await;
            let _ = send.finish();
            return;
        }
        Ok(_) => {
            let refusal = StepEvent::Refused("the first message was not a step launch".into());
            let _ = write_frame(&mut send, &refusal).await;
            return;
        }
        Err(e) => {
            tracing::debug!(%from, "reading a step launch: {e}");
            return;
        }
    };
    let key = (launch.job, launch.attempt);
    let admitted = match launch.layout.check() {
        Ok(()) => admit_when_launched(&supervisor, &from, &launch).await,
        Err(reason) => Err(reason),
    };
    if let Err(reason) = admitted {
        tracing::warn!(%from, job = %key.0, "refused a step: {reason}");
        let _ = write_frame(&mut send, &StepEvent::Refused(reason)).await;
        let _ = send.finish();
        return;
    }
    let (events_tx, mut events) = mpsc::channel(256);
    let (control_tx, control) = mpsc::channel(16);
    let (input_tx, input) = mpsc::unbounded_channel();
    // The coordinator's signals and input; the stream ending before the share
    // does aborts it.
    tokio::spawn(async move {
        loop {
            match read_frame(&mut recv).await {
                Ok(Some(StepControl::Signal(signal))) => {
                    if control_tx.send(signal).await.is_err() {
                        return;
                    }
                }
                Ok(Some(StepControl::Stdin(piece))) => {
                    let _ = input_tx.send(InputPiece::Data(piece));
                }
                Ok(Some(StepControl::StdinEnd)) => {
                    let _ = input_tx.send(InputPiece::End);
                }
                Ok(Some(StepControl::Resize(size))) => {
                    let _ = input_tx.send(InputPiece::Resize(size));
                }
                _ => return,
            }
        }
    });
    tokio::spawn(run_node_share(
        supervisor, key, launch, events_tx, control, input,
    ));
    while let Some(event) = events.recv().await {
        let last = matches!(event, StepEvent::Finished | StepEvent::NodeLost { .. });
        if write_frame(&mut send, &event).await.is_err() || last {
            break;
        }
    }
    let _ = send.finish();
    let _ = tokio::time::timeout(Duration::from_secs(1), send.stopped()).await;
}

/// Waits (up to [`LAUNCH_PATIENCE`]) for this node to hear of the attempt
/// from the leader (the batch host may start its script, and its first `srun`,
/// before this node's launch arrives), then decides as [`admit`] does. A newer
/// attempt of the job here refuses at once.
async fn admit_when_launched(
    supervisor: &Supervisor,
    from: &str,
    launch: &StepLaunch,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + LAUNCH_PATIENCE;
    let mut pause = Duration::from_millis(5);
    loop {
        let newer = supervisor
            .step_attempt_of_job(launch.job)
            .is_some_and(|(key, _)| key.1 > launch.attempt);
        let known = supervisor
            .step_attempt((launch.job, launch.attempt))
            .is_some();
        if known || newer || tokio::time::Instant::now() >= deadline {
            return admit(supervisor, from, launch);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// Whether the agent of `from` may start `launch` here.
fn admit(supervisor: &Supervisor, from: &str, launch: &StepLaunch) -> Result<(), String> {
    let node = supervisor.node();
    let running = supervisor
        .step_attempt((launch.job, launch.attempt))
        .ok_or_else(|| {
            format!(
                "job {} attempt {} does not run on {node} (it ended, was requeued, or has not started here yet)",
                launch.job, launch.attempt
            )
        })?;
    let in_allocation = running
        .job
        .attempts
        .iter()
        .find(|a| a.number == launch.attempt)
        .is_some_and(|a| a.allocation.iter().any(|n| n.node == from));
    if !in_allocation {
        return Err(format!(
            "node '{from}' is not part of job {}'s allocation",
            launch.job
        ));
    }
    Ok(())
}

/// Runs `node`'s share of a step through its agent at `address`, forwarding
/// its events to `events` (ending with `Finished`, or `NodeLost` when the
/// agent cannot be reached, refuses, or goes away) and `control`'s signals to
/// it. Closing `control` aborts the share there.
pub async fn run_remote_share(
    endpoint: quinn::Endpoint,
    node: String,
    address: String,
    launch: StepLaunch,
    events: mpsc::Sender<StepEvent>,
    control: mpsc::Receiver<Signal>,
    input: mpsc::UnboundedReceiver<InputPiece>,
) {
    let share = remote_share(&endpoint, &node, &address, launch, &events, control, input);
    if let Err(message) = share.await {
        let _ = events.send(StepEvent::NodeLost { node, message }).await;
    }
}

async fn remote_share(
    endpoint: &quinn::Endpoint,
    node: &str,
    address: &str,
    launch: StepLaunch,
    events: &mpsc::Sender<StepEvent>,
    mut control: mpsc::Receiver<Signal>,
    mut input: mpsc::UnboundedReceiver<InputPiece>,
) -> Result<(), String> {
    let Some(connection) = connect_patiently(endpoint, node, address, &mut control).await? else {
        return Err(format!(
            "the step ended before the agent of {node} at {address} answered"
        ));
    };
    let (mut send, mut recv) = connection
        .open_bi()
        .await
        .map_err(|e| format!("the agent of {node}: {e}"))?;
    write_frame(&mut send, &StepControl::Launch(Box::new(launch)))
        .await
        .map_err(|e| format!("the agent of {node}: {e}"))?;
    // Signals go out on the same stream; the control channel closing (srun
    // went away) closes the connection, which aborts the share there.
    let closer = connection.clone();
    let forwarder = tokio::spawn(async move {
        let mut input_open = true;
        loop {
            let frame = tokio::select! {
                biased;
                signal = control.recv() => match signal {
                    Some(signal) => StepControl::Signal(signal),
                    None => break,
                },
                piece = input.recv(), if input_open => match piece {
                    Some(InputPiece::Data(piece)) => StepControl::Stdin(piece),
                    Some(InputPiece::Resize(size)) => StepControl::Resize(size),
                    Some(InputPiece::End) | None => {
                        input_open = false;
                        StepControl::StdinEnd
                    }
                },
            };
            if write_frame(&mut send, &frame).await.is_err() {
                return;
            }
        }
        closer.close(0u32.into(), b"step aborted");
    });
    let result = loop {
        match read_frame::<_, StepEvent>(&mut recv).await {
            Ok(Some(StepEvent::Finished)) => {
                let _ = events.send(StepEvent::Finished).await;
                break Ok(());
            }
            Ok(Some(StepEvent::Refused(reason))) => break Err(format!("{node} refused: {reason}")),
            Ok(Some(lost @ StepEvent::NodeLost { .. })) => {
                // Terminal: the share there is over.
                let _ = events.send(lost).await;
                break Ok(());
            }
            Ok(Some(event)) => {
                if events.send(event).await.is_err() {
                    break Ok(());
                }
            }
            Ok(None) => {
                break Err(format!(
                    "the agent of {node} ended the step before its tasks did"
                ));
            }
            Err(e) => break Err(format!("lost the agent of {node}: {e}")),
        }
    };
    forwarder.abort();
    connection.close(0u32.into(), b"done");
    result
}

/// Connects to `node`'s agent at `address`, trying again for as long as it
/// does not answer: a node whose agent is gone (dead, restarting, cut off) is
/// the controllers' to judge, as slurmd's absence is slurmctld's. If they
/// declare the node down, the job fails over and this step is killed with the
/// rest of the attempt (the step's control channel closes, and the wait with
/// it); if the agent comes back, the share starts there. `None`: the step
/// ended (or was signalled) first.
async fn connect_patiently(
    endpoint: &quinn::Endpoint,
    node: &str,
    address: &str,
    control: &mut mpsc::Receiver<Signal>,
) -> Result<Option<quinn::Connection>, String> {
    // An address that does not resolve is a mistake, not an absence: it fails now.
    let target = resolve(address).await?;
    let mut tries = 0u32;
    loop {
        let attempt = async {
            let connecting = endpoint
                .connect(target, node)
                .map_err(|e| format!("cannot reach the agent of {node} at {address}: {e}"))?;
            tokio::time::timeout(CONNECT_TIMEOUT, connecting)
                .await
                .map_err(|_| format!("the agent of {node} at {address} did not answer within 5 s"))?
                .map_err(|e| format!("cannot reach the agent of {node} at {address}: {e}"))
        };
        let failed = tokio::select! {
            connected = attempt => match connected {
                Ok(connection) => return Ok(Some(connection)),
                Err(e) => e,
            },
            // The step ended or was signalled before the share began.
            _ = control.recv() => return Ok(None),
        };
        if tries == 0 {
            tracing::warn!(%node, %address, "{failed}; the step waits for it, or for the controllers to declare the node down");
        }
        tries = tries.saturating_add(1);
        let pause = Duration::from_millis(250u64 << tries.min(3));
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            _ = control.recv() => return Ok(None),
        }
    }
}

pub(crate) async fn resolve(address: &str) -> Result<SocketAddr, String> {
    tokio::net::lookup_host(address)
        .await
        .map_err(|e| format!("cannot resolve step address {address}: {e}"))?
        .next()
        .ok_or_else(|| format!("step address {address} resolves to nothing"))
}
