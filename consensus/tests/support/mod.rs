//! A cluster of real replicas on loopback for tests: each with its own sled
//! directory, peer port and certificate from a fresh development CA.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use corral_consensus::{ProposeError, RaftTiming, Replica, ReplicaAddr, ReplicaConfig, ReplicaId};
use corral_pki::{ClusterCa, TlsMaterial};
use corral_state::account::Account;
use corral_state::{Actor, Command, Role};
use tempfile::TempDir;

/// Generous bound for anything a test waits on; it only catches hangs.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Conservative timing: tests check behaviour, not failover speed, and CI runs
/// them in parallel on two cores, where tight timeouts would cause elections.
pub fn timing() -> RaftTiming {
    RaftTiming {
        heartbeat_ms: 50,
        election_min_ms: 300,
        election_max_ms: 600,
        snapshot_every_entries: 50,
        keep_entries_after_snapshot: 5,
        propose_timeout: Duration::from_secs(10),
        // Two loaded cores may stall a leader's heartbeats for a while.
        quorum_contact_timeout: Duration::from_secs(3),
        ..RaftTiming::default()
    }
}

/// The next port for a replica's first start: from a block of 2,000 below
/// the ephemeral range (32768 and up on Linux), chosen by this process's id,
/// so test processes running side by side rarely meet (a port in use is
/// skipped).
fn next_fixed_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let block = 12_000 + (std::process::id() % 10) as u16 * 2_000;
    block + NEXT.fetch_add(1, Ordering::Relaxed) % 2_000
}

pub struct TestCluster {
    pub ca: ClusterCa,
    pub dirs: BTreeMap<ReplicaId, TempDir>,
    pub addrs: BTreeMap<ReplicaId, SocketAddr>,
    pub replicas: BTreeMap<ReplicaId, Replica>,
    pub timing: RaftTiming,
    /// How long waits may take before a test fails (a hang, not a slow run).
    pub patience: Duration,
}

impl TestCluster {
    /// Starts `n` replicas (ids 1..=n) and bootstraps them as one cluster.
    pub async fn start(n: u64) -> Self {
        Self::start_with(n, timing()).await
    }

    /// [`TestCluster::start`] with `timing`.
    pub async fn start_with(n: u64, timing: RaftTiming) -> Self {
        let mut cluster = TestCluster {
            ca: ClusterCa::generate("test").unwrap(),
            dirs: BTreeMap::new(),
            addrs: BTreeMap::new(),
            replicas: BTreeMap::new(),
            timing,
            patience: PATIENCE,
        };
        for id in 1..=n {
            cluster.launch(id).await;
        }
        let members = (1..=n).map(|id| (id, cluster.addr_of(id))).collect();
        cluster.replicas[&1].initialize(members).await.unwrap();
        cluster
    }

    pub fn addr_of(&self, id: ReplicaId) -> ReplicaAddr {
        ReplicaAddr {
            peer: self.addrs[&id].to_string(),
            api: String::new(),
        }
    }

    /// Starts replica `id` (on its previous port and directory if it ran before).
    pub async fn launch(&mut self, id: ReplicaId) {
        let dir = self
            .dirs
            .entry(id)
            .or_insert_with(|| tempfile::tempdir().unwrap())
            .path()
            .to_path_buf();
        let tls = controller_tls(&self.ca, id);
        let config = |listen| ReplicaConfig {
            id,
            listen,
            data_dir: dir.clone(),
            tls: tls.clone(),
            timing: self.timing.clone(),
            cluster_name: "test".into(),
            clock: None,
            source: None,
        };
        let replica = match self.addrs.get(&id) {
            Some(listen) => Replica::start(config(*listen)).await.unwrap(),
            // A first start takes a port below the kernel's ephemeral range,
            // so that no other socket (an outgoing connection, another test's
            // port 0) can take it while this replica is down for a restart.
            None => loop {
                let listen = SocketAddr::from(([127, 0, 0, 1], next_fixed_port()));
                match Replica::start(config(listen)).await {
                    Ok(replica) => break replica,
                    Err(e) if e.to_string().contains("in use") => continue,
                    Err(e) => panic!("replica {id} did not start: {e}"),
                }
            },
        };
        self.addrs.insert(id, replica.peer_addr());
        self.replicas.insert(id, replica);
    }

    /// Stops replica `id` cleanly (its storage stays).
    pub async fn stop(&mut self, id: ReplicaId) {
        if let Some(replica) = self.replicas.remove(&id) {
            replica.shutdown().await;
        }
    }

    /// Waits until a running replica leads (the one of the highest term, should
    /// an old leader not yet know it was replaced) and returns it.
    pub async fn leader(&self) -> ReplicaId {
        let deadline = Instant::now() + self.patience;
        loop {
            let leading = self
                .replicas
                .iter()
                .filter(|(_, r)| r.leadership().borrow().is_self)
                .max_by_key(|(_, r)| r.leadership().borrow().term)
                .map(|(id, _)| *id);
            if let Some(leader) = leading {
                return leader;
            }
            assert!(
                Instant::now() < deadline,
                "no leader within {:?}",
                self.patience
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Proposes through whichever replica leads, retrying while leadership moves.
    pub async fn propose(&self, command: Command) -> Result<(), ProposeError> {
        let deadline = Instant::now() + self.patience;
        loop {
            let leader = self.leader().await;
            match self.replicas[&leader].propose(command.clone()).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(rejection)) => panic!("command refused by the state machine: {rejection}"),
                Err(ProposeError::NotLeader { .. }) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits until every running replica has applied the same index, then returns
    /// their digests.
    pub async fn converged_digests(&self) -> BTreeMap<ReplicaId, corral_state::StateDigest> {
        let deadline = Instant::now() + self.patience;
        loop {
            let applied: BTreeSet<Option<u64>> =
                self.replicas.values().map(|r| r.last_applied()).collect();
            let lag = self
                .replicas
                .values()
                .any(|r| !r.metrics().follower_lag.values().all(|l| *l == 0));
            if applied.len() == 1 && !lag {
                return self
                    .replicas
                    .iter()
                    .map(|(id, r)| (*id, r.state_digest().unwrap()))
                    .collect();
            }
            assert!(
                Instant::now() < deadline,
                "replicas did not converge: applied {applied:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn shutdown(mut self) {
        let ids: Vec<ReplicaId> = self.replicas.keys().copied().collect();
        for id in ids {
            self.stop(id).await;
        }
    }
}

/// TLS material for replica `id`: a controller certificate for the loopback.
pub fn controller_tls(ca: &ClusterCa, id: ReplicaId) -> TlsMaterial {
    ca.material(
        corral_pki::Role::Controller,
        &format!("controller-{id}"),
        &["127.0.0.1", "localhost"],
    )
    .unwrap()
}

pub fn admin() -> Actor {
    Actor {
        user: "root".into(),
        role: Role::Admin,
    }
}

/// A small, always-valid command that leaves a visible mark: account `name`.
pub fn mark(name: &str) -> Command {
    let account = Account {
        name: name.into(),
        parent: Some("root".into()),
        shares: 1,
        default_qos: None,
        description: String::new(),
        limits: Default::default(),
    };
    Command::SetAccount {
        account,
        by: admin(),
    }
}
