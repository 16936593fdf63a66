//! One agent's connection to the leader: check who it is, register its node
//! through Raft, then heartbeats (acknowledged: they renew the agent's lease),
//! reports (proposed in order by a task of their own, see `reports`;
//! acknowledged once committed or refused as stale), the instructions
//! reconciliation derives from committed state, and the messages the client
//! API relays through the registry (`scancel --signal`). Nothing in the loop
//! waits for Raft, so heartbeats are acknowledged while reports commit.
//!
//! A leader that cannot confirm it still leads (no quorum has answered it for
//! a while: it may be cut off) says it knows no leader, so the agent goes to
//! the others instead of waiting here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use corral_consensus::Replica;
use corral_pki::{Identity, Role};
use corral_proto::agent::{
    AgentHello, AgentMessage, AgentWelcome, ControllerMessage, FrameError, Launch,
    read_frame_limited, write_frame,
};
use corral_proto::agent_protocol;
use corral_state::ids::AttemptNumber;
use corral_state::job::{Job, JobState};
use corral_state::node_liveness::NodeLiveness;
use corral_state::{ClusterState, Command};
use tokio::sync::{Notify, mpsc, watch};

use super::liveness::{Heartbeats, LeaderConfirmation, PendingAcks, acknowledgeable};
use super::node_majority::Echo;
use super::reconcile::{Instruction, SessionMemory, lost_attempts, reconcile};
use super::registry::{AgentSessions, Relay};
use super::reports::propose_in_order;
use crate::clock;

