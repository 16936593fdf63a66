//! The server side of peer RPC: decodes each request, hands it to the local Raft
//! (or, for `Propose`, to the local proposer) and encodes the whole result back.
//! Callers are checked before any of this, by the interceptor in [`crate::tls`]:
//! only controllers reach these handlers.

use std::sync::Arc;

use corral_state::Command;
use serde::Serialize;
use tonic::{Request, Response, Status};

use crate::codec;
use crate::pb::Payload;
use crate::pb::peer_server::Peer;
use crate::proposer::Proposer;
use crate::replica::ReplicaMetrics;
use crate::types::Raft;

/// Serves peer RPCs for one replica.
pub struct PeerService {
    raft: Raft,
    proposer: Arc<Proposer>,
    metrics: Arc<dyn Fn() -> ReplicaMetrics + Send + Sync>,
}

impl PeerService {
    /// A service for `raft`, forwarding proposals to `proposer` and reporting
    /// `metrics`.
    pub fn new(
        raft: Raft,
        proposer: Arc<Proposer>,
        metrics: Arc<dyn Fn() -> ReplicaMetrics + Send + Sync>,
    ) -> Self {
        PeerService {
            raft,
            proposer,
            metrics,
        }
    }
}

fn request<T: serde::de::DeserializeOwned>(request: &Request<Payload>) -> Result<T, Status> {
    codec::decode(&request.get_ref().data)
        .map_err(|e| Status::invalid_argument(format!("undecodable peer request: {e}")))
}

fn reply<T: Serialize>(value: &T) -> Result<Response<Payload>, Status> {
    codec::encode(value)
        .map(|data| Response::new(Payload { data }))
        .map_err(|e| Status::internal(format!("unencodable peer reply: {e}")))
}

#[tonic::async_trait]
impl Peer for PeerService {
    async fn append_entries(&self, req: Request<Payload>) -> Result<Response<Payload>, Status> {
        reply(&self.raft.append_entries(request(&req)?).await)
    }

    async fn vote(&self, req: Request<Payload>) -> Result<Response<Payload>, Status> {
        reply(&self.raft.vote(request(&req)?).await)
    }

    async fn install_snapshot(&self, req: Request<Payload>) -> Result<Response<Payload>, Status> {
        reply(&self.raft.install_snapshot(request(&req)?).await)
    }

    async fn propose(&self, req: Request<Payload>) -> Result<Response<Payload>, Status> {
        let commands: Vec<Command> = request(&req)?;
        reply(&self.proposer.propose(commands).await)
    }

    async fn metrics(&self, _req: Request<Payload>) -> Result<Response<Payload>, Status> {
        reply(&(self.metrics)())
    }
}
