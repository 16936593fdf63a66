//! One controller replica: sled storage, the Raft node, the peer gRPC server and
//! the proposer, behind the small API the controller uses: propose, linearizable
//! read, a watch of leadership, membership changes and metrics.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use corral_pki::TlsMaterial;
use corral_state::{ClusterState, Command, Outcome, Rejection};
use openraft::error::{InitializeError, RaftError};
use openraft::{ChangeMembers, Config, ServerState, SnapshotPolicy};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

use crate::codec::MAX_MESSAGE_BYTES;
use crate::core_watch::CoreWatch;
use crate::election::beacon::{BeaconTiming, LeaderBeacon};
use crate::election::judge::Judge;
use crate::election::timer::ElectionTiming;
use crate::error::{MembershipError, ProposeError, ReadError, StartError};
use crate::flusher::Flusher;
use crate::leadership::Followed;
pub use crate::leadership::Leadership;
use crate::network::PeerNetwork;
use crate::pb::peer_server::PeerServer;
use crate::peer_service::PeerService;
use crate::proposer::{Clock, Proposer, Results};
use crate::state_machine::StateMachineStore;
use crate::storage::Storage;
use crate::types::{Raft, ReplicaAddr, ReplicaId};
use crate::wal::Wal;

/// sled's segment size (fixed when a database is created: sled refuses to open
/// one made with another size).
const SLED_SEGMENT_BYTES: usize = 8 << 20;
/// sled's default segment size, which databases made before 8 MiB keep.
const SLED_DEFAULT_SEGMENT_BYTES: usize = 512 << 10;

/// Opens (or creates) a replica's sled database (vote, purge point; the log's
/// entries are in the [`crate::wal`], the snapshot in [`crate::snapshot_file`]).
///
/// Only our flusher thread fsyncs: sled's own periodic flush is off. New
/// databases get 8 MiB segments (from when the log was in sled and its pages
/// outgrew the default 512 KiB ones); sled fixes the size when it creates a
/// database, so one made with the default opens with it.
///
/// sled's background writes can hold a database it has just closed for a
/// moment (a job on its I/O threads keeps the locked file open), so a lock held
/// by this process is waited for, up to [`LOCK_PATIENCE`]; a lock held by
/// another process is refused after the same wait.
pub fn open_database(dir: &std::path::Path) -> Result<sled::Db, sled::Error> {
    let open = |segment: usize| {
        sled::Config::new()
            .path(dir)
            .flush_every_ms(None)
            .segment_size(segment)
            .open()
    };
    let deadline = std::time::Instant::now() + LOCK_PATIENCE;
    loop {
        let opened = match open(SLED_SEGMENT_BYTES) {
            Err(sled::Error::Unsupported(_)) => open(SLED_DEFAULT_SEGMENT_BYTES),
            opened => opened,
        };
        match opened {
            Err(sled::Error::Io(e))
                if e.to_string().contains("could not acquire lock")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            opened => return opened,
        }
    }
}

/// How long opening a database waits for its lock.
pub const LOCK_PATIENCE: Duration = Duration::from_secs(2);

/// Raft timing and log retention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftTiming {
    /// Leader heartbeat period, ms.
    pub heartbeat_ms: u64,
    /// Election timeout lower bound, ms.
    pub election_min_ms: u64,
    /// Election timeout upper bound, ms.
    pub election_max_ms: u64,
    /// Take a snapshot after this many entries since the last one.
    pub snapshot_every_entries: u64,
    /// Entries kept behind a snapshot (lets slightly lagging followers catch up
    /// from the log instead of a snapshot).
    pub keep_entries_after_snapshot: u64,
    /// Per-chunk timeout when sending a snapshot, ms.
    pub install_snapshot_timeout_ms: u64,
    /// How long a proposal may wait for commit before its outcome is unknown.
    pub propose_timeout: Duration,
    /// A leader that no quorum has acknowledged for this long refuses proposals
    /// at once (openraft 0.9 has no check-quorum: see [`crate::leadership`]).
    pub quorum_contact_timeout: Duration,
    /// The longest a replica's Raft core may be held (by its disk: openraft
    /// 0.9 waits for every append's fsync) and still be vouched for by the
    /// leader's beacon ([`crate::election::beacon`]); past it a leader is
    /// replaced by one that can commit.
    pub core_hold_limit: Duration,
}

