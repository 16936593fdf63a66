//! The client side of peer RPC: openraft's network traits over tonic with mutual
//! TLS. One lazily connected channel per peer is kept and shared by every
//! replication stream and election round; the frequent calls (AppendEntries,
//! Vote, Propose) travel over one long-lived [`CallStream`] per peer on it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError,
    Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use crate::call_stream::CallStream;
use crate::codec::{self, MAX_MESSAGE_BYTES};
use crate::pb::peer_client::PeerClient;
use crate::pb::{CallMethod, Payload};
use crate::types::{ReplicaAddr, ReplicaId, TypeConfig};

/// Most bytes one AppendEntries may carry. openraft bounds each AppendEntries by
/// the heartbeat interval and, on a timeout, resends the same batch forever; only
/// `PayloadTooLarge` makes it send fewer entries. So oversized batches are refused
/// before sending, with a hint of how many entries fit.
pub const APPEND_BUDGET_BYTES: usize = 1024 * 1024;

/// How often an HTTP/2 ping checks a peer connection.
pub const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// How long a ping may go unanswered before the connection is dropped.
pub const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// How soon an unreachable peer is tried again.
pub const UNREACHABLE_RETRY: Duration = Duration::from_millis(50);

/// Creates and caches peer channels: one per replica, replaced when the
/// replica's address changes (so the cache holds at most one channel for each
/// replica id the cluster has known).
#[derive(Clone)]
pub struct PeerNetwork {
    tls: ClientTlsConfig,
    source: Option<std::net::IpAddr>,
    channels: Arc<Mutex<BTreeMap<ReplicaId, (String, Channel)>>>,
    streams: Arc<Mutex<BTreeMap<ReplicaId, StreamSlot>>>,
}

/// The call stream to one replica, opened by the first call that needs it.
type StreamSlot = Arc<tokio::sync::Mutex<Option<(String, Arc<CallStream>)>>>;

