//! The agent's link to the leader: QUIC with mutual TLS to the controllers' client
//! ports (UDP), following `NotLeader` answers to the leader; on each connection a
//! hello (node, resources, attempts still running), then heartbeats, reports
//! from the outbox, and the leader's launches, signals and kills. The lease is
//! renewed by acknowledged heartbeats, from when each was sent.

use std::collections::{BTreeMap, VecDeque};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use corral_proto::agent::{
    AgentMessage, ControllerMessage, GpuHealthSample, NodeResources, read_frame, write_frame,
};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::outbox::Outbox;
use crate::supervisor::Supervisor;

/// Who this agent is and where the controllers are.
#[derive(Debug, Clone)]
pub struct LinkSettings {
    /// Controllers' client addresses, `host:port`.
    pub controllers: Vec<String>,
    /// This node.
    pub node: String,
    /// Changes on every agent start.
    pub boot_id: String,
    /// What the node has.
    pub resources: NodeResources,
    /// Where this agent accepts job steps from other agents.
    pub step_address: Option<String>,
}

/// When the lease was last renewed (shared with the fencing watchdog).
#[derive(Debug, Clone)]
pub struct Lease {
    inner: Arc<Mutex<LeaseState>>,
}

#[derive(Debug)]
struct LeaseState {
    renewed: Option<Instant>,
    length: Duration,
}

impl Default for Lease {
    fn default() -> Self {
        Lease {
            inner: Arc::new(Mutex::new(LeaseState {
                renewed: None,
                length: Duration::from_secs(10),
            })),
        }
    }
}

impl Lease {
    fn renew(&self, from: Instant, length: Duration) {
        if let Ok(mut lease) = self.inner.lock() {
            lease.length = length;
            if lease.renewed.is_none_or(|r| from > r) {
                lease.renewed = Some(from);
            }
        }
    }

    /// True when no lease is held now: never renewed, or not renewed within its
    /// length. It stays lapsed until a leader renews it, so an attempt launched
    /// after fencing (a launch can arrive before the next acknowledgement) is
    /// fenced too.
    pub fn lapsed(&self) -> bool {
        self.inner
            .lock()
            .map_or(true, |l| l.renewed.is_none_or(|r| r.elapsed() > l.length))
    }
}

/// Health samples for heartbeats.
pub type HealthSource = Arc<dyn Fn() -> Vec<GpuHealthSample> + Send + Sync>;