impl Default for RaftTiming {
    fn default() -> Self {
        // A follower that knows a leader waits leader lease (= election_max) plus a
        // random timeout before standing, so failover takes max + [min, max] plus
        // one round trip: 300-400 ms here (measured by `corral-bench failover`).
        RaftTiming {
            heartbeat_ms: 30,
            election_min_ms: 100,
            election_max_ms: 200,
            snapshot_every_entries: 10_000,
            keep_entries_after_snapshot: 1_000,
            install_snapshot_timeout_ms: 10_000,
            propose_timeout: Duration::from_secs(5),
            quorum_contact_timeout: Duration::from_secs(1),
            core_hold_limit: Duration::from_secs(3),
        }
    }
}

/// How long a membership change may take before the caller is answered
/// that it did not finish (it may still).
const MEMBERSHIP_PATIENCE: Duration = Duration::from_secs(60);

/// What openraft answers a membership change with.
type ClientWriteResponse = openraft::raft::ClientWriteResponse<crate::types::TypeConfig>;
type ClientWriteFailure =
    RaftError<ReplicaId, openraft::error::ClientWriteError<ReplicaId, ReplicaAddr>>;

/// How to start a replica.
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
    /// This replica's id.
    pub id: ReplicaId,
    /// Where to listen for peers (port 0 picks one).
    pub listen: SocketAddr,
    /// The directory holding this replica's sled database.
    pub data_dir: PathBuf,
    /// Peer TLS material: the cluster CA and this controller's certificate (role
    /// `controller`, SANs naming its peer address host).
    pub tls: TlsMaterial,
    /// Raft timing.
    pub timing: RaftTiming,
    /// Name checked by openraft in every message, so two clusters never mix.
    pub cluster_name: String,
    /// The clock that stamps every command this replica's proposer puts in
    /// the log (only the leader's proposer does), so that whichever replica a
    /// client reached, time is the leader's; `None` keeps the callers' stamps.
    pub clock: Option<Clock>,
    /// The address this replica's connections to its peers come from; `None`
    /// lets the kernel choose.
    pub source: Option<std::net::IpAddr>,
}

/// The role a leader that no majority answers reports: it has stepped down
/// (refuses proposals, sends no heartbeats) until a majority answers again or
/// it hears the next term's leader.
pub const STEPPED_DOWN_ROLE: &str = "SteppedDown";

/// A replica's Raft position and storage figures.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplicaMetrics {
    /// This replica.
    pub id: ReplicaId,
    /// Its Raft role: Leader, Follower, Candidate, Learner or Shutdown.
    pub role: String,
    /// The current term.
    pub term: u64,
    /// The leader, if known.
    pub leader: Option<ReplicaId>,
    /// Index of the last log entry.
    pub last_log_index: Option<u64>,
    /// Index of the last applied entry.
    pub last_applied: Option<u64>,
    /// Index covered by the last snapshot.
    pub snapshot: Option<u64>,
    /// Index up to which the log was purged.
    pub purged: Option<u64>,
    /// On the leader: entries each follower lags behind the leader's log.
    pub follower_lag: BTreeMap<ReplicaId, u64>,
    /// Voters and learners.
    pub voters: BTreeSet<ReplicaId>,
    /// fsyncs performed, and requests they answered (their ratio is the group commit).
    pub fsyncs: u64,
    /// Durability requests answered.
    pub fsync_requests: u64,
    /// Time spent in fsync, microseconds.
    pub fsync_micros: u64,
    /// Bytes the database, the log's segments and the snapshot take on disk.
    pub disk_bytes: u64,
    /// This replica's wall clock when the figures were taken, ms since the
    /// epoch (how the leader sees its followers' clocks).
    pub clock_ms: u64,
}

