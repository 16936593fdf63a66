//! The caller's end of a peer's `Calls` stream: many concurrent calls to one
//! replica over one long-lived gRPC stream, each a numbered frame whose answer
//! comes back with the same number, in any order.
//!
//! A unary gRPC call opens an HTTP/2 stream of its own (headers, HPACK, a task
//! on each side); on this 2-core machine that was a fifth of a follower's CPU
//! for AppendEntries alone. On an open stream a call is one message each way.
//!
//! Failure keeps the unary calls' meaning: a call that could not be sent fails
//! with `unavailable` (nothing reached the peer), one sent on a stream that
//! then broke fails with `unknown` (the peer may have acted on it), one not
//! answered by its deadline fails with `cancelled`, as tonic's own deadline
//! does, and one the peer refused carries the peer's status. A broken stream is
//! replaced by the next call; HTTP/2 keep-alives (see [`crate::network`]) break
//! one whose peer stopped answering.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tonic::codec::Streaming;
use tonic::transport::Channel;

use crate::codec::MAX_MESSAGE_BYTES;
use crate::pb::peer_client::PeerClient;
use crate::pb::{CallMethod, Frame};

/// Calls queued for sending before callers wait.
const CALLS_QUEUED: usize = 1024;

type Answer = Result<Vec<u8>, Status>;
type PendingCalls = HashMap<u64, oneshot::Sender<Answer>>;
type Pending = Arc<Mutex<PendingCalls>>;

/// An open `Calls` stream to one peer.
pub struct CallStream {
    requests: mpsc::Sender<Frame>,
    pending: Pending,
    next_id: AtomicU64,
    /// Set once the stream has ended: no answer will come any more.
    broken: Arc<AtomicBool>,
}

impl CallStream {
    /// Opens a stream over `channel`.
    pub async fn open(channel: Channel) -> Result<Self, Status> {
        let (requests, outgoing) = mpsc::channel(CALLS_QUEUED);
        let mut client = PeerClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let answers = client
            .calls(ReceiverStream::new(outgoing))
            .await?
            .into_inner();
        let pending: Pending = Arc::default();
        let broken = Arc::new(AtomicBool::new(false));
        tokio::spawn(read_answers(
            answers,
            Arc::clone(&pending),
            Arc::clone(&broken),
        ));
        Ok(CallStream {
            requests,
            pending,
            next_id: AtomicU64::new(0),
            broken,
        })
    }

    /// True once the stream has ended; open another.
    pub fn is_broken(&self) -> bool {
        self.broken.load(Ordering::SeqCst)
    }

    /// Calls `method` with `data` and waits until `deadline` for the answer.
    pub async fn call(
        &self,
        method: CallMethod,
        data: Vec<u8>,
        deadline: tokio::time::Instant,
    ) -> Answer {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, wait) = oneshot::channel();
        self.lock_pending()?.insert(id, answer);
        // Whatever ends this call (answer, deadline, or the caller dropping it)
        // takes it off the table.
        let _registered = Registered {
            pending: &self.pending,
            id,
        };
        // After registering: the reader marks the stream broken before it fails
        // what is pending, so a call registered too late sees the mark here.
        if self.is_broken() {
            return Err(Status::unavailable("the call stream to the peer has ended"));
        }
        let frame = Frame {
            id,
            method: method as i32,
            data,
            ..Frame::default()
        };
        match tokio::time::timeout_at(deadline, self.requests.send(frame)).await {
            Ok(Ok(())) => {}
            // Not queued: nothing reached the peer.
            Ok(Err(_)) => {
                return Err(Status::unavailable("the call stream to the peer has ended"));
            }
            Err(_) => {
                return Err(Status::unavailable(
                    "the call stream to the peer is full: the peer is not reading",
                ));
            }
        }
        match tokio::time::timeout_at(deadline, wait).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(Status::unknown(
                "the call stream ended without answering this call",
            )),
            Err(_) => Err(Status::cancelled("Timeout expired")),
        }
    }

    fn lock_pending(&self) -> Result<std::sync::MutexGuard<'_, PendingCalls>, Status> {
        self.pending
            .lock()
            .map_err(|_| Status::internal("the call stream's table was poisoned by a panic"))
    }
}

/// A call's place in the pending table, given up when the call ends.
struct Registered<'a> {
    pending: &'a Pending,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.remove(&self.id);
        }
    }
}

/// Hands each answer to its caller; when the stream ends, fails every call
/// still waiting.
async fn read_answers(mut answers: Streaming<Frame>, pending: Pending, broken: Arc<AtomicBool>) {
    let end = loop {
        match answers.message().await {
            Ok(Some(frame)) => {
                let waiting = pending.lock().ok().and_then(|mut p| p.remove(&frame.id));
                if let Some(caller) = waiting {
                    let answer = match tonic::Code::from_i32(frame.code) {
                        tonic::Code::Ok => Ok(frame.data),
                        code => Err(Status::new(code, frame.error)),
                    };
                    let _ = caller.send(answer);
                }
            }
            Ok(None) => break Status::unknown("the peer closed the call stream"),
            Err(status) => {
                break Status::unknown(format!("the call stream broke: {}", status.message()));
            }
        }
    };
    broken.store(true, Ordering::SeqCst);
    let waiting: Vec<_> = match pending.lock() {
        Ok(mut pending) => pending.drain().map(|(_, caller)| caller).collect(),
        Err(_) => Vec::new(),
    };
    for caller in waiting {
        let _ = caller.send(Err(end.clone()));
    }
}