/// What sessions share.
pub struct SessionContext {
    /// This controller's replica.
    pub replica: Arc<Replica>,
    /// `SLURM_CLUSTER_NAME`.
    pub cluster_name: String,
    /// This controller's file's heartbeat, lease and margin: used only until
    /// the cluster has its own ([`super::cluster_liveness`]).
    pub file_liveness: NodeLiveness,
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

/// This controller's build, as agents are told it.
const CONTROLLER_BUILD: &str = env!("CARGO_PKG_VERSION");
/// How often a session reconciles its node against committed state.
const RECONCILE_EVERY: Duration = Duration::from_millis(100);
/// Frames read ahead of the session loop.
const READ_AHEAD: usize = 32;
/// The largest frame an agent may send (hellos, heartbeats and reports are
/// small; launches, which go the other way, carry scripts).
const MAX_AGENT_FRAME_BYTES: usize = 1024 * 1024;
/// Reports received and not yet committed, per session.
const MAX_REPORTS_QUEUED: usize = 1024;
/// Longest a write to an agent may take.
const WRITE_LIMIT: Duration = Duration::from_secs(5);

/// Tells the agent why it is refused, and ends the session with that reason.
async fn refused(send: &mut quinn::SendStream, reason: String) -> Result<(), String> {
    write(
        send,
        &ControllerMessage::Refused {
            reason: reason.clone(),
        },
    )
    .await?;
    Err(reason)
}

/// The liveness settings agents are told now: the cluster's, or the file's
/// before it has any.
fn liveness_in_force(ctx: &SessionContext) -> Result<NodeLiveness, String> {
    ctx.replica
        .read_local(|state| super::cluster_liveness::in_force(state, &ctx.file_liveness))
        .map_err(|e| format!("cannot read the cluster's liveness settings: {e}"))
}

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
    // Every hello is answered, even one this build cannot read: an agent
    // takes a stream ended without a word for a controller of the release
    // before protocol versions, and says hello again in protocol 1.
    let first = match read_frame_limited::<_, AgentMessage>(&mut recv, MAX_AGENT_FRAME_BYTES).await
    {
        Ok(Some(first)) => first,
        Ok(None) => return Err("the agent hung up before its hello".into()),
        Err(FrameError::Io(e)) => return Err(format!("reading the hello: {e}")),
        Err(e) => {
            let reason = format!(
                "this controller (corral {CONTROLLER_BUILD}) speaks agent protocol {} and cannot read this agent's hello ({e}): an agent newer than the controllers sends that; upgrade the controllers first, then the agents",
                agent_protocol::SPOKEN
            );
            return refused(send, reason).await;
        }
    };
    let Some((spoken, hello)) = first.into_hello() else {
        let reason = "the first message on the agent channel must be a hello".to_string();
        return refused(send, reason).await;
    };
    let AgentHello {
        node,
        boot_id,
        version,
        resources,
        running,
        step_address,
    } = hello;
    let refuse = |reason: String| ControllerMessage::Refused { reason };
    if identity.role != Role::Agent || identity.name != node {
        let reason = format!(
            "the certificate names {identity}, not the agent of node '{node}'; mint one with `corral certs DIR --agents {node}`"
        );
        write(send, &refuse(reason.clone())).await?;
        return Err(reason);
    }
    // The version is agreed before anything else: a refusal for it names
    // both sides, and is what an operator midway through an upgrade needs.
    let protocol = match agent_protocol::SPOKEN.agree(spoken) {
        Ok(protocol) => protocol,
        Err(mismatch) => {
            let reason = mismatch.explain(&node, &version, CONTROLLER_BUILD);
            write(send, &refuse(reason.clone())).await?;
            return Err(reason);
        }
    };
    let leadership = ctx.replica.leadership().borrow().clone();
    if !leadership.is_self {
        let leader = leadership.leader.map(|(_, addr)| addr.api);
        write(send, &ControllerMessage::NotLeader { leader }).await?;
        return Ok(());
    }
    // The term this session serves in: what it sends names it (a re-election
    // of this replica moves it on).
    let mut session_term = leadership.term;
    if *ctx.replica.leads_without_quorum().borrow() {
        // Cut off from the majority, perhaps: another leader may be elected
        // already. Neither registering nor renewing a lease can succeed here.
        write(send, &ControllerMessage::NotLeader { leader: None }).await?;
        return Ok(());
    }
    // Linearizable: a replica that leads again at once after a restart may
    // not have applied its log yet, and would find no node defined.
    let defined = match ctx.replica.read(|s| s.nodes().contains_key(&node)).await {
        Ok(defined) => defined,
        Err(e) => {
            write(send, &ControllerMessage::NotLeader { leader: None }).await?;
            return Err(format!("cannot read the cluster's state yet: {e}"));
        }
    };
    if !defined {
        let reason = format!(
            "node '{node}' is not defined in this cluster; an administrator adds it with `corral admin node define`"
        );
        write(send, &refuse(reason.clone())).await?;
        return Err(reason);
    }
    // The node's liveness clock starts when the hello arrives, not when the
    // registration commits: an agent that dies while its registration waits
    // for a slow commit is declared down lease + margin after its hello, not
    // that much after the commit. (Its lease counts from before the hello.)
    ctx.heartbeats.beat(&node);
    let register = Command::RegisterNode {
        node: node.clone(),
        cpus: resources.cpus,
        memory_mb: resources.memory_mb,
        gpus: resources.gpus.clone(),
        running: running.clone(),
        agent_version: version.clone(),
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
        Err(e) => {
            // Answered, so the agent asks the others: a connection closed
            // unanswered means a controller that cannot read the hello.
            write(send, &ControllerMessage::NotLeader { leader: None }).await?;
            return Err(format!("registration not committed: {e}"));
        }
    }
    ctx.wake_scheduler.notify_one();
    // Read after the registration committed: the settings of the state it
    // was applied to, or newer ones (which end the session at once, below).
    // Never a guess: a lease longer than the cluster's would outlive the
    // leader's down timeout.
    let welcomed = match liveness_in_force(ctx) {
        Ok(welcomed) => welcomed,
        Err(e) => {
            write(send, &ControllerMessage::NotLeader { leader: None }).await?;
            return Err(e);
        }
    };
    let welcome = AgentWelcome {
        heartbeat_ms: welcomed.heartbeat_ms,
        lease_ms: welcomed.lease_ms,
        cluster_name: ctx.cluster_name.clone(),
    };
    write(
        send,
        &ControllerMessage::welcome(protocol, CONTROLLER_BUILD, welcome),
    )
    .await?;
    tracing::info!(%node, agent_build = %version, protocol, "agent registered");
    // Held for the session's life: dropping it leaves the registry.
    let (_registration, mut relays) = ctx.agents.register(&node);
    let mut relays_open = true;