/// A consistent copy of the cluster state ([`Replica::backup`]).
#[derive(Debug, Clone)]
pub struct StateCopy {
    /// The state, in `corral_state::snapshot`'s encoding.
    pub snapshot: Vec<u8>,
    /// The index of the last log entry it had applied.
    pub index: u64,
    /// The term of the leader that took it.
    pub term: u64,
}

/// A member of the Raft group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its id.
    pub id: ReplicaId,
    /// Its addresses.
    pub addr: ReplicaAddr,
    /// True for voters, false for learners.
    pub voter: bool,
}

/// The storage handles the metrics read.
#[derive(Clone)]
struct StorageFigures {
    flusher: Arc<Flusher>,
    db: sled::Db,
    wal: Arc<Wal>,
    state: StateMachineStore,
}

/// A running replica.
pub struct Replica {
    id: ReplicaId,
    raft: Raft,
    state: StateMachineStore,
    proposer: Arc<Proposer>,
    network: PeerNetwork,
    storage: StorageFigures,
    peer_addr: SocketAddr,
    leadership: watch::Receiver<Leadership>,
    stale: watch::Receiver<bool>,
    stop_server: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
    elector: JoinHandle<()>,
    /// Set by [`Replica::leave_raft`]: Raft is stopped already.
    left_raft: std::sync::atomic::AtomicBool,
    storage_closed: watch::Receiver<bool>,
}

