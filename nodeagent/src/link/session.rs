//! One session with the leader, after its welcome: heartbeats (each
//! acknowledged heartbeat renews the lease from when it was sent), reports
//! from the outbox, and the leader's launches, signals and kills.
//!
//! The session ends when the leader goes quiet: no acknowledgement for two
//! heartbeat periods while a heartbeat waits for one means the leader died, was
//! paused, or is cut off from the majority (it acknowledges only once a quorum
//! confirmed it still leads).
//! No write may hold the session longer than that either, so a leader that
//! stops reading cannot stall it.

use std::collections::BTreeMap;
use std::time::Duration;

use corral_proto::agent::{
    AgentMessage, ControllerMessage, GpuHealthSample, read_frame, write_frame,
};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::LinkParts;
use super::discovery::Attached;
use super::instruments;

/// Heartbeat periods without any acknowledgement (while a heartbeat waits for
/// one) before the agent looks for another leader.
pub(super) const ACK_PERIODS: u32 = 2;

/// Frames read ahead of the session loop.
const READ_AHEAD: usize = 32;

/// Why a session ended.
#[derive(Debug)]
pub(super) enum Ended {
    /// The controller no longer leads (and named its successor, if known).
    Redirect(Option<String>),
    /// No acknowledgement within the deadline.
    Unconfirmed(Duration),
    /// The lease lapsed and the jobs were fenced: a fresh hello tells the
    /// leader what this node still holds.
    Fenced,
    /// The connection failed or the leader closed it.
    Closed(String),
}

impl Ended {
    /// The leader to ask first next time.
    pub(super) fn leader_hint(&self) -> Option<String> {
        match self {
            Ended::Redirect(leader) => leader.clone(),
            _ => None,
        }
    }
}

