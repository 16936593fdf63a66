//! Batches proposals into log entries. Concurrent callers' commands share one
//! entry (one append, one fsync, one replication round), and several entries may
//! be in flight at once; every caller is answered only when its entry commits.

use std::sync::Arc;
use std::time::Duration;

use corral_state::{Command, Outcome, Rejection};
use openraft::error::{ClientWriteError, RaftError};
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::error::ProposeError;
use crate::types::{Proposal, Raft, ReplicaId};

/// Most commands in one log entry.
pub const MAX_COMMANDS_PER_ENTRY: usize = 512;
/// Most encoded bytes in one log entry (a single larger proposal is proposed
/// alone): entries must replicate well within a heartbeat interval.
pub const MAX_ENTRY_BYTES: usize = 512 * 1024;
/// Most encoded bytes in one proposal (its commands share one entry). Submissions
/// are bounded well below this by `ClusterConfig::max_batch_bytes`.
pub const MAX_PROPOSAL_BYTES: usize = 4 * 1024 * 1024 + 64 * 1024;
/// Most entries proposed and not yet committed at once.
pub const MAX_ENTRIES_IN_FLIGHT: usize = 2;
/// Most proposals waiting to be batched before callers are pushed back.
const QUEUE_DEPTH: usize = 16 * 1024;

/// The results of one caller's commands, in order.
pub type Results = Result<Vec<Result<Outcome, Rejection>>, ProposeError>;

struct Waiting {
    commands: Vec<Command>,
    bytes: usize,
    answer: oneshot::Sender<Results>,
}

/// The proposer of one replica.
pub struct Proposer {
    queue: mpsc::Sender<Waiting>,
    timeout: Duration,
}

impl Proposer {
    /// Starts the batching task for `raft`.
    pub fn start(raft: Raft, timeout: Duration) -> Arc<Self> {
        let (queue, receiver) = mpsc::channel(QUEUE_DEPTH);
        tokio::spawn(batch_loop(raft, receiver, timeout));
        Arc::new(Proposer { queue, timeout })
    }

    /// Proposes `commands`, applied in order in one entry (with other callers'),
    /// and waits for their results. The timeout counts from now, queueing included; when it passes the outcome
    /// is unknown (the commands may still commit).
    pub async fn propose(&self, commands: Vec<Command>) -> Results {
        let bytes: usize = commands
            .iter()
            .map(|c| postcard::experimental::serialized_size(c).unwrap_or(usize::MAX))
            .fold(0, usize::saturating_add);
        if bytes > MAX_PROPOSAL_BYTES {
            return Err(ProposeError::TooLarge {
                bytes,
                max: MAX_PROPOSAL_BYTES,
            });
        }
        let (answer, wait) = oneshot::channel();
        let queued = async {
            if self
                .queue
                .send(Waiting {
                    commands,
                    bytes,
                    answer,
                })
                .await
                .is_err()
            {
                return Err(ProposeError::Unavailable(
                    "the replica is shutting down".into(),
                ));
            }
            wait.await.unwrap_or_else(|_| {
                Err(ProposeError::Lost(
                    "the replica stopped before answering".into(),
                ))
            })
        };
        match tokio::time::timeout(self.timeout, queued).await {
            Ok(results) => results,
            Err(_) => Err(ProposeError::Timeout(self.timeout.as_millis() as u64)),
        }
    }
}

async fn batch_loop(raft: Raft, mut receiver: mpsc::Receiver<Waiting>, timeout: Duration) {
    let in_flight = Arc::new(Semaphore::new(MAX_ENTRIES_IN_FLIGHT));
    let mut carried: Option<Waiting> = None;
    loop {
        let first = match carried.take() {
            Some(waiting) => waiting,
            None => match receiver.recv().await {
                Some(waiting) => waiting,
                None => break,
            },
        };
        let (mut count, mut bytes) = (first.commands.len(), first.bytes);
        let mut group = vec![first];
        while count < MAX_COMMANDS_PER_ENTRY && bytes < MAX_ENTRY_BYTES {
            match receiver.try_recv() {
                // Too big to join this entry: it starts the next one.
                Ok(next) if bytes + next.bytes > MAX_ENTRY_BYTES => {
                    carried = Some(next);
                    break;
                }
                Ok(next) => {
                    count += next.commands.len();
                    bytes += next.bytes;
                    group.push(next);
                }
                Err(_) => break,
            }
        }
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
            break;
        };
        let raft = raft.clone();
        tokio::spawn(async move {
            let _permit = permit;
            commit(&raft, group, timeout).await;
        });
    }
}

async fn commit(raft: &Raft, group: Vec<Waiting>, timeout: Duration) {
    let sizes: Vec<usize> = group.iter().map(|w| w.commands.len()).collect();
    let (answers, batches): (Vec<_>, Vec<_>) =
        group.into_iter().map(|w| (w.answer, w.commands)).unzip();
    let commands: Vec<Command> = batches.into_iter().flatten().collect();
    let outcome =
        match tokio::time::timeout(timeout, raft.client_write(Proposal { commands })).await {
            Err(_) => Err(ProposeError::Timeout(timeout.as_millis() as u64)),
            Ok(Ok(response)) => Ok(response.data.results),
            Ok(Err(error)) => Err(write_error(error)),
        };
    match outcome {
        Ok(results) => {
            let mut results = results.into_iter();
            for (answer, size) in answers.into_iter().zip(sizes) {
                let _ = answer.send(Ok(results.by_ref().take(size).collect()));
            }
        }
        Err(error) => {
            for answer in answers {
                let _ = answer.send(Err(error.clone()));
            }
        }
    }
}

fn write_error(
    error: RaftError<ReplicaId, ClientWriteError<ReplicaId, crate::types::ReplicaAddr>>,
) -> ProposeError {
    if let Some(forward) = error.forward_to_leader() {
        let leader = forward.leader_id.zip(forward.leader_node.clone());
        return ProposeError::NotLeader { leader };
    }
    // Raft took the entry; it stopped (or its storage failed) before answering.
    ProposeError::Lost(error.to_string())
}