impl Replica {
    /// Opens storage, starts Raft and serves peers.
    pub async fn start(config: ReplicaConfig) -> Result<Self, StartError> {
        corral_pki::install_crypto_provider();
        // Opening reads the whole log back and may wait for sled's lock.
        let dir = config.data_dir.clone();
        let Storage {
            db,
            flusher,
            wal,
            log,
            state,
        } = tokio::task::spawn_blocking(move || Storage::open(&dir))
            .await
            .map_err(|e| StartError::Raft(format!("opening storage panicked: {e}")))??;
        let network = PeerNetwork::new(config.tls.client_config()).with_source(config.source);
        let timing = &config.timing;
        let raft_config = Config {
            cluster_name: config.cluster_name.clone(),
            heartbeat_interval: timing.heartbeat_ms,
            election_timeout_min: timing.election_min_ms,
            election_timeout_max: timing.election_max_ms,
            install_snapshot_timeout: timing.install_snapshot_timeout_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(timing.snapshot_every_entries),
            max_in_snapshot_log_to_keep: timing.keep_entries_after_snapshot,
            snapshot_max_chunk_size: 4 * 1024 * 1024,
            max_payload_entries: 64,
            // The fewest entries purged at once: purge soon after each snapshot.
            purge_batch_size: (timing.snapshot_every_entries / 4).clamp(1, 1024),
            // Elections start only after a pre-vote round (crate::election).
            enable_elect: false,
            ..Default::default()
        }
        .validate()
        .map_err(|e| StartError::Raft(e.to_string()))?;
        let election_timing = ElectionTiming {
            lease: Duration::from_millis(raft_config.election_timeout_max),
            timeout_min: Duration::from_millis(raft_config.election_timeout_min),
            timeout_max: Duration::from_millis(raft_config.election_timeout_max),
        };
        let log_reader = log.clone();
        let raft = Raft::new(
            config.id,
            Arc::new(raft_config),
            network.clone(),
            log,
            state.clone(),
        )
        .await
        .map_err(|e| StartError::Raft(e.to_string()))?;
        let (beacon_acks, followed_beacons) = watch::channel(None);
        let Followed {
            leadership,
            stale,
            raft_contact,
        } = crate::leadership::follow(
            &raft,
            config.id,
            timing.quorum_contact_timeout,
            followed_beacons,
        );
        let core = CoreWatch::start(&raft);
        let proposer = Proposer::start(
            raft.clone(),
            timing.propose_timeout,
            stale.clone(),
            config.clock.clone(),
        );

        // Nagle off on accepted sockets too (the builder's setting does not reach a
        // caller-supplied listener): small Raft messages must not wait for
        // delayed ACKs, which cost 40 ms each on Linux.
        let incoming = TcpIncoming::bind(config.listen)
            .map_err(|e| StartError::Peer(format!("cannot listen on {}: {e}", config.listen)))?
            .with_nodelay(Some(true));
        let peer_addr = incoming
            .local_addr()
            .map_err(|e| StartError::Peer(e.to_string()))?;
        let storage = StorageFigures {
            flusher,
            db,
            wal,
            state: state.clone(),
        };
        let metrics = {
            let (raft, storage, id, stale) =
                (raft.clone(), storage.clone(), config.id, stale.clone());
            Arc::new(move || collect_metrics(id, &raft, &storage, *stale.borrow()))
        };
        let judge = Judge::new(
            config.id,
            raft.clone(),
            log_reader,
            election_timing.lease,
            stale.clone(),
            (core.clone(), timing.core_hold_limit),
        );
        let (closing, closing_watch) = watch::channel(false);
        let service = PeerServer::new(PeerService::new(
            raft.clone(),
            Arc::clone(&proposer),
            metrics,
            judge.clone(),
            closing_watch,
        ))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let service = InterceptedService::new(service, crate::tls::controllers_only);
        let builder = Server::builder()
            .tls_config(config.tls.server_config())
            .map_err(|e| StartError::Peer(format!("peer TLS: {e}")))?;
        // Spawned once nothing can fail any more: it holds Raft and the log.
        let beacon = LeaderBeacon {
            id: config.id,
            raft: raft.clone(),
            network: network.clone(),
            core,
            timing: BeaconTiming::new(
                Duration::from_millis(timing.heartbeat_ms),
                election_timing.lease,
                timing.core_hold_limit,
            ),
        };
        tokio::spawn(beacon.run(leadership.clone(), raft_contact, beacon_acks));
        let elector = tokio::spawn(crate::election::elector::run(
            config.id,
            raft.clone(),
            network.clone(),
            judge,
            election_timing,
            leadership.clone(),
        ));
        let (stop_server, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
                // End the open call streams, or graceful shutdown waits for them.
                closing.send_replace(true);
            };
            if let Err(e) = builder
                .tcp_nodelay(true)
                .http2_keepalive_interval(Some(crate::network::KEEP_ALIVE_INTERVAL))
                .http2_keepalive_timeout(Some(crate::network::KEEP_ALIVE_TIMEOUT))
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, shutdown)
                .await
            {
                tracing::error!("peer server stopped: {e}");
            }
        });
        let storage_closed = storage.flusher.closed();
        Ok(Replica {
            id: config.id,
            raft,
            state,
            proposer,
            network,
            storage,
            peer_addr,
            leadership,
            stale,
            stop_server: Some(stop_server),
            server: Some(server),
            elector,
            left_raft: std::sync::atomic::AtomicBool::new(false),
            storage_closed,
        })
    }

    /// Tests: holds every sync of this replica's log for `hold` from now, as
    /// a loaded or failing disk does (openraft's core waits for them).
    #[cfg(feature = "testkit")]
    pub fn hold_log_syncs(&self, hold: Duration) {
        self.storage
            .flusher
            .hold_log_syncs(std::time::Instant::now() + hold);
    }

    /// This replica's id.
    pub fn id(&self) -> ReplicaId {
        self.id
    }

    /// The address peers reach this replica at (useful with port 0).
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer_addr
    }

    /// Bootstraps a new cluster with `members` as voters. Call on one replica,
    /// once; calling it on an initialized cluster is a harmless no-op.
    pub async fn initialize(
        &self,
        members: BTreeMap<ReplicaId, ReplicaAddr>,
    ) -> Result<(), MembershipError> {
        match self.raft.initialize(members).await {
            Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(e) => Err(MembershipError::Refused(e.to_string())),
        }
    }

    /// Proposes one command and waits for its result. `NotLeader` names the
    /// leader to send it to; `Timeout` means the outcome is unknown.
    pub async fn propose(
        &self,
        command: Command,
    ) -> Result<Result<Outcome, Rejection>, ProposeError> {
        let mut results = self.proposer.propose(vec![command]).await?;
        results
            .pop()
            .ok_or_else(|| ProposeError::Unavailable("the entry returned no result".into()))
    }

    /// Proposes commands applied in order within one entry.
    pub async fn propose_all(&self, commands: Vec<Command>) -> Results {
        self.proposer.propose(commands).await
    }

    /// Proposes through the leader: locally when this replica leads, otherwise
    /// forwarded over the peer connection (`Propose` RPC).
    pub async fn propose_via_leader(&self, commands: Vec<Command>) -> Results {
        match self.proposer.propose(commands.clone()).await {
            Err(ProposeError::NotLeader {
                leader: Some((id, addr)),
            }) if id != self.id => {
                let payload = crate::codec::encode(&commands)
                    .map_err(|e| ProposeError::Unavailable(e.to_string()))?;
                let timeout = Duration::from_secs(10);
                // A leader that stops answering (paused, cut off) is replaced
                // within a second: stop waiting for it then, the caller retries
                // at the new one (the proposal's fate at the old one is unknown).
                let mut leadership = self.leadership.clone();
                let replaced = async move {
                    let closed = leadership
                        .wait_for(|l| l.leader.as_ref().is_some_and(|(now, _)| *now != id))
                        .await
                        .is_err();
                    if closed {
                        std::future::pending::<()>().await;
                    }
                };
                let forwarded = self.network.call(
                    id,
                    &addr.peer,
                    crate::network::Method::Propose,
                    payload,
                    timeout,
                );
                let reply = tokio::select! {
                    reply = forwarded => reply.map_err(|status| forward_error(&status, timeout))?,
                    () = replaced => {
                        return Err(ProposeError::Lost(format!(
                            "replica {id} stopped leading while it held the forwarded proposal"
                        )));
                    }
                };
                crate::codec::decode::<Results>(&reply).map_err(|e| {
                    ProposeError::Lost(format!("the leader's answer does not decode: {e}"))
                })?
            }
            other => other,
        }
    }

    /// Reads the state linearizably: confirms leadership with a quorum, waits
    /// until everything committed before the read is applied, then runs `read`.
    pub async fn read<T>(&self, read: impl FnOnce(&ClusterState) -> T) -> Result<T, ReadError> {
        self.confirm_linearizable().await?;
        self.state
            .read(read)
            .map_err(|e| ReadError::Unavailable(e.to_string()))
    }

    /// Confirms leadership with a quorum and waits until everything
    /// committed before the call is applied here.
    async fn confirm_linearizable(&self) -> Result<(), ReadError> {
        match self.raft.ensure_linearizable().await {
            Ok(_) => Ok(()),
            Err(error) => Err(match error.forward_to_leader() {
                Some(forward) => ReadError::NotLeader {
                    leader: forward.leader_id.zip(forward.leader_node.clone()),
                },
                None => ReadError::Unavailable(error.to_string()),
            }),
        }
    }

    /// A consistent copy of the state for a backup, taken linearizably
    /// (leadership confirmed with a quorum, everything committed before the
    /// call applied): the state's snapshot encoding, the index of the last
    /// entry it had applied and the term of this leader.
    pub async fn backup(&self) -> Result<StateCopy, ReadError> {
        self.confirm_linearizable().await?;
        let term = self.raft.metrics().borrow().current_term;
        let (snapshot, at) = self
            .state
            .encode_applied()
            .await
            .map_err(|e| ReadError::Unavailable(e.to_string()))?;
        Ok(StateCopy {
            snapshot,
            index: at.map_or(0, |id| id.index),
            term,
        })
    }

    /// Reads this replica's applied state without checking leadership (may be
    /// behind the leader: fine for listing, not for decisions).
    pub fn read_local<T>(&self, read: impl FnOnce(&ClusterState) -> T) -> Result<T, ReadError> {
        self.state
            .read(read)
            .map_err(|e| ReadError::Unavailable(e.to_string()))
    }

    /// Like `read_local`, for work that takes long on a large state (a
    /// scheduling pass, a copy of the state): on a blocking thread, with
    /// applies waiting for it without holding a runtime thread.
    pub async fn read_local_long<T: Send + 'static>(
        &self,
        read: impl FnOnce(&ClusterState) -> T + Send + 'static,
    ) -> Result<T, ReadError> {
        self.state
            .read_long(read)
            .await
            .map_err(|e| ReadError::Unavailable(e.to_string()))
    }

    /// A watch of who leads.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.leadership.clone()
    }

    /// A watch of whether this replica leads without having heard from a
    /// quorum for longer than `quorum_contact_timeout` (it may be cut off):
    /// it then refuses proposals, and the controller refuses agents.
    pub fn leads_without_quorum(&self) -> watch::Receiver<bool> {
        self.stale.clone()
    }

    /// Adds a replica as a learner (it receives the log but does not vote) and
    /// waits until it has caught up.
    pub async fn add_learner(
        &self,
        id: ReplicaId,
        addr: ReplicaAddr,
    ) -> Result<(), MembershipError> {
        self.require_leader()?;
        let change = self.raft.add_learner(id, addr, true);
        self.bounded(change, || {
            format!(
                "replica {id} did not catch up within {} s (is it running and reachable?); \
                 it may still join: see `corral cluster`",
                MEMBERSHIP_PATIENCE.as_secs()
            )
        })
        .await
    }

    /// Makes `voters` the voting members (each must already be a member or a
    /// learner). Removed voters stay learners when `keep_as_learners` is set.
    pub async fn change_voters(
        &self,
        voters: BTreeSet<ReplicaId>,
        keep_as_learners: bool,
    ) -> Result<(), MembershipError> {
        self.require_leader()?;
        let change = self
            .raft
            .change_membership(ChangeMembers::ReplaceAllVoters(voters), keep_as_learners);
        self.bounded(change, || {
            format!(
                "the change did not commit within {} s (has the leader lost its quorum?); \
                 it may still commit: see `corral cluster`",
                MEMBERSHIP_PATIENCE.as_secs()
            )
        })
        .await
    }

    /// Waits for a membership change at most [`MEMBERSHIP_PATIENCE`]; past
    /// it the change is refused with `timed_out`'s words.
    async fn bounded(
        &self,
        change: impl std::future::Future<Output = Result<ClientWriteResponse, ClientWriteFailure>>,
        timed_out: impl FnOnce() -> String,
    ) -> Result<(), MembershipError> {
        match tokio::time::timeout(MEMBERSHIP_PATIENCE, change).await {
            Ok(result) => result.map(|_| ()).map_err(|e| self.membership_error(e)),
            Err(_) => Err(MembershipError::Refused(timed_out())),
        }
    }

    /// Refuses a membership change on any replica but the leader, naming the
    /// leader when known. openraft checks a change against the replica's own
    /// view before it checks leadership, and a replica removed before it
    /// heard the removal commit keeps an unfinished change in its view for
    /// good: asked there, a change would be refused as "already undergoing a
    /// configuration change" instead of sent to the leader.
    fn require_leader(&self) -> Result<(), MembershipError> {
        let metrics = self.raft.metrics().borrow().clone();
        // A leader no quorum answers could not commit the change.
        if metrics.current_leader == Some(self.id) && !*self.stale.borrow() {
            return Ok(());
        }
        let leader = metrics.current_leader.and_then(|id| {
            metrics
                .membership_config
                .membership()
                .get_node(&id)
                .map(|addr| (id, addr.clone()))
        });
        Err(MembershipError::NotLeader { leader })
    }

    /// What a refused membership change means: not the leader (this replica
    /// lost leadership meanwhile), a change still being committed (worth
    /// another try), or a refusal.
    fn membership_error(&self, error: ClientWriteFailure) -> MembershipError {
        if let Some(forward) = error.forward_to_leader() {
            return MembershipError::NotLeader {
                leader: forward.leader_id.zip(forward.leader_node.clone()),
            };
        }
        if let Err(not_leader) = self.require_leader() {
            return not_leader;
        }
        match error.api_error() {
            Some(openraft::error::ClientWriteError::ChangeMembershipError(
                openraft::error::ChangeMembershipError::InProgress(_),
            )) => MembershipError::InProgress(error.to_string()),
            _ => MembershipError::Refused(error.to_string()),
        }
    }

    /// Takes a snapshot now (also taken automatically every `snapshot_every_entries`).
    pub async fn snapshot(&self) -> Result<(), String> {
        self.raft
            .trigger()
            .snapshot()
            .await
            .map_err(|e| e.to_string())
    }

    /// Raft position, follower lag and storage figures.
    pub fn metrics(&self) -> ReplicaMetrics {
        collect_metrics(self.id, &self.raft, &self.storage, *self.stale.borrow())
    }

    /// Another member's metrics, asked over the peer connection.
    pub async fn peer_metrics(&self, id: ReplicaId) -> Result<ReplicaMetrics, String> {
        let member = self
            .members()
            .into_iter()
            .find(|m| m.id == id)
            .ok_or_else(|| format!("replica {id} is not a member"))?;
        self.network
            .metrics(id, &member.addr.peer, Duration::from_secs(2))
            .await
    }

    /// Every member (voters and learners) with its addresses, as this replica's
    /// latest membership entry says, and whether it votes.
    pub fn members(&self) -> Vec<Member> {
        let metrics = self.raft.metrics().borrow().clone();
        let membership = metrics.membership_config.membership();
        let voters: BTreeSet<ReplicaId> = membership.voter_ids().collect();
        membership
            .nodes()
            .map(|(id, addr)| Member {
                id: *id,
                addr: addr.clone(),
                voter: voters.contains(id),
            })
            .collect()
    }

    /// On the leader: how many entries `follower` lags behind this replica's log,
    /// or `None` when it has not acknowledged any (unreachable, or not a member)
    /// or this replica does not lead.
    pub fn follower_lag(&self, follower: ReplicaId) -> Option<u64> {
        let metrics = self.raft.metrics().borrow().clone();
        let last = metrics.last_log_index.unwrap_or(0);
        let matched = metrics
            .replication
            .as_ref()?
            .get(&follower)?
            .as_ref()?
            .index;
        Some(last.saturating_sub(matched))
    }

    /// A digest of the applied state, for comparing replicas.
    pub fn state_digest(&self) -> Option<corral_state::StateDigest> {
        self.state.read(|s| s.digest()).ok()
    }

    /// Raft's own term and whether Raft has this replica lead, as of now:
    /// ahead of [`Replica::leadership`], which publishes a new term a moment
    /// later (and a leader only once it is not stale), while Raft already
    /// takes proposals.
    pub fn raft_standing(&self) -> (u64, bool) {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        (m.current_term, m.state == ServerState::Leader)
    }

    /// The index of the last entry in this replica's log (applied or not).
    pub fn last_log_index(&self) -> Option<u64> {
        self.raft.metrics().borrow().last_log_index
    }

    /// The index of the last applied entry.
    pub fn last_applied(&self) -> Option<u64> {
        self.state.last_applied().map(|l| l.index)
    }

    /// Stops taking part in Raft at once (a controller that is stopping):
    /// a leader stops sending heartbeats, so the others elect a new one
    /// within an election timeout instead of waiting for this process to
    /// finish closing its sessions. Everything else keeps its state until
    /// [`Replica::shutdown`]; proposals and linearizable reads fail.
    pub async fn leave_raft(&self) {
        self.proposer.stop();
        self.elector.abort();
        self.left_raft
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = self.raft.shutdown().await;
    }

    /// Stops Raft and the peer server and closes storage. After this returns the
    /// data directory may be opened again (tasks that still held the stores are
    /// waited for, up to 10 s).
    pub async fn shutdown(self) {
        let Replica {
            raft,
            state,
            proposer,
            network,
            storage,
            leadership,
            stop_server,
            server,
            elector,
            left_raft,
            mut storage_closed,
            ..
        } = self;
        elector.abort();
        let _ = elector.await;
        if !left_raft.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = raft.shutdown().await;
        }
        if let Some(stop) = stop_server {
            let _ = stop.send(());
        }
        if let Some(server) = server {
            let _ = server.await;
        }
        drop((raft, state, proposer, network, storage, leadership));
        let closed = storage_closed.wait_for(|closed| *closed);
        if tokio::time::timeout(Duration::from_secs(10), closed)
            .await
            .is_err()
        {
            tracing::warn!("replica storage still held 10 s after shutdown");
        }
    }
}

