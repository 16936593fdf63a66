//! The client side of peer RPC: openraft's network traits over tonic with mutual
//! TLS. One lazily connected channel per peer is kept and shared by every
//! replication stream and election round.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use crate::codec::{self, MAX_MESSAGE_BYTES};
use crate::pb::Payload;
use crate::pb::peer_client::PeerClient;
use crate::types::{ReplicaAddr, ReplicaId, TypeConfig};

/// The shortest deadline given to a peer RPC. openraft bounds AppendEntries by the
/// heartbeat interval (tens of ms), which must also cover the TCP and TLS
/// handshake to a peer that just restarted; on a loaded machine that can keep
/// failing, and the peer, hearing no heartbeats, starts elections. A refused
/// connection still fails at once; only slow but live peers wait longer.
pub const MIN_RPC_DEADLINE: Duration = Duration::from_secs(1);

/// How soon an unreachable peer is tried again.
pub const UNREACHABLE_RETRY: Duration = Duration::from_millis(50);

/// Creates and caches peer channels.
#[derive(Clone)]
pub struct PeerNetwork {
    tls: ClientTlsConfig,
    channels: Arc<Mutex<BTreeMap<(ReplicaId, String), Channel>>>,
}

/// Which peer RPC to call.
#[derive(Debug, Clone, Copy)]
pub enum Method {
    /// Raft AppendEntries.
    AppendEntries,
    /// Raft Vote.
    Vote,
    /// Raft InstallSnapshot (one chunk).
    InstallSnapshot,
    /// A forwarded proposal.
    Propose,
    /// A replica's metrics.
    Metrics,
}

impl PeerNetwork {
    /// A network presenting `tls` to peers.
    pub fn new(tls: ClientTlsConfig) -> Self {
        PeerNetwork {
            tls,
            channels: Arc::new(Mutex::new(BTreeMap::new())),
        }
    }

    /// The channel to `target` at `addr` (`host:port`), created on first use.
    pub fn channel(&self, target: ReplicaId, addr: &str) -> Result<Channel, tonic::Status> {
        let mut channels = self
            .channels
            .lock()
            .map_err(|_| tonic::Status::internal("peer channel cache poisoned"))?;
        if let Some(channel) = channels.get(&(target, addr.to_string())) {
            return Ok(channel.clone());
        }
        let endpoint = Endpoint::from_shared(format!("https://{addr}"))
            .and_then(|e| e.tls_config(self.tls.clone()))
            .map_err(|e| tonic::Status::unavailable(format!("bad peer address {addr}: {e}")))?
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true);
        let channel = endpoint.connect_lazy();
        channels.insert((target, addr.to_string()), channel.clone());
        Ok(channel)
    }

    /// Calls `method` on the peer with an encoded payload and a deadline.
    pub async fn call(
        &self,
        target: ReplicaId,
        addr: &str,
        method: Method,
        payload: Vec<u8>,
        ttl: Duration,
    ) -> Result<Vec<u8>, tonic::Status> {
        let channel = self.channel(target, addr)?;
        let mut client = PeerClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let mut request = tonic::Request::new(Payload { data: payload });
        request.set_timeout(ttl.max(MIN_RPC_DEADLINE));
        let reply = match method {
            Method::AppendEntries => client.append_entries(request).await,
            Method::Vote => client.vote(request).await,
            Method::InstallSnapshot => client.install_snapshot(request).await,
            Method::Propose => client.propose(request).await,
            Method::Metrics => client.metrics(request).await,
        }?;
        Ok(reply.into_inner().data)
    }
}

impl RaftNetworkFactory<TypeConfig> for PeerNetwork {
    type Network = PeerConnection;

    async fn new_client(&mut self, target: ReplicaId, node: &ReplicaAddr) -> PeerConnection {
        PeerConnection {
            network: self.clone(),
            target,
            addr: node.peer.clone(),
        }
    }
}

/// openraft's connection to one peer.
pub struct PeerConnection {
    network: PeerNetwork,
    target: ReplicaId,
    addr: String,
}

impl PeerConnection {
    async fn roundtrip<Req, Resp, E>(
        &self,
        method: Method,
        request: &Req,
        ttl: Duration,
    ) -> Result<Resp, RPCError<ReplicaId, ReplicaAddr, E>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let payload =
            codec::encode(request).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let reply = self
            .network
            .call(self.target, &self.addr, method, payload, ttl)
            .await
            .map_err(|status| match status.code() {
                tonic::Code::Unavailable | tonic::Code::Cancelled | tonic::Code::Unknown => {
                    RPCError::Unreachable(Unreachable::new(&status))
                }
                _ => RPCError::Network(NetworkError::new(&status)),
            })?;
        let result: Result<Resp, E> =
            codec::decode(&reply).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerConnection {
    /// Retry an unreachable peer after about one heartbeat, not openraft's 500 ms:
    /// a replica that restarts must hear from the leader before its own election
    /// timer fires, or (without pre-vote in openraft 0.9) its higher term deposes
    /// a healthy leader.
    fn backoff(&self) -> openraft::network::Backoff {
        openraft::network::Backoff::new(std::iter::repeat(UNREACHABLE_RETRY))
    }

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        AppendEntriesResponse<ReplicaId>,
        RPCError<ReplicaId, ReplicaAddr, RaftError<ReplicaId>>,
    > {
        self.roundtrip(Method::AppendEntries, &rpc, option.hard_ttl())
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<ReplicaId>,
        option: RPCOption,
    ) -> Result<VoteResponse<ReplicaId>, RPCError<ReplicaId, ReplicaAddr, RaftError<ReplicaId>>>
    {
        self.roundtrip(Method::Vote, &rpc, option.hard_ttl()).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<ReplicaId>,
        RPCError<ReplicaId, ReplicaAddr, RaftError<ReplicaId, InstallSnapshotError>>,
    > {
        self.roundtrip(Method::InstallSnapshot, &rpc, option.hard_ttl())
            .await
    }
}