/// Connects, serves, reconnects; runs until the process ends.
pub async fn run(
    settings: LinkSettings,
    client: quinn::ClientConfig,
    supervisor: Supervisor,
    outbox: Outbox,
    lease: Lease,
    health: HealthSource,
) {
    let endpoint = match quinn::Endpoint::client(SocketAddr::from(([0, 0, 0, 0], 0))) {
        Ok(mut endpoint) => {
            endpoint.set_default_client_config(client);
            endpoint
        }
        Err(e) => {
            tracing::error!("cannot open a UDP socket for the agent channel: {e}");
            return;
        }
    };
    let mut queue: VecDeque<String> = VecDeque::new();
    let mut pause = Duration::from_millis(100);
    loop {
        if queue.is_empty() {
            queue.extend(settings.controllers.iter().cloned());
        }
        let Some(address) = queue.pop_front() else {
            tokio::time::sleep(pause).await;
            continue;
        };
        match session(
            &endpoint,
            &address,
            &settings,
            &supervisor,
            &outbox,
            &lease,
            &health,
        )
        .await
        {
            Ok(Ended::Redirect(Some(leader))) => {
                queue.retain(|a| a != &leader);
                queue.push_front(leader);
                continue;
            }
            Ok(Ended::Redirect(None)) => {}
            Ok(Ended::Lost) => {
                // Try the same controller first: it may still lead.
                queue.push_front(address);
                pause = Duration::from_millis(100);
            }
            Err(e) => tracing::debug!(%address, "agent link: {e:#}"),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

enum Ended {
    /// Not the leader (with a hint).
    Redirect(Option<String>),
    /// The session ran and ended.
    Lost,
}

async fn session(
    endpoint: &quinn::Endpoint,
    address: &str,
    settings: &LinkSettings,
    supervisor: &Supervisor,
    outbox: &Outbox,
    lease: &Lease,
    health: &HealthSource,
) -> anyhow::Result<Ended> {
    let target = address
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {address}"))?
        .next()
        .with_context(|| format!("{address} resolves to nothing"))?;
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let connection = tokio::time::timeout(Duration::from_secs(3), endpoint.connect(target, host)?)
        .await
        .context("connecting timed out")??;
    let (mut send, mut recv) = connection.open_bi().await?;
    // The leader starts this node's liveness clock when the hello arrives, so the
    // lease counts from before it was sent.
    let hello_sent = Instant::now();
    write_frame(
        &mut send,
        &AgentMessage::Hello {
            node: settings.node.clone(),
            boot_id: settings.boot_id.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            resources: settings.resources.clone(),
            running: supervisor.running(),
            step_address: settings.step_address.clone(),
        },
    )
    .await?;
    let reply: Option<ControllerMessage> = read_frame(&mut recv).await?;
    let (heartbeat, lease_length) = match reply {
        Some(ControllerMessage::Welcome {
            heartbeat_ms,
            lease_ms,
            cluster_name,
        }) => {
            supervisor.set_cluster_name(&cluster_name);
            (
                Duration::from_millis(heartbeat_ms.max(10)),
                Duration::from_millis(lease_ms.max(20)),
            )
        }
        Some(ControllerMessage::NotLeader { leader }) => return Ok(Ended::Redirect(leader)),
        Some(ControllerMessage::Refused { reason }) => {
            tracing::error!(%address, "the controller refused this agent: {reason}");
            bail!("refused: {reason}");
        }
        other => bail!("unexpected first answer {other:?}"),
    };
    tracing::info!(%address, "connected to the leader");
    lease.renew(hello_sent, lease_length);
    outbox.reconnected();

    let (frames_tx, mut frames) = mpsc::channel::<ControllerMessage>(256);
    let reader = tokio::spawn(async move {
        while let Ok(Some(message)) = read_frame::<_, ControllerMessage>(&mut recv).await {
            if frames_tx.send(message).await.is_err() {
                break;
            }
        }
    });
    let mut beats = tokio::time::interval(heartbeat);
    let mut sent_at: BTreeMap<u64, Instant> = BTreeMap::new();
    let mut seq = 0u64;
    let result = loop {
        let mut failed = None;
        for (id, report) in outbox.unsent() {
            if let Err(e) = write_frame(&mut send, &AgentMessage::Report { id, report }).await {
                failed = Some(e);
                break;
            }
        }
        if let Some(e) = failed {
            break Err(e.into());
        }
        tokio::select! {
            message = frames.recv() => {
                let Some(message) = message else { break Ok(Ended::Lost) };
                match message {
                    ControllerMessage::HeartbeatAck { seq } => {
                        if let Some(at) = sent_at.remove(&seq) {
                            lease.renew(at, lease_length);
                        }
                        sent_at.retain(|s, _| *s > seq);
                    }
                    ControllerMessage::ReportDone { id } => outbox.done(id),
                    ControllerMessage::Launch(launch) => supervisor.launch(*launch),
                    ControllerMessage::Signal { job, attempt, signal, scope } => supervisor.signal((job, attempt), signal, scope),
                    ControllerMessage::Kill { job, attempt, signal, grace_ms } => {
                        supervisor.kill((job, attempt), signal, Duration::from_millis(grace_ms));
                    }
                    ControllerMessage::NotLeader { leader } => break Ok(Ended::Redirect(leader)),
                    ControllerMessage::Refused { reason } => break Err(anyhow::anyhow!("refused: {reason}")),
                    ControllerMessage::Welcome { .. } => break Err(anyhow::anyhow!("a second welcome")),
                }
            }
            _ = beats.tick() => {
                if lease.lapsed() {
                    // Fenced: start over, so the hello tells the leader which
                    // attempts no longer run here.
                    break Ok(Ended::Lost);
                }
                seq += 1;
                sent_at.insert(seq, Instant::now());
                let beat = AgentMessage::Heartbeat { seq, running: supervisor.running(), gpus: health() };
                if let Err(e) = write_frame(&mut send, &beat).await {
                    break Err(e.into());
                }
            }
            () = outbox.added() => {}
        }
    };
    reader.abort();
    connection.close(0u32.into(), b"agent reconnecting");
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_held_only_between_a_renewal_and_its_end() {
        let lease = Lease::default();
        assert!(lease.lapsed(), "never renewed: nothing may run under it");
        lease.renew(Instant::now(), Duration::from_secs(10));
        assert!(!lease.lapsed());
        let old = Lease::default();
        let Some(long_ago) = Instant::now().checked_sub(Duration::from_secs(11)) else {
            return;
        };
        old.renew(long_ago, Duration::from_secs(10));
        assert!(old.lapsed(), "a lapsed lease stays lapsed until renewed");
        old.renew(Instant::now(), Duration::from_secs(10));
        assert!(!old.lapsed());
    }
}
