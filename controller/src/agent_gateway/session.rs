//! One agent's connection to the leader: check who it is, register its node
//! through Raft, then heartbeats (acknowledged: they renew the agent's lease),
//! reports (proposed, acknowledged once committed or refused as stale), the
//! instructions reconciliation derives from committed state, and the messages
//! the client API relays through the registry (`scancel --signal`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use corral_consensus::{ProposeError, Replica};
use corral_pki::{Identity, Role};
use corral_proto::agent::{
    AgentMessage, AgentReport, ControllerMessage, Launch, read_frame, write_frame,
};
use corral_state::Outcome;
use corral_state::ids::AttemptNumber;
use corral_state::job::{Job, JobState};
use corral_state::rejection::Rejection;
use corral_state::{ClusterState, Command};
use tokio::sync::{Notify, mpsc, watch};

use super::liveness::{Heartbeats, LeaderConfirmation, PendingAcks, acknowledgeable};
use super::reconcile::{Instruction, SessionMemory, reconcile};
use super::registry::{AgentSessions, Relay};
use crate::clock;

/// What sessions share.
pub struct SessionContext {
    /// This controller's replica.
    pub replica: Arc<Replica>,
    /// `SLURM_CLUSTER_NAME`.
    pub cluster_name: String,
    /// Agent heartbeat period.
    pub heartbeat_ms: u64,
    /// Agent lease.
    pub lease_ms: u64,
    /// Between SIGTERM and SIGKILL when ending an attempt (`leader.kill_wait`,
    /// Slurm's KillWait).
    pub kill_grace_ms: u64,
    /// Liveness table.
    pub heartbeats: Heartbeats,
    /// Quorum confirmations of this replica's leadership: heartbeats are
    /// acknowledged (renewing leases) only after one.
    pub confirmation: LeaderConfirmation,
    /// Wakes the scheduler when a report frees resources.
    pub wake_scheduler: Arc<Notify>,
    /// Turns true when the controller stops.
    pub stopping: watch::Receiver<bool>,
    /// Notified when a session committed something that may give other nodes
    /// work (a GPU failure ends a gang: its other nodes must be told at once).
    pub committed: Arc<Notify>,
    /// The sessions by node, through which the client API reaches agents.
    pub agents: AgentSessions,
}

/// How often a session reconciles its node against committed state.
const RECONCILE_EVERY: Duration = Duration::from_millis(100);

/// Serves one connection until it ends, leadership moves, or the controller stops.
pub async fn serve(ctx: Arc<SessionContext>, connection: quinn::Connection) {
    let identity = match corral_pki::identity_of_connection(&connection) {
        Ok(identity) => identity,
        Err(e) => {
            tracing::warn!(remote = %connection.remote_address(), "agent without a usable certificate: {e}");
            connection.close(1u32.into(), b"no identity");
            return;
        }
    };
    let (mut send, recv) = match connection.accept_bi().await {
        Ok(streams) => streams,
        Err(e) => {
            tracing::debug!(%identity, "agent connection ended before its stream: {e}");
            return;
        }
    };
    let result = run(&ctx, &identity, &mut send, recv).await;
    if let Err(reason) = result {
        tracing::info!(%identity, "agent session ended: {reason}");
    }
    let _ = send.finish();
    // Give the last frame a moment to leave before the connection closes.
    let _ = tokio::time::timeout(Duration::from_secs(1), send.stopped()).await;
    connection.close(0u32.into(), b"bye");
}