/// Which peer RPC to call.
#[derive(Debug, Clone, Copy)]
pub enum Method {
    /// Raft AppendEntries.
    AppendEntries,
    /// Raft Vote.
    Vote,
    /// Would the peer vote for this replica (no state changes)?
    PreVote,
    /// Does the peer follow this replica, its leader (answered outside its core)?
    Beacon,
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
            source: None,
            channels: Arc::new(Mutex::new(BTreeMap::new())),
            streams: Arc::new(Mutex::new(BTreeMap::new())),
        }
    }

    /// Connections made from `source` (an address of this host), or from the
    /// kernel's choice when `None`.
    pub fn with_source(mut self, source: Option<std::net::IpAddr>) -> Self {
        self.source = source;
        self
    }

    /// The channel to `target` at `addr` (`host:port`), created on first use
    /// and again when `target`'s address changes.
    pub fn channel(&self, target: ReplicaId, addr: &str) -> Result<Channel, tonic::Status> {
        let mut channels = self
            .channels
            .lock()
            .map_err(|_| tonic::Status::internal("peer channel cache poisoned"))?;
        if let Some((cached, channel)) = channels.get(&target)
            && cached == addr
        {
            return Ok(channel.clone());
        }
        let endpoint = Endpoint::from_shared(format!("https://{addr}"))
            .and_then(|e| e.tls_config(self.tls.clone()))
            .map_err(|e| tonic::Status::unavailable(format!("bad peer address {addr}: {e}")))?
            .connect_timeout(Duration::from_secs(2))
            .local_address(self.source)
            .tcp_nodelay(true)
            // A peer that stops answering (paused, cut off) breaks its call
            // stream within seconds instead of holding calls until TCP gives up.
            .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
            .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
            .keep_alive_while_idle(true);
        let channel = endpoint.connect_lazy();
        channels.insert(target, (addr.to_string(), channel.clone()));
        Ok(channel)
    }

    /// The open call stream to `target` at `addr`, opened (again) when there is
    /// none, it broke, or `target`'s address changed.
    async fn stream(
        &self,
        target: ReplicaId,
        addr: &str,
    ) -> Result<Arc<CallStream>, tonic::Status> {
        let slot = {
            let mut streams = self
                .streams
                .lock()
                .map_err(|_| tonic::Status::internal("peer stream cache poisoned"))?;
            Arc::clone(streams.entry(target).or_default())
        };
        let mut slot = slot.lock().await;
        if let Some((cached, stream)) = slot.as_ref()
            && cached == addr
            && !stream.is_broken()
        {
            return Ok(Arc::clone(stream));
        }
        let stream = Arc::new(CallStream::open(self.channel(target, addr)?).await?);
        *slot = Some((addr.to_string(), Arc::clone(&stream)));
        Ok(stream)
    }

    /// The metrics of the replica at `addr`, asked within `ttl`.
    pub async fn metrics(
        &self,
        target: ReplicaId,
        addr: &str,
        ttl: Duration,
    ) -> Result<crate::replica::ReplicaMetrics, String> {
        let bytes = self
            .call(target, addr, Method::Metrics, Vec::new(), ttl)
            .await
            .map_err(|status| status.to_string())?;
        codec::decode(&bytes).map_err(|e| e.to_string())
    }

    /// Calls `method` on the peer with an encoded payload and a deadline: over
    /// the call stream for the frequent methods, as a unary call otherwise.
    pub async fn call(
        &self,
        target: ReplicaId,
        addr: &str,
        method: Method,
        payload: Vec<u8>,
        ttl: Duration,
    ) -> Result<Vec<u8>, tonic::Status> {
        let streamed = match method {
            Method::AppendEntries => CallMethod::AppendEntries,
            Method::Vote => CallMethod::Vote,
            Method::PreVote => CallMethod::PreVote,
            Method::Beacon => CallMethod::Beacon,
            Method::Propose => CallMethod::Propose,
            Method::InstallSnapshot | Method::Metrics => {
                return self.call_unary(target, addr, method, payload, ttl).await;
            }
        };
        // One deadline for opening the stream and the call.
        let deadline = tokio::time::Instant::now() + ttl;
        let stream = tokio::time::timeout_at(deadline, self.stream(target, addr))
            .await
            .map_err(|_| tonic::Status::unavailable("no call stream to the peer in time"))??;
        stream.call(streamed, payload, deadline).await
    }

    /// Calls `method` as a unary gRPC call of its own. AppendEntries and Vote
    /// have no unary form: they go over the call stream.
    pub async fn call_unary(
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
        request.set_timeout(ttl);
        let reply = match method {
            Method::InstallSnapshot => client.install_snapshot(request).await,
            Method::Propose => client.propose(request).await,
            Method::Metrics => client.metrics(request).await,
            Method::AppendEntries | Method::Vote | Method::PreVote | Method::Beacon => {
                return Err(tonic::Status::unimplemented(format!(
                    "{method:?} travels over the call stream only"
                )));
            }
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
                // A message over the transport limit: ask openraft for a smaller batch.
                tonic::Code::OutOfRange | tonic::Code::ResourceExhausted => {
                    RPCError::PayloadTooLarge(PayloadTooLarge::new_entries_hint(1))
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
    /// a replica that restarts hears from the leader before its own election
    /// timer fires (its pre-vote would be refused anyway: see
    /// [`crate::election`]), and a healed one catches up at once.
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
        if rpc.entries.len() > 1
            && let Some(fit) = entries_within_budget(&rpc)
        {
            return Err(RPCError::PayloadTooLarge(
                PayloadTooLarge::new_entries_hint(fit),
            ));
        }
        self.roundtrip(Method::AppendEntries, &rpc, option.hard_ttl())
            .await
            .map_err(paced)
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<ReplicaId>,
        option: RPCOption,
    ) -> Result<VoteResponse<ReplicaId>, RPCError<ReplicaId, ReplicaAddr, RaftError<ReplicaId>>>
    {
        self.roundtrip(Method::Vote, &rpc, option.hard_ttl())
            .await
            .map_err(paced)
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

/// An AppendEntries or Vote that failed at once for a reason no retry soon
/// mends (the peer's Raft stopped on a fatal error, refused our certificate,
/// or cannot read our messages) as `Unreachable`: openraft retries only
/// those after its backoff ([`UNREACHABLE_RETRY`]); any other error it
/// retries at once, as fast as the peer answers, for as long as it lasts.
fn paced(
    error: RPCError<ReplicaId, ReplicaAddr, RaftError<ReplicaId>>,
) -> RPCError<ReplicaId, ReplicaAddr, RaftError<ReplicaId>> {
    match error {
        RPCError::RemoteError(remote) => RPCError::Unreachable(Unreachable::new(&remote)),
        RPCError::Network(network) => RPCError::Unreachable(Unreachable::new(&network)),
        other => other,
    }
}

/// When the batch is over [`APPEND_BUDGET_BYTES`], how many leading entries fit
/// (at least one: a single large entry is sent alone); `None` when all fit.
fn entries_within_budget(rpc: &AppendEntriesRequest<TypeConfig>) -> Option<u64> {
    let sizes: Vec<usize> = rpc
        .entries
        .iter()
        .map(|e| postcard::experimental::serialized_size(e).unwrap_or(usize::MAX))
        .collect();
    if sizes.iter().fold(0usize, |sum, s| sum.saturating_add(*s)) <= APPEND_BUDGET_BYTES {
        return None;
    }
    let mut total = 0usize;
    let fit = sizes.iter().take_while(|s| {
        total = total.saturating_add(**s);
        total <= APPEND_BUDGET_BYTES
    });
    Some((fit.count() as u64).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer whose Raft stopped answers every AppendEntries at once: that
    /// answer must come back as `Unreachable`, the one error openraft
    /// retries only after its backoff, so the leader does not resend as fast
    /// as the peer answers. A too-large payload keeps its own meaning.
    #[test]
    fn immediate_refusals_are_paced_like_an_unreachable_peer() {
        let fatal: RaftError<ReplicaId> = RaftError::Fatal(openraft::error::Fatal::Panicked);
        let remote = RPCError::RemoteError(RemoteError::new(2, fatal));
        assert!(matches!(paced(remote), RPCError::Unreachable(_)));
        let refused = tonic::Status::permission_denied("not a controller");
        let network = RPCError::Network(NetworkError::new(&refused));
        assert!(matches!(paced(network), RPCError::Unreachable(_)));
        let large = RPCError::PayloadTooLarge(PayloadTooLarge::new_entries_hint(1));
        assert!(matches!(paced(large), RPCError::PayloadTooLarge(_)));
    }

    #[tokio::test]
    async fn one_channel_per_replica_and_a_new_address_replaces_the_old() {
        let network = PeerNetwork::new(ClientTlsConfig::new());
        network.channel(2, "127.0.0.1:7001").expect("channel");
        network.channel(2, "127.0.0.1:7001").expect("channel");
        network.channel(3, "127.0.0.1:7002").expect("channel");
        network.channel(2, "127.0.0.1:7101").expect("channel");
        let channels = network.channels.lock().expect("lock");
        assert_eq!(channels.len(), 2);
        assert_eq!(
            channels.get(&2).map(|(a, _)| a.as_str()),
            Some("127.0.0.1:7101")
        );
    }
}