fn collect_metrics(
    id: ReplicaId,
    raft: &Raft,
    storage: &StorageFigures,
    stepped_down: bool,
) -> ReplicaMetrics {
    let m = raft.metrics().borrow().clone();
    let last = m.last_log_index.unwrap_or(0);
    let follower_lag = m
        .replication
        .as_ref()
        .map(|r| {
            r.iter()
                .map(|(id, matched)| (*id, last.saturating_sub(matched.map_or(0, |l| l.index))))
                .collect()
        })
        .unwrap_or_default();
    let stats = storage.flusher.stats();
    ReplicaMetrics {
        id,
        // A leader no majority answers has stepped down (crate::leadership),
        // whatever openraft still calls it until it hears the next term.
        role: if stepped_down && m.state == ServerState::Leader {
            STEPPED_DOWN_ROLE.to_string()
        } else {
            format!("{:?}", m.state)
        },
        term: m.current_term,
        leader: m.current_leader,
        last_log_index: m.last_log_index,
        last_applied: m.last_applied.map(|l| l.index),
        snapshot: m.snapshot.map(|l| l.index),
        purged: m.purged.map(|l| l.index),
        follower_lag,
        voters: m.membership_config.membership().voter_ids().collect(),
        fsyncs: stats.flushes.load(Ordering::Relaxed),
        fsync_requests: stats.requests.load(Ordering::Relaxed),
        fsync_micros: stats.micros.load(Ordering::Relaxed),
        disk_bytes: storage.db.size_on_disk().unwrap_or(0)
            + storage.wal.disk_bytes()
            + storage.state.snapshot_disk_bytes(),
        clock_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    }
}