    let mut memory = SessionMemory::default();
    memory.heard(running);
    let (frames_tx, mut frames) = mpsc::channel::<AgentMessage>(READ_AHEAD);
    let reader = {
        // Frames are read by their own task: reading is not cancel-safe.
        tokio::spawn(async move {
            while let Ok(Some(message)) =
                read_frame_limited::<_, AgentMessage>(&mut recv, MAX_AGENT_FRAME_BYTES).await
            {
                if frames_tx.send(message).await.is_err() {
                    break;
                }
            }
        })
    };
    let (reports_tx, reports_rx) = mpsc::channel(MAX_REPORTS_QUEUED);
    let (settled_tx, mut settled) = mpsc::channel(MAX_REPORTS_QUEUED);
    let proposer = tokio::spawn(propose_in_order(
        Arc::clone(&ctx.replica),
        node.clone(),
        reports_rx,
        settled_tx,
        Arc::clone(&ctx.wake_scheduler),
        Arc::clone(&ctx.committed),
    ));
    let mut leadership = ctx.replica.leadership();
    let mut stopping = ctx.stopping.clone();
    let mut confirmed = ctx.confirmation.subscribe();
    let mut pending_acks = PendingAcks::new();
    // When each recent acknowledgement left, for the echoes in heartbeats.
    let mut acks_sent = AcksSent::default();
    // The roster goes to agents that show they take it (`HeartbeatV2`).
    let mut roster = ctx.heartbeats.roster();
    let mut roster_wanted = false;
    let mut ticks = tokio::time::interval(RECONCILE_EVERY);
    let outcome = loop {
        tokio::select! {
            message = frames.recv() => {
                let Some(message) = message else { break Err("the agent hung up".to_string()) };
                ctx.heartbeats.beat(&node);
                match message {
                    AgentMessage::Heartbeat { seq, running, .. } => {
                        memory.heard(running);
                        // Acknowledged once a quorum confirms this replica
                        // still leads (see `liveness`).
                        pending_acks.push_back((seq, tokio::time::Instant::now()));
                    }
                    AgentMessage::HeartbeatV2 { seq, running, last_ack, roster: held, .. } => {
                        memory.heard(running);
                        let now = tokio::time::Instant::now();
                        pending_acks.push_back((seq, now));
                        if let Some(ack_sent) = last_ack.and_then(|a| acks_sent.when(a)) {
                            ctx.heartbeats.echo(&node, Echo { heard: now, ack_sent, roster: held });
                        }
                        let current = roster.borrow().as_ref().map(|r| r.digest);
                        if !roster_wanted || (current.is_some() && held != current) {
                            roster_wanted = true;
                            roster.mark_changed();
                        }
                    }
                    AgentMessage::Report { id, report } => {
                        if reports_tx.try_send((id, report)).is_err() {
                            break Err(format!(
                                "more than {MAX_REPORTS_QUEUED} reports wait for commit; the agent resends them on its next connection"
                            ));
                        }
                    }
                    AgentMessage::Hello { .. } | AgentMessage::HelloV2 { .. } => {
                        break Err("a second hello on one connection".into())
                    }
                }
            }
            answer = settled.recv() => {
                let Some(answer) = answer else { break Err("the report proposer stopped".into()) };
                let written = match answer {
                    Ok(ids) => report_done(ids, send).await,
                    Err(e) => Err(e),
                };
                if let Err(e) = written {
                    break Err(e);
                }
            }
            changed = confirmed.changed() => {
                if changed.is_err() {
                    break Ok(());
                }
                let at = *confirmed.borrow_and_update();
                if let Err(e) = acknowledge(&mut pending_acks, at, &mut acks_sent, send).await {
                    break Err(e);
                }
            }
            changed = roster.changed(), if roster_wanted => {
                if changed.is_err() {
                    break Ok(());
                }
                let current = roster.borrow_and_update().clone();
                if let Some(current) = current
                    && let Err(e) = write(send, &ControllerMessage::Roster((*current).clone())).await
                {
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
                // The agent holds the lease it was welcomed with: after a
                // change it attaches again, here, to hear the new one.
                let now_in_force = liveness_in_force(ctx);
                if let Ok(now_in_force) = now_in_force
                    && now_in_force != welcomed
                {
                    tracing::info!(
                        %node,
                        lease_ms = now_in_force.lease_ms,
                        heartbeat_ms = now_in_force.heartbeat_ms,
                        was_lease_ms = welcomed.lease_ms,
                        "the cluster's liveness settings changed: the agent attaches again to hear them"
                    );
                    let leader = leadership.borrow().leader.clone().map(|(_, addr)| addr.api);
                    let _ = write(send, &ControllerMessage::NotLeader { leader }).await;
                    break Ok(());
                }
                if let Err(e) = instruct(ctx, (&node, session_term), &mut memory, send).await {
                    break Err(e);
                }
            }
            () = ctx.committed.notified() => {
                if let Err(e) = instruct(ctx, (&node, session_term), &mut memory, send).await {
                    break Err(e);
                }
            }
            changed = leadership.changed() => {
                if changed.is_err() || !leadership.borrow().is_self {
                    let leader = leadership.borrow().leader.clone().map(|(_, addr)| addr.api);
                    let _ = write(send, &ControllerMessage::NotLeader { leader }).await;
                    break Ok(());
                }
                // Elected again in a newer term: what it sends names that term.
                session_term = leadership.borrow().term;
            }
            _ = stopping.changed() => break Ok(()),
        }
    };
    reader.abort();
    proposer.abort();
    outcome
}

/// Tells the agent its reports `ids` are settled (it stops resending them),
/// each committed or refused.
async fn report_done(ids: Vec<(u64, bool)>, send: &mut quinn::SendStream) -> Result<(), String> {
    for (id, committed) in ids {
        write(send, &ControllerMessage::ReportDone { id, committed }).await?;
    }
    Ok(())
}

/// Acknowledges the heartbeats received before the quorum confirmation that
/// began at `confirmed`: each renews the agent's lease from when it was sent.
async fn acknowledge(
    pending: &mut PendingAcks,
    confirmed: Option<tokio::time::Instant>,
    acks_sent: &mut AcksSent,
    send: &mut quinn::SendStream,
) -> Result<(), String> {
    for seq in acknowledgeable(pending, confirmed) {
        acks_sent.sent(seq, tokio::time::Instant::now());
        write(send, &ControllerMessage::HeartbeatAck { seq }).await?;
    }
    Ok(())
}

/// When the latest acknowledgements of one session left (the last few: a
/// heartbeat echoes the newest its agent received).
#[derive(Debug, Default)]
struct AcksSent(std::collections::VecDeque<(u64, tokio::time::Instant)>);

impl AcksSent {
    const KEPT: usize = 16;

