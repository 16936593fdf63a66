//! A client of the peer service that finds the leader: it sends proposals to the
//! replica it believes leads, follows `NotLeader` hints, and tries the others in
//! turn while an election runs. Used by benchmarks and operator tools.
//!
//! A transport failure after a request was sent leaves its outcome unknown; this
//! client then retries elsewhere, so a proposal may apply twice. Callers that
//! need exactly-once semantics must make their commands idempotent.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use corral_pki::TlsMaterial;
use corral_state::Command;

use crate::codec;
use crate::error::ProposeError;
use crate::network::{Method, PeerNetwork};
use crate::proposer::Results;
use crate::replica::ReplicaMetrics;
use crate::types::ReplicaId;

/// Per-call deadline of one attempt.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);

/// Finds and follows the leader of a replica group.
pub struct LeaderClient {
    network: PeerNetwork,
    replicas: Vec<(ReplicaId, String)>,
    leader: Mutex<Option<(ReplicaId, String)>>,
    patience: Duration,
    unary: bool,
}

impl LeaderClient {
    /// A client for `replicas` (`id`, `host:port`), giving up after `patience`.
    /// The peer protocol serves controllers only, so `tls` must hold a
    /// certificate with the controller role.
    pub fn new(tls: &TlsMaterial, replicas: Vec<(ReplicaId, String)>, patience: Duration) -> Self {
        corral_pki::install_crypto_provider();
        LeaderClient {
            network: PeerNetwork::new(tls.client_config()),
            replicas,
            leader: Mutex::new(None),
            patience,
            unary: false,
        }
    }

    /// Sends every proposal as a unary gRPC call of its own instead of a frame
    /// of the leader's call stream (what a client making one call per
    /// submission costs the leader).
    pub fn with_unary_calls(mut self) -> Self {
        self.unary = true;
        self
    }

    fn guess(&self, attempt: usize) -> (ReplicaId, String) {
        let known = self.leader.lock().ok().and_then(|l| l.clone());
        known.unwrap_or_else(|| self.replicas[attempt % self.replicas.len()].clone())
    }

    fn believe(&self, leader: Option<(ReplicaId, String)>) {
        if let Ok(mut current) = self.leader.lock() {
            *current = leader;
        }
    }

    /// Proposes `commands` through the leader, waiting out elections.
    pub async fn propose(&self, commands: Vec<Command>) -> Results {
        let payload =
            codec::encode(&commands).map_err(|e| ProposeError::Unavailable(e.to_string()))?;
        let deadline = Instant::now() + self.patience;
        let mut attempt = 0;
        loop {
            let (id, addr) = self.guess(attempt);
            attempt += 1;
            let reply = if self.unary {
                self.network
                    .call_unary(id, &addr, Method::Propose, payload.clone(), ATTEMPT_TIMEOUT)
                    .await
            } else {
                self.network
                    .call(id, &addr, Method::Propose, payload.clone(), ATTEMPT_TIMEOUT)
                    .await
            };
            let retry = match reply.map(|bytes| codec::decode::<Results>(&bytes)) {
                Ok(Ok(Err(ProposeError::NotLeader { leader }))) => {
                    let hint = leader.map(|(id, addr)| (id, addr.peer));
                    let known = hint.is_some();
                    self.believe(hint);
                    if known {
                        Duration::ZERO
                    } else {
                        Duration::from_millis(10)
                    }
                }
                Ok(Ok(Err(ProposeError::Unavailable(_)))) | Err(_) => {
                    self.believe(None);
                    Duration::from_millis(10)
                }
                Ok(Ok(results)) => return results,
                Ok(Err(e)) => {
                    return Err(ProposeError::Unavailable(format!("undecodable reply: {e}")));
                }
            };
            if Instant::now() + retry > deadline {
                return Err(ProposeError::Timeout(self.patience.as_millis() as u64));
            }
            tokio::time::sleep(retry).await;
        }
    }

    /// One replica's metrics.
    pub async fn metrics(&self, id: ReplicaId) -> Result<ReplicaMetrics, String> {
        let addr = self
            .replicas
            .iter()
            .find(|(r, _)| *r == id)
            .map(|(_, a)| a.clone())
            .ok_or("unknown replica")?;
        self.network.metrics(id, &addr, ATTEMPT_TIMEOUT).await
    }
}