/// What a failed forward to the leader means for the proposal. Only a leader that
/// could not be reached (`Unavailable`) certainly took nothing; any other failure
/// came after the leader may have committed it, so its fate is unknown.
fn forward_error(status: &tonic::Status, timeout: Duration) -> ProposeError {
    match status.code() {
        tonic::Code::Unavailable => ProposeError::Unavailable(format!(
            "forwarding to the leader failed: {}",
            status.message()
        )),
        tonic::Code::DeadlineExceeded => ProposeError::Timeout(timeout.as_millis() as u64),
        _ => ProposeError::Lost(format!(
            "forwarding to the leader failed: {}",
            status.message()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forward_that_failed_after_sending_is_not_reported_as_safe_to_retry() {
        let timeout = Duration::from_secs(10);
        let refused = tonic::Status::unavailable("connection refused");
        assert!(matches!(
            forward_error(&refused, timeout),
            ProposeError::Unavailable(_)
        ));
        // A reset connection, or the leader's server enforcing the deadline,
        // comes after the leader got the proposal.
        for status in [
            tonic::Status::unknown("connection reset by peer"),
            tonic::Status::cancelled("Timeout expired"),
            tonic::Status::internal("h2 protocol error"),
        ] {
            assert!(
                matches!(forward_error(&status, timeout), ProposeError::Lost(_)),
                "{status:?}"
            );
        }
        assert_eq!(
            forward_error(&tonic::Status::deadline_exceeded("late"), timeout),
            ProposeError::Timeout(10_000)
        );
    }

    #[test]
    fn a_database_from_an_earlier_build_opens_with_its_own_segment_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let earlier = sled::Config::new().path(dir.path()).open().expect("sled");
            earlier.insert(b"vote", b"term 7".to_vec()).expect("insert");
            earlier.flush().expect("flush");
        }
        let db = open_database(dir.path()).expect("the earlier database");
        assert_eq!(
            db.get(b"vote").expect("read").as_deref(),
            Some(&b"term 7"[..])
        );
        drop(db);

        let fresh = tempfile::tempdir().expect("tempdir");
        drop(open_database(fresh.path()).expect("a new database"));
        drop(open_database(fresh.path()).expect("reopened with the same settings"));
    }
}