async fn run(
    ctx: &SessionContext,
    identity: &Identity,
    send: &mut quinn::SendStream,
    mut recv: quinn::RecvStream,
) -> Result<(), String> {
    let hello: Option<AgentMessage> = read_frame(&mut recv).await.map_err(|e| e.to_string())?;
    let Some(AgentMessage::Hello {
        node,
        boot_id,
        version,
        resources,
        running,
        step_address,
    }) = hello
    else {
        return Err("the first message was not a hello".into());
    };
    let refuse = |reason: String| ControllerMessage::Refused { reason };
    if identity.role != Role::Agent || identity.name != node {
        let reason = format!(
            "the certificate names {identity}, not the agent of node '{node}'; mint one with `corral certs DIR --agents {node}`"
        );
        write(send, &refuse(reason.clone())).await?;
        return Err(reason);
    }
    let leadership = ctx.replica.leadership().borrow().clone();
    if !leadership.is_self {
        let leader = leadership.leader.map(|(_, addr)| addr.api);
        write(send, &ControllerMessage::NotLeader { leader }).await?;
        return Ok(());
    }
    let defined = ctx
        .replica
        .read_local(|s| s.nodes().contains_key(&node))
        .unwrap_or(false);
    if !defined {
        let reason = format!(
            "node '{node}' is not defined in this cluster; an administrator adds it with `corral admin node define`"
        );
        write(send, &refuse(reason.clone())).await?;
        return Err(reason);
    }
    let register = Command::RegisterNode {
        node: node.clone(),
        cpus: resources.cpus,
        memory_mb: resources.memory_mb,
        gpus: resources.gpus.clone(),
        running: running.clone(),
        agent_version: version,
        boot_id,
        step_address,
        at: clock::now(),
    };
    match ctx.replica.propose(register).await {
        Ok(Ok(_)) => {}
        Ok(Err(rejection)) => {
            let reason = format!("registration refused: {rejection}");
            write(send, &refuse(reason.clone())).await?;
            return Err(reason);
        }
        Err(e) => return Err(format!("registration not committed: {e}")),
    }
    ctx.heartbeats.beat(&node);
    ctx.wake_scheduler.notify_one();
    write(
        send,
        &ControllerMessage::Welcome {
            heartbeat_ms: ctx.heartbeat_ms,
            lease_ms: ctx.lease_ms,
            cluster_name: ctx.cluster_name.clone(),
        },
    )
    .await?;
    tracing::info!(%node, "agent registered");
    // Held for the session's life: dropping it leaves the registry.
    let (_registration, mut relays) = ctx.agents.register(&node);
    let mut relays_open = true;

    let mut memory = SessionMemory {
        running: running.into_iter().collect(),
        ..SessionMemory::default()
    };
    let (frames_tx, mut frames) = mpsc::channel::<AgentMessage>(256);
    let reader = {
        // Frames are read by their own task: reading is not cancel-safe.
        tokio::spawn(async move {
            while let Ok(Some(message)) = read_frame::<_, AgentMessage>(&mut recv).await {
                if frames_tx.send(message).await.is_err() {
                    break;
                }
            }
        })
    };
    let mut leadership = ctx.replica.leadership();
    let mut stopping = ctx.stopping.clone();
    let mut confirmed = ctx.confirmation.subscribe();
    let mut pending_acks = PendingAcks::new();
    let mut ticks = tokio::time::interval(RECONCILE_EVERY);
    let outcome = loop {
        tokio::select! {
            message = frames.recv() => {
                let Some(message) = message else { break Err("the agent hung up".to_string()) };
                if let AgentMessage::Heartbeat { seq, running, .. } = message {
                    ctx.heartbeats.beat(&node);
                    memory.running = running.into_iter().collect();
                    pending_acks.push_back((seq, tokio::time::Instant::now()));
                } else if let Err(e) = handle(ctx, &node, message, send).await {
                    break Err(e);
                }
            }
            changed = confirmed.changed() => {
                if changed.is_err() {
                    break Ok(());
                }
                let at = *confirmed.borrow_and_update();
                if let Err(e) = acknowledge(&mut pending_acks, at, send).await {
                    break Err(e);
                }
            }
            relay = relays.recv(), if relays_open => {
                let Some(Relay { message, written }) = relay else {
                    // Replaced by a newer session of this node.
                    relays_open = false;
                    continue;
                };
                let result = write(send, &message).await;
                let _ = written.send(result.clone());
                if let Err(e) = result {
                    break Err(e);
                }
            }
            _ = ticks.tick() => {
                if let Err(e) = instruct(ctx, &node, &mut memory, send).await {
                    break Err(e);
                }
            }
            () = ctx.committed.notified() => {
                if let Err(e) = instruct(ctx, &node, &mut memory, send).await {
                    break Err(e);
                }
            }
            changed = leadership.changed() => {
                if changed.is_err() || !leadership.borrow().is_self {
                    let leader = leadership.borrow().leader.clone().map(|(_, addr)| addr.api);
                    let _ = write(send, &ControllerMessage::NotLeader { leader }).await;
                    break Ok(());
                }
            }
            _ = stopping.changed() => break Ok(()),
        }
    };
    reader.abort();
    outcome
}

/// Acknowledges the heartbeats received before the quorum confirmation that
/// began at `confirmed`: each renews the agent's lease from when it was sent.
async fn acknowledge(
    pending: &mut PendingAcks,
    confirmed: Option<tokio::time::Instant>,
    send: &mut quinn::SendStream,
) -> Result<(), String> {
    for seq in acknowledgeable(pending, confirmed) {
        write(send, &ControllerMessage::HeartbeatAck { seq }).await?;
    }
    Ok(())
}

