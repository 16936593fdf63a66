//! The server side of peer RPC: decodes each request, hands it to the local Raft
//! (or, for `Propose`, to the local proposer) and encodes the whole result back.
//! The frequent calls arrive as frames of a `Calls` stream (see
//! [`crate::call_stream`]), each answered on the stream's way back as soon as it
//! is done; snapshot chunks and metrics are unary calls. Callers are checked
//! before any of this, by the interceptor in [`crate::tls`]: only controllers
//! reach these handlers.

use std::sync::Arc;

use corral_state::Command;
use serde::Serialize;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::codec::Streaming;
use tonic::{Request, Response, Status};

use crate::codec;
use crate::election::judge::Judge;
use crate::pb::peer_server::Peer;
use crate::pb::{CallMethod, Frame, Payload};
use crate::proposer::Proposer;
use crate::replica::ReplicaMetrics;
use crate::types::Raft;

/// Answers queued on one call stream before the handlers wait.
const ANSWERS_QUEUED: usize = 1024;
/// Calls of one stream running at once; past this the stream is read no
/// further until one ends (the caller's sends then wait, or time out).
const CALLS_RUNNING_PER_STREAM: usize = 4096;

/// Serves peer RPCs for one replica.
#[derive(Clone)]
pub struct PeerService {
    raft: Raft,
    proposer: Arc<Proposer>,
    metrics: Arc<dyn Fn() -> ReplicaMetrics + Send + Sync>,
    judge: Judge,
    /// Becomes true when the replica stops: open call streams then end, so the
    /// server's graceful shutdown does not wait for them forever.
    closing: watch::Receiver<bool>,
}

impl PeerService {
    /// A service for `raft`, forwarding proposals to `proposer`, reporting
    /// `metrics`, answering pre-votes with `judge`, and ending its call
    /// streams once `closing` becomes true.
    pub fn new(
        raft: Raft,
        proposer: Arc<Proposer>,
        metrics: Arc<dyn Fn() -> ReplicaMetrics + Send + Sync>,
        judge: Judge,
        closing: watch::Receiver<bool>,
    ) -> Self {
        PeerService {
            raft,
            proposer,
            metrics,
            judge,
            closing,
        }
    }

    /// Runs one streamed call: the encoded answer, or why the request was refused.
    async fn answer(&self, method: Option<CallMethod>, data: &[u8]) -> Result<Vec<u8>, Status> {
        match method {
            Some(CallMethod::AppendEntries) => {
                encode(&self.raft.append_entries(decode(data)?).await)
            }
            Some(CallMethod::Vote) => encode(&self.raft.vote(decode(data)?).await),
            Some(CallMethod::Propose) => {
                let commands: Vec<Command> = decode(data)?;
                encode(&self.proposer.propose(commands).await)
            }
            Some(CallMethod::PreVote) => encode(
                &self
                    .judge
                    .answer(&decode(data)?)
                    .await
                    .map_err(|e| Status::unavailable(e.to_string()))?,
            ),
            Some(CallMethod::Beacon) => encode(&self.judge.beacon(&decode(data)?)),
            Some(CallMethod::Unspecified) | None => Err(Status::invalid_argument(format!(
                "{UNKNOWN_METHOD}: is the peer a newer corral build?"
            ))),
        }
    }
}

/// How an answer to a call this build does not know begins.
const UNKNOWN_METHOD: &str = "unknown call method";

/// True when `status` is a peer's answer to a call its build does not know
/// (an earlier build asked for a pre-vote).
pub fn is_unknown_method(status: &Status) -> bool {
    status.code() == tonic::Code::InvalidArgument && status.message().starts_with(UNKNOWN_METHOD)
}

fn decode<T: serde::de::DeserializeOwned>(data: &[u8]) -> Result<T, Status> {
    codec::decode(data)
        .map_err(|e| Status::invalid_argument(format!("undecodable peer request: {e}")))
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, Status> {
    codec::encode(value).map_err(|e| Status::internal(format!("unencodable peer reply: {e}")))
}

fn reply<T: Serialize>(value: &T) -> Result<Response<Payload>, Status> {
    encode(value).map(|data| Response::new(Payload { data }))
}

#[tonic::async_trait]
impl Peer for PeerService {
    type CallsStream = ReceiverStream<Result<Frame, Status>>;

    async fn calls(
        &self,
        req: Request<Streaming<Frame>>,
    ) -> Result<Response<Self::CallsStream>, Status> {
        let mut incoming = req.into_inner();
        let (answers, outgoing) = mpsc::channel(ANSWERS_QUEUED);
        let service = self.clone();
        let running = Arc::new(Semaphore::new(CALLS_RUNNING_PER_STREAM));
        tokio::spawn(async move {
            let mut closing = service.closing.clone();
            loop {
                let frame = tokio::select! {
                    frame = incoming.message() => frame,
                    _ = closing.wait_for(|closing| *closing) => break,
                };
                // The stream ended, or broke (the caller sees that on its side).
                let Ok(Some(frame)) = frame else { break };
                let permit = tokio::select! {
                    permit = Arc::clone(&running).acquire_owned() => permit,
                    _ = closing.wait_for(|closing| *closing) => break,
                };
                let Ok(permit) = permit else { break };
                let (service, answers) = (service.clone(), answers.clone());
                tokio::spawn(async move {
                    let _running = permit;
                    let method = CallMethod::try_from(frame.method).ok();
                    let answer = match service.answer(method, &frame.data).await {
                        Ok(data) => Frame {
                            id: frame.id,
                            data,
                            ..Frame::default()
                        },
                        Err(status) => Frame {
                            id: frame.id,
                            error: status.message().to_string(),
                            code: status.code() as i32,
                            ..Frame::default()
                        },
                    };
                    // A caller that went away no longer wants the answer.
                    let _ = answers.send(Ok(answer)).await;
                });
            }
        });
        Ok(Response::new(ReceiverStream::new(outgoing)))
    }

    async fn install_snapshot(&self, req: Request<Payload>) -> Result<Response<Payload>, Status> {
        reply(
            &self
                .raft
                .install_snapshot(decode(&req.get_ref().data)?)
                .await,
        )
    }

    async fn propose(&self, req: Request<Payload>) -> Result<Response<Payload>, Status> {
        let commands: Vec<Command> = decode(&req.get_ref().data)?;
        reply(&self.proposer.propose(commands).await)
    }

    async fn metrics(&self, _req: Request<Payload>) -> Result<Response<Payload>, Status> {
        reply(&(self.metrics)())
    }
}