    fn sent(&mut self, seq: u64, at: tokio::time::Instant) {
        if self.0.len() == Self::KEPT {
            self.0.pop_front();
        }
        self.0.push_back((seq, at));
    }

    fn when(&self, seq: u64) -> Option<tokio::time::Instant> {
        self.0.iter().find(|(s, _)| *s == seq).map(|(_, at)| *at)
    }
}

/// Sends what reconciliation says the agent needs now.
async fn instruct(
    ctx: &SessionContext,
    (node, term): (&str, u64),
    memory: &mut SessionMemory,
    send: &mut quinn::SendStream,
) -> Result<(), String> {
    let now = clock::now();
    // Launches name this replica and the term the session began in; once it
    // no longer leads in that term, it sends nothing (the session is ending).
    let still_leads = {
        let now_leading = ctx.replica.leadership();
        let now_leading = now_leading.borrow();
        now_leading.is_self && now_leading.term == term
    };
    if !still_leads {
        return Ok(());
    }
    let leader = (ctx.replica.id(), term);
    let (work, lost) = ctx
        .replica
        .read_local(|state| {
            let work = reconcile(state, node, memory, now)
                .into_iter()
                .map(|instruction| {
                    let message = message_for(state, &instruction, (ctx.kill_grace_ms, leader));
                    (instruction, message)
                })
                .collect::<Vec<_>>();
            (work, lost_attempts(state, node, memory))
        })
        .map_err(|e| e.to_string())?;
    for (job, attempt) in lost {
        tracing::warn!(%node, %job, attempt, "the agent's heartbeats no longer hold a running attempt: failing it over");
        let command = Command::AttemptLost {
            job,
            attempt,
            node: node.to_string(),
            reason: "its agent's heartbeats no longer list it: its processes are gone".into(),
            at: now,
        };
        let replica = Arc::clone(&ctx.replica);
        let (wake, committed) = (Arc::clone(&ctx.wake_scheduler), Arc::clone(&ctx.committed));
        tokio::spawn(async move {
            if let Ok(Ok(_)) = replica.propose(command).await {
                wake.notify_one();
                committed.notify_waiters();
            }
        });
    }
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
    (kill_grace_ms, leader): (u64, (u64, u64)),
) -> Option<ControllerMessage> {
    match instruction {
        Instruction::Launch((job, attempt)) => {
            let record: &Job = state.job(*job)?;
            if record.state != JobState::Running {
                return None;
            }
            let script = state.script_of(record)?.clone();
            let step_peers = step_peers(state, record, *attempt);
            let topology = record
                .attempts
                .iter()
                .filter(|a| a.number == *attempt)
                .flat_map(|a| a.allocation.iter().map(|n| &n.node))
                .filter_map(|node| {
                    let address = state.topology().address_of(node)?;
                    Some((node.clone(), address))
                })
                .collect();
            Some(ControllerMessage::Launch(Box::new(Launch {
                job: record.clone(),
                attempt: *attempt,
                script,
                step_peers,
                dispatched_by: leader,
                topology,
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

/// Writes one frame; an agent that does not take it in time ends the session
/// (it reattaches and is told again).
async fn write(send: &mut quinn::SendStream, message: &ControllerMessage) -> Result<(), String> {
    match tokio::time::timeout(WRITE_LIMIT, write_frame(send, message)).await {
        Ok(written) => written.map_err(|e| e.to_string()),
        Err(_) => Err(format!(
            "the agent took no message for {} s",
            WRITE_LIMIT.as_secs()
        )),
    }
}