async fn handle(
    ctx: &SessionContext,
    node: &str,
    message: AgentMessage,
    send: &mut quinn::SendStream,
) -> Result<(), String> {
    ctx.heartbeats.beat(node);
    match message {
        AgentMessage::Hello { .. } => Err("a second hello on one connection".into()),
        // Heartbeats wait for a quorum confirmation (see `run`).
        AgentMessage::Heartbeat { .. } => Ok(()),
        AgentMessage::Report { id, report } => {
            let commands = commands_for(node, report);
            if commands.is_empty() {
                return write(send, &ControllerMessage::ReportDone { id }).await;
            }
            let answer = report_answer(node, id, ctx.replica.propose_all(commands).await)?;
            ctx.wake_scheduler.notify_one();
            ctx.committed.notify_waiters();
            write(send, &answer).await
        }
    }
}

/// The answer to report `id` once its proposal has an outcome: `ReportDone` when
/// it was committed (or refused: stale, or too large ever to commit), or the end
/// of the session when it may not have been committed. The agent resends a
/// report only on a new connection, so an unacknowledged report must end this one.
fn report_answer(node: &str, id: u64, proposed: Results) -> Result<ControllerMessage, String> {
    match proposed {
        Ok(results) => {
            for rejection in results.iter().filter_map(|r| r.as_ref().err()) {
                tracing::debug!(%node, "agent report refused: {rejection}");
            }
            Ok(ControllerMessage::ReportDone { id })
        }
        Err(ProposeError::NotLeader { .. }) => Err("leadership moved".into()),
        Err(e @ (ProposeError::TooLarge { .. } | ProposeError::Unencodable(_))) => {
            tracing::warn!(%node, "agent report dropped: {e}");
            Ok(ControllerMessage::ReportDone { id })
        }
        Err(e) => Err(format!(
            "agent report {id} not committed ({e}); the agent resends it on its next connection"
        )),
    }
}

/// The commands that record a report (one entry, so they commit together).
fn commands_for(node: &str, report: AgentReport) -> Vec<Command> {
    let at = clock::now();
    if let AgentReport::XidKilled {
        gpu,
        xid,
        attempts,
        reason,
    } = &report
    {
        tracing::warn!(%node, gpu, xid, ?attempts, "application XID, GPU kept in service: {reason}");
        // One per attempt the agent killed; the state machine refuses those that
        // are no longer the jobs' running attempts.
        return attempts
            .iter()
            .map(|(job, attempt)| Command::ApplicationXid {
                job: *job,
                attempt: *attempt,
                node: node.to_string(),
                gpu: *gpu,
                xid: *xid,
                at,
            })
            .collect();
    }
    let node = node.to_string();
    let drain = match &report {
        AgentReport::GpuFailed {
            drain_node: true,
            reason,
            ..
        } => Some(Command::DrainNode {
            node: node.clone(),
            reason: reason.clone(),
            by: super::liveness::leader_actor(),
            at,
        }),
        _ => None,
    };
    let mut commands: Vec<Command> = command_for(node, report, at).into_iter().collect();
    commands.extend(drain);
    commands
}

fn command_for(
    node: String,
    report: AgentReport,
    at: corral_state::time::Timestamp,
) -> Option<Command> {
    Some(match report {
        AgentReport::Started { job, attempt } => Command::AttemptStarted {
            job,
            attempt,
            node,
            at,
        },
        AgentReport::BatchExited {
            job,
            attempt,
            status,
        } => Command::BatchExited {
            job,
            attempt,
            node,
            status,
            at,
        },
        AgentReport::Released { job, attempt } => Command::NodeReleased {
            job,
            attempt,
            node,
            at,
        },
        AgentReport::Checkpoint {
            job,
            attempt,
            step,
            path,
        } => Command::ReportCheckpoint {
            job,
            attempt,
            node,
            step,
            path,
            at,
        },
        AgentReport::XidKilled { .. } => return None,
        AgentReport::GpuFailed {
            gpu, xid, reason, ..
        } => Command::GpuFailed {
            node,
            gpu,
            xid,
            reason,
            at,
        },
    })
}