/// Runs the session until it ends.
pub(super) async fn serve(attached: Box<Attached>, parts: &LinkParts) -> Ended {
    let Attached {
        connection,
        mut send,
        mut recv,
        address,
        hello_sent,
        heartbeat,
        lease: lease_length,
        cluster_name,
        protocol,
    } = *attached;
    parts.supervisor.set_cluster_name(&cluster_name);
    parts.lease.renew(hello_sent, lease_length);
    parts.outbox.reconnected();
    tracing::info!(
        %address,
        lease_ms = lease_length.as_millis() as u64,
        heartbeat_ms = heartbeat.as_millis() as u64,
        protocol,
        "attached to the leader"
    );
    let (frames_tx, mut frames) = mpsc::channel::<ControllerMessage>(READ_AHEAD);
    let reader = tokio::spawn(async move {
        loop {
            match read_frame::<_, ControllerMessage>(&mut recv).await {
                Ok(Some(message)) => {
                    if frames_tx.send(message).await.is_err() {
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    tracing::debug!("agent channel: {e}");
                    return;
                }
            }
        }
    });
    let ack_timeout = heartbeat * ACK_PERIODS;
    let mut session = Session {
        send: &mut send,
        parts,
        write_limit: ack_timeout,
        lease_length,
        sent_at: BTreeMap::new(),
        last_ack: Instant::now(),
        last_acked_seq: None,
        seq: 0,
    };
    let mut beats = tokio::time::interval(heartbeat);
    beats.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let ended = loop {
        if let Err(ended) = session.send_reports().await {
            break ended;
        }
        let deadline = session.ack_deadline(ack_timeout);
        tokio::select! {
            message = frames.recv() => {
                let Some(message) = message else {
                    break Ended::Closed("the leader closed the connection".into());
                };
                if let Err(ended) = session.handle(message) {
                    break ended;
                }
            }
            _ = beats.tick() => {
                if parts.lease.lapsed() {
                    break Ended::Fenced;
                }
                if let Err(ended) = session.heartbeat().await {
                    break ended;
                }
            }
            () = sleep_until_some(deadline) => break Ended::Unconfirmed(ack_timeout),
            () = parts.outbox.added() => {}
        }
    };
    reader.abort();
    connection.close(0u32.into(), b"agent reattaching");
    match &ended {
        Ended::Unconfirmed(after) => tracing::warn!(
            %address,
            "the leader acknowledged no heartbeat for {} ms (dead, paused or cut off): looking for the leader",
            after.as_millis()
        ),
        Ended::Redirect(leader) => {
            tracing::info!(%address, ?leader, "the controller no longer leads: looking for the leader");
        }
        Ended::Fenced => {
            tracing::warn!(%address, "lease lapsed: attaching afresh");
        }
        Ended::Closed(reason) => {
            tracing::warn!(%address, "session with the leader ended: {reason}; looking for the leader");
        }
    }
    ended
}

/// When a leader whose last acknowledgement came at `last_ack` is quiet for
/// too long, while the heartbeat sent at `oldest_waiting` waits (none: never).
fn quiet_deadline(
    last_ack: Instant,
    oldest_waiting: Option<Instant>,
    ack_timeout: Duration,
) -> Option<Instant> {
    let period = ack_timeout / ACK_PERIODS;
    oldest_waiting.map(|sent| (last_ack + ack_timeout).max(sent + period))
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// A session's sending side and what it waits for.
struct Session<'a> {
    send: &'a mut quinn::SendStream,
    parts: &'a LinkParts,
    /// Longest any write may take.
    write_limit: Duration,
    lease_length: Duration,
    /// Heartbeats sent and not yet acknowledged, by sequence number.
    sent_at: BTreeMap<u64, Instant>,
    /// When the last acknowledgement came (or the session began).
    last_ack: Instant,
    /// The newest heartbeat acknowledged in this session.
    last_acked_seq: Option<u64>,
    seq: u64,
}

impl Session<'_> {
    /// When the leader will have been quiet too long, while a heartbeat waits:
    /// `ack_timeout` (two periods) after the last acknowledgement, but never
    /// less than a period after the oldest heartbeat waiting was sent.
    fn ack_deadline(&self, ack_timeout: Duration) -> Option<Instant> {
        quiet_deadline(
            self.last_ack,
            self.sent_at.first_key_value().map(|(_, sent)| *sent),
            ack_timeout,
        )
    }

    async fn write(&mut self, message: &AgentMessage) -> Result<(), Ended> {
        match tokio::time::timeout(self.write_limit, write_frame(self.send, message)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Ended::Closed(e.to_string())),
            Err(_) => Err(Ended::Unconfirmed(self.write_limit)),
        }
    }

    async fn send_reports(&mut self) -> Result<(), Ended> {
        for (id, report) in self.parts.outbox.unsent() {
            self.write(&AgentMessage::Report { id, report }).await?;
        }
        Ok(())
    }

    async fn heartbeat(&mut self) -> Result<(), Ended> {
        self.seq += 1;
        self.sent_at.insert(self.seq, Instant::now());
        let gpus = self
            .parts
            .health
            .borrow()
            .iter()
            .map(|s| GpuHealthSample {
                index: s.index,
                healthy: s.healthy,
                temperature_c: s.temperature_c,
                utilization_pct: s.utilization_pct,
                problem: s.problem.clone(),
            })
            .collect();
        let beat = AgentMessage::HeartbeatV2 {
            seq: self.seq,
            running: self.parts.supervisor.held(),
            gpus,
            last_ack: self.last_acked_seq,
            roster: self.parts.roster.borrow().as_ref().map(|r| r.digest),
        };
        self.write(&beat).await
    }

    fn handle(&mut self, message: ControllerMessage) -> Result<(), Ended> {
        let supervisor = &self.parts.supervisor;
        match message {
            ControllerMessage::HeartbeatAck { seq } => {
                if let Some(at) = self.sent_at.remove(&seq) {
                    instruments::heartbeat_round_trip()
                        .record(at.elapsed().as_secs_f64() * 1000.0, &[]);
                    self.parts.lease.renew(at, self.lease_length);
                    self.last_ack = Instant::now();
                    self.last_acked_seq = Some(seq);
                }
                // Acknowledgements come in order: older ones were lost with
                // nothing to renew.
                self.sent_at.retain(|s, _| *s > seq);
            }
            ControllerMessage::ReportDone { id, committed } => {
                self.parts.outbox.settle(id, committed);
            }
            ControllerMessage::Launch(launch) => supervisor.launch(*launch),
            ControllerMessage::Signal {
                job,
                attempt,
                signal,
                scope,
            } => supervisor.signal((job, attempt), signal, scope),
            ControllerMessage::Kill {
                job,
                attempt,
                signal,
                grace_ms,
            } => supervisor.kill((job, attempt), signal, Duration::from_millis(grace_ms)),
            ControllerMessage::NotLeader { leader } => return Err(Ended::Redirect(leader)),
            ControllerMessage::Refused { reason } => {
                return Err(Ended::Closed(format!("refused: {reason}")));
            }
            ControllerMessage::Welcome { .. } | ControllerMessage::WelcomeV2 { .. } => {
                return Err(Ended::Closed("a second welcome".into()));
            }
            ControllerMessage::Roster(roster) => {
                // A leader that registered this node knows it: a roster
                // without it is a leader's state not caught up yet, and would
                // give this node no say. Kept out.
                if !roster.members.contains_key(self.parts.supervisor.node()) {
                    tracing::warn!(
                        nodes = roster.members.len(),
                        "the leader sent a roster without this node; keeping the one held"
                    );
                    return Ok(());
                }
                // Logged when the members or how many of them this agent
                // can ask change: a member without a step address cannot be
                // asked during a controller outage (it registered after the
                // leader built the roster, or has no step channel).
                let reachable = |r: &corral_proto::roster::Roster| {
                    r.members.values().filter(|a| a.is_some()).count()
                };
                let held = self
                    .parts
                    .roster
                    .borrow()
                    .as_ref()
                    .map(|r| (r.digest, reachable(r)));
                if held != Some((roster.digest, reachable(&roster))) {
                    tracing::info!(
                        nodes = roster.members.len(),
                        reachable = reachable(&roster),
                        digest = %roster.digest,
                        "holds the cluster's roster"
                    );
                }
                self.parts
                    .roster
                    .send_replace(Some(std::sync::Arc::new(roster)));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_is_quiet_two_periods_after_its_last_acknowledgement() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let timeout = ms(1_000);
        assert_eq!(quiet_deadline(t, None, timeout), None, "nothing waits");
        // Acknowledged at t; the next heartbeat left at t + 400 ms.
        assert_eq!(
            quiet_deadline(t, Some(t + ms(400)), timeout),
            Some(t + ms(1_000))
        );
        // A heartbeat sent just before the deadline still gets a period.
        assert_eq!(
            quiet_deadline(t, Some(t + ms(900)), timeout),
            Some(t + ms(1_400))
        );
    }
}
