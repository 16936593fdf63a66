//! The agent sessions this replica holds, by node: how the client API reaches a
//! connected agent (`scancel --signal`) when reconciliation, which drives
//! everything else a session sends, has nothing to say. A session registers once
//! its node is registered and welcomed, and leaves when it ends; a newer
//! connection from the same node replaces an older one. Only the leader holds
//! sessions, so only the leader's registry is ever filled.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use corral_proto::agent::ControllerMessage;
use tokio::sync::{mpsc, oneshot};

/// Messages waiting for one session to write them; beyond this, senders wait.
const QUEUE_PER_SESSION: usize = 64;

/// A message for an agent, and where to say whether it was written.
#[derive(Debug)]
pub struct Relay {
    /// What to send.
    pub message: ControllerMessage,
    /// Answered once the message was written to the agent's stream (or not).
    pub written: oneshot::Sender<Result<(), String>>,
}

/// Why a message did not reach a node's agent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReached {
    /// No agent of that node is connected to this replica.
    #[error("no agent is connected")]
    NotConnected,
    /// The session ended before it wrote the message.
    #[error("its agent's connection ended before the message was sent")]
    SessionEnded,
    /// The session did not write the message in time.
    #[error("its agent's connection did not take the message within {0} ms")]
    Timeout(u64),
    /// Writing failed.
    #[error("sending to its agent failed: {0}")]
    Write(String),
}

/// The sessions, shared by the gateway (which fills it) and the client API.
#[derive(Debug, Clone, Default)]
pub struct AgentSessions {
    inner: Arc<Mutex<Sessions>>,
}

#[derive(Debug, Default)]
struct Sessions {
    next_id: u64,
    by_node: BTreeMap<String, (u64, mpsc::Sender<Relay>)>,
}

/// A session's place in the registry; dropping it removes the session (unless a
/// newer one of the same node has replaced it).
#[derive(Debug)]
pub struct Registration {
    sessions: AgentSessions,
    node: String,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut sessions = self.sessions.lock();
        if sessions
            .by_node
            .get(&self.node)
            .is_some_and(|(id, _)| *id == self.id)
        {
            sessions.by_node.remove(&self.node);
        }
    }
}

impl AgentSessions {
    fn lock(&self) -> MutexGuard<'_, Sessions> {
        // Nothing panics while holding the lock; a poisoned map is still consistent.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers `node`'s session; the receiver yields what others ask it to send.
    pub fn register(&self, node: &str) -> (Registration, mpsc::Receiver<Relay>) {
        let (tx, rx) = mpsc::channel(QUEUE_PER_SESSION);
        let mut sessions = self.lock();
        sessions.next_id += 1;
        let id = sessions.next_id;
        sessions.by_node.insert(node.to_string(), (id, tx));
        let registration = Registration {
            sessions: self.clone(),
            node: node.to_string(),
            id,
        };
        (registration, rx)
    }

    /// True when `node`'s agent has a session here.
    pub fn is_connected(&self, node: &str) -> bool {
        self.lock().by_node.contains_key(node)
    }

    /// Hands `message` to `node`'s session and waits until it was written to the
    /// agent's stream, at most `patience`.
    pub async fn relay(
        &self,
        node: &str,
        message: ControllerMessage,
        patience: Duration,
    ) -> Result<(), NotReached> {
        let sender = self
            .lock()
            .by_node
            .get(node)
            .map(|(_, tx)| tx.clone())
            .ok_or(NotReached::NotConnected)?;
        let (written, answer) = oneshot::channel();
        let delivery = async {
            sender
                .send(Relay { message, written })
                .await
                .map_err(|_| NotReached::SessionEnded)?;
            match answer.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(why)) => Err(NotReached::Write(why)),
                Err(_) => Err(NotReached::SessionEnded),
            }
        };
        let patience_ms = u64::try_from(patience.as_millis()).unwrap_or(u64::MAX);
        tokio::time::timeout(patience, delivery)
            .await
            .unwrap_or(Err(NotReached::Timeout(patience_ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::ids::JobId;
    use corral_state::slurm::signal::Signal;

    fn ping() -> ControllerMessage {
        ControllerMessage::HeartbeatAck { seq: 1 }
    }

    const PATIENCE: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn a_relay_reaches_the_registered_session_and_waits_for_the_write() {
        let sessions = AgentSessions::default();
        assert_eq!(
            sessions.relay("n1", ping(), PATIENCE).await,
            Err(NotReached::NotConnected)
        );
        let (_registration, mut rx) = sessions.register("n1");
        let session = tokio::spawn(async move {
            let relay = rx.recv().await.expect("a relay");
            let _ = relay.written.send(Ok(()));
            relay.message
        });
        let signal = ControllerMessage::Signal {
            job: JobId(3),
            attempt: 1,
            signal: Signal::USR1,
            scope: corral_proto::agent::SignalScope::Batch,
        };
        assert_eq!(sessions.relay("n1", signal.clone(), PATIENCE).await, Ok(()));
        assert_eq!(session.await.expect("session task"), signal);
    }

    #[tokio::test]
    async fn a_failed_write_or_an_ended_session_is_reported() {
        let sessions = AgentSessions::default();
        let (registration, mut rx) = sessions.register("n1");
        let session = tokio::spawn(async move {
            let relay = rx.recv().await.expect("a relay");
            let _ = relay.written.send(Err("stream reset".into()));
            // The session ends with the relay queue still open.
            drop(rx);
        });
        assert_eq!(
            sessions.relay("n1", ping(), PATIENCE).await,
            Err(NotReached::Write("stream reset".into()))
        );
        session.await.expect("session task");
        assert_eq!(
            sessions.relay("n1", ping(), PATIENCE).await,
            Err(NotReached::SessionEnded)
        );
        drop(registration);
        assert!(!sessions.is_connected("n1"));
    }

    #[test]
    fn a_newer_session_of_the_node_outlives_the_older_ones_end() {
        let sessions = AgentSessions::default();
        let (older, _rx1) = sessions.register("n1");
        let (newer, _rx2) = sessions.register("n1");
        drop(older);
        assert!(sessions.is_connected("n1"), "the newer session was removed");
        drop(newer);
        assert!(!sessions.is_connected("n1"));
    }

    #[tokio::test]
    async fn a_session_that_never_writes_times_out() {
        let sessions = AgentSessions::default();
        let (_registration, _rx) = sessions.register("n1");
        assert_eq!(
            sessions
                .relay("n1", ping(), Duration::from_millis(50))
                .await,
            Err(NotReached::Timeout(50))
        );
    }
}