/// Sends what reconciliation says the agent needs now.
async fn instruct(
    ctx: &SessionContext,
    node: &str,
    memory: &mut SessionMemory,
    send: &mut quinn::SendStream,
) -> Result<(), String> {
    let now = clock::now();
    let work = ctx
        .replica
        .read_local(|state| {
            reconcile(state, node, memory, now)
                .into_iter()
                .map(|instruction| {
                    let message = message_for(state, &instruction, ctx.kill_grace_ms);
                    (instruction, message)
                })
                .collect::<Vec<_>>()
        })
        .map_err(|e| e.to_string())?;
    for (instruction, message) in work {
        if let Some(message) = message {
            write(send, &message).await?;
        }
        memory.sent(&instruction);
    }
    Ok(())
}

fn message_for(
    state: &corral_state::ClusterState,
    instruction: &Instruction,
    kill_grace_ms: u64,
) -> Option<ControllerMessage> {
    match instruction {
        Instruction::Launch((job, attempt)) => {
            let record: &Job = state.job(*job)?;
            if record.state != JobState::Running {
                return None;
            }
            let script = state.script_of(record)?.clone();
            let step_peers = step_peers(state, record, *attempt);
            Some(ControllerMessage::Launch(Box::new(Launch {
                job: record.clone(),
                attempt: *attempt,
                script,
                step_peers,
            })))
        }
        Instruction::Signal((job, attempt), signal, scope) => Some(ControllerMessage::Signal {
            job: *job,
            attempt: *attempt,
            signal: *signal,
            scope: *scope,
        }),
        Instruction::Kill((job, attempt), signal) => Some(ControllerMessage::Kill {
            job: *job,
            attempt: *attempt,
            signal: *signal,
            grace_ms: kill_grace_ms,
        }),
    }
}

/// Where the agents of an attempt's nodes accept job steps, from their
/// registrations (a node whose agent gave no address is left out; a step that
/// needs it fails on that node with a message saying so).
fn step_peers(state: &ClusterState, job: &Job, attempt: AttemptNumber) -> BTreeMap<String, String> {
    let Some(record) = job.attempts.iter().find(|a| a.number == attempt) else {
        return BTreeMap::new();
    };
    record
        .allocation
        .iter()
        .filter_map(|a| {
            let registration = state.nodes().get(&a.node)?.registration.as_ref()?;
            let address = registration.step_address.clone()?;
            Some((a.node.clone(), address))
        })
        .collect()
}

async fn write(send: &mut quinn::SendStream, message: &ControllerMessage) -> Result<(), String> {
    write_frame(send, message).await.map_err(|e| e.to_string())
}

/// What a proposal of a report's commands came back with.
type Results = Result<Vec<Result<Outcome, Rejection>>, ProposeError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_acknowledged_only_once_committed_or_refused() {
        let done = Ok(ControllerMessage::ReportDone { id: 7 });
        assert_eq!(report_answer("n1", 7, Ok(vec![Ok(Outcome::Done)])), done);
        let stale = Rejection::StaleAttempt {
            job: corral_state::ids::JobId(1),
            got: 1,
            live: Some(2),
        };
        assert_eq!(report_answer("n1", 7, Ok(vec![Err(stale)])), done);
        assert_eq!(
            report_answer("n1", 7, Err(ProposeError::TooLarge { bytes: 10, max: 1 })),
            done
        );
        // Maybe not committed: no acknowledgement, and the session ends so that
        // the agent resends the report (it resends only on a new connection).
        for failure in [
            ProposeError::Timeout(5_000),
            ProposeError::Lost("gone".into()),
            ProposeError::Unavailable("stopping".into()),
            ProposeError::NotLeader { leader: None },
        ] {
            assert!(report_answer("n1", 7, Err(failure)).is_err());
        }
    }

    #[test]
    fn an_application_xid_ends_each_attempt_it_killed_with_its_own_cause() {
        use corral_state::ids::JobId;
        let report = AgentReport::XidKilled {
            gpu: 2,
            xid: 31,
            attempts: vec![(JobId(4), 1), (JobId(9), 3)],
            reason: "XID 31: MMU fault".into(),
        };
        let commands = commands_for("n1", report);
        assert_eq!(commands.len(), 2);
        let Command::ApplicationXid {
            job,
            attempt,
            node,
            gpu,
            xid,
            ..
        } = &commands[1]
        else {
            panic!("not an application XID: {:?}", commands[1]);
        };
        assert_eq!(
            (*job, *attempt, node.as_str(), *gpu, *xid),
            (JobId(9), 3, "n1", 2, 31)
        );
    }
}
