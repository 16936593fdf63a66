//! Regressions from the review of the consensus layer. Each failed before its fix.
//! The large-entry ones need a release build to run at production timing:
//! `cargo test --release -p corral-consensus --test review_regressions -- --ignored`
//! (`.ci/run` does).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, unused_imports)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_consensus::state_machine::StateMachineStore;
use corral_consensus::storage::Storage;
use corral_consensus::types::{Entry, LogId, Proposal, StoredMembership};
use corral_consensus::{ProposeError, RaftTiming, ReplicaAddr};
use corral_state::account::Account;
use corral_state::{ClusterState, Command};
use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::{CommittedLeaderId, EntryPayload, RaftLogReader, RaftSnapshotBuilder, SnapshotMeta};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A size knob for a test: the environment variable `name`, else `default`.
fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Proposes `n` marks of `kib` KiB each through the leader.
async fn write_big_marks(cluster: &TestCluster, n: usize, kib: usize) {
    for i in 0..n {
        cluster
            .propose(big_mark(&format!("b{i}"), kib * 1024))
            .await
            .unwrap();
    }
}

fn big_mark(name: &str, bytes: usize) -> Command {
    Command::SetAccount {
        account: Account {
            name: name.into(),
            parent: Some("root".into()),
            shares: 1,
            default_qos: None,
            description: "x".repeat(bytes),
            limits: Default::default(),
        },
        by: admin(),
    }
}

async fn start_with(n: u64, timing: RaftTiming) -> TestCluster {
    let mut cluster = TestCluster {
        ca: corral_pki::ClusterCa::generate("probe").unwrap(),
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

fn prod_timing() -> RaftTiming {
    RaftTiming {
        propose_timeout: Duration::from_secs(10),
        ..RaftTiming::default()
    }
}

/// P1: a follower that missed ~70 MiB of entries (70 x 1 MiB) never catches up:
/// openraft bounds every AppendEntries by heartbeat_interval (30 ms) and sends
/// max_payload_entries (64) entries per RPC.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a release build: cargo test --release -p corral-consensus --test review_regressions -- --ignored"]
async fn p1_lagging_follower_with_big_entries_catches_up() {
    let mut cluster = start_with(3, prod_timing()).await;
    cluster.propose(mark("early")).await.unwrap();
    let leader = cluster.leader().await;
    let lagging = *cluster.replicas.keys().find(|id| **id != leader).unwrap();
    cluster.stop(lagging).await;
    let n = env_or("P1_N", 70);
    let kib = env_or("P1_KIB", 1024);
    write_big_marks(&cluster, n, kib).await;
    let target = cluster.replicas[&leader].last_applied();
    cluster.launch(lagging).await;
    let started = Instant::now();
    loop {
        let got = cluster.replicas[&lagging].last_applied();
        if got >= target {
            eprintln!("P1: caught up in {:?}", started.elapsed());
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let m = cluster.replicas[&leader].metrics();
            panic!(
                "P1: follower {lagging} stuck at {got:?} (leader at {target:?}) after 60 s; leader metrics {m:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    cluster.shutdown().await;
}

/// P2: one entry of many MiB (the proposer batches up to 512 commands, with no
/// byte bound) can never be replicated within the 30 ms AppendEntries timeout:
/// the whole cluster stops committing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a release build: cargo test --release -p corral-consensus --test review_regressions -- --ignored"]
async fn p2_one_big_entry_commits() {
    let cluster = start_with(3, prod_timing()).await;
    cluster.propose(mark("early")).await.unwrap();
    let leader = cluster.leader().await;
    let n = env_or("P2_N", 32);
    let commands: Vec<Command> = (0..n)
        .map(|i| big_mark(&format!("c{i}"), 1024 * 1024))
        .collect();
    let started = Instant::now();
    let res = cluster.replicas[&leader].propose_all(commands).await;
    eprintln!(
        "P2: big entry -> {:?} after {:?}",
        res.as_ref().map(|r| r.len()),
        started.elapsed()
    );
    let started = Instant::now();
    let mut ok = 0;
    let mut errors = BTreeMap::new();
    let mut terms = std::collections::BTreeSet::new();
    while started.elapsed() < Duration::from_secs(40) {
        for r in cluster.replicas.values() {
            terms.insert(r.leadership().borrow().term);
        }
        let leader = cluster.leader().await;
        match tokio::time::timeout(
            Duration::from_secs(3),
            cluster.replicas[&leader].propose(mark("after")),
        )
        .await
        {
            Ok(Ok(_)) => ok += 1,
            Ok(Err(e)) => {
                *errors
                    .entry(format!("{:?}", std::mem::discriminant(&e)))
                    .or_insert(0) += 1
            }
            Err(_) => *errors.entry("3s-timeout".to_string()).or_insert(0) += 1,
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let m: Vec<_> = cluster.replicas.values().map(|r| r.metrics()).collect();
    eprintln!("P2: small writes in 40 s after: ok {ok}, errors {errors:?}, terms seen {terms:?}");
    for m in &m {
        eprintln!(
            "P2: {} {} term {} last_log {:?} applied {:?}",
            m.id, m.role, m.term, m.last_log_index, m.last_applied
        );
    }
    // One caller's commands share one entry: over the limit it is refused at once,
    // and the cluster keeps committing.
    if n * 1024 * 1024 > corral_consensus::proposer::MAX_PROPOSAL_BYTES {
        assert!(
            matches!(res, Err(ProposeError::TooLarge { .. })),
            "oversized proposal: {res:?}"
        );
    } else {
        assert!(res.is_ok(), "big entry: {res:?}");
    }
    assert!(errors.is_empty(), "small writes failed: {errors:?}");
    cluster.shutdown().await;
}

/// P3: `Replica::shutdown` promises the directory may be reopened when it returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn p3_restart_right_after_shutdown() {
    let mut cluster = TestCluster::start(3).await;
    for i in 0..20 {
        cluster.propose(mark(&format!("r{i}"))).await.unwrap();
    }
    for round in 0..30 {
        let id = 1 + (round % 3) as u64;
        let replica = cluster.replicas.remove(&id).unwrap();
        replica.shutdown().await;
        // Same as TestCluster::launch, but reporting the error instead of unwrap.
        let dir = cluster.dirs[&id].path().to_path_buf();
        let tls = support::controller_tls(&cluster.ca, id);
        let config = corral_consensus::ReplicaConfig {
            id,
            listen: cluster.addrs[&id],
            data_dir: dir,
            tls,
            timing: cluster.timing.clone(),
            cluster_name: "test".into(),
            clock: None,
            source: None,
        };
        let t0 = Instant::now();
        let mut failures = 0;
        loop {
            match corral_consensus::Replica::start(config.clone()).await {
                Ok(r) => {
                    cluster.replicas.insert(id, r);
                    break;
                }
                Err(e) => {
                    failures += 1;
                    if t0.elapsed() > Duration::from_secs(20) {
                        panic!("P3 round {round}: {e}");
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
        if failures > 0 {
            eprintln!(
                "P3 round {round}: replica {id} reopened only after {:?} ({failures} lock failures)",
                t0.elapsed()
            );
        }
        let _ = cluster.propose(mark(&format!("x{round}"))).await;
    }
    cluster.shutdown().await;
}

/// P3b: same, while a large snapshot is being built.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn p3b_restart_while_snapshot_builds() {
    let mut cluster = start_with(
        3,
        RaftTiming {
            snapshot_every_entries: 100_000,
            ..support::timing()
        },
    )
    .await;
    for i in 0..48 {
        cluster
            .propose(big_mark(&format!("r{i}"), 1024 * 1024))
            .await
            .unwrap();
    }
    let leader = cluster.leader().await;
    let id = *cluster.replicas.keys().find(|i| **i != leader).unwrap();
    let replica = cluster.replicas.remove(&id).unwrap();
    // trigger() returns once the command is queued; the build runs in a spawned task.
    replica.snapshot().await.unwrap();
    replica.shutdown().await;
    let dir = cluster.dirs[&id].path().to_path_buf();
    let tls = support::controller_tls(&cluster.ca, id);
    let config = corral_consensus::ReplicaConfig {
        id,
        listen: cluster.addrs[&id],
        data_dir: dir,
        tls,
        timing: cluster.timing.clone(),
        cluster_name: "test".into(),
        clock: None,
        source: None,
    };
    match corral_consensus::Replica::start(config).await {
        Ok(r) => {
            cluster.replicas.insert(id, r);
        }
        Err(e) => panic!("P3b: restart right after shutdown failed: {e}"),
    }
    cluster.shutdown().await;
}

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn entry(term: u64, index: u64, name: &str) -> Entry {
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(Proposal::new(&[mark(name)]).unwrap()),
    }
}

/// P4: openraft spawns build_snapshot in its own task (core/sm/worker.rs:186), so
/// it can run while the worker installs a newer snapshot. The older build then
/// overwrites the persisted snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p4_build_racing_install_keeps_the_newer_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let s_index;
    {
        let mut sm = Storage::open(dir.path()).unwrap().state;
        // Local state: applied up to 5.
        sm.apply((1..=5).map(|i| entry(1, i, &format!("a{i}"))))
            .await
            .unwrap();
        // Leader's snapshot at 100, received the way openraft receives one: its
        // file's bytes written into a file this store handed out.
        let leader_dir = tempfile::tempdir().unwrap();
        let mut leader = Storage::open(leader_dir.path()).unwrap().state;
        leader
            .apply((1..=100).map(|i| entry(1, i, &format!("a{i}"))))
            .await
            .unwrap();
        let mut sent = leader.build_snapshot().await.unwrap();
        s_index = 100;
        assert_eq!(sent.meta.last_log_id, Some(log_id(1, s_index)));
        let mut bytes = Vec::new();
        sent.snapshot.read_to_end(&mut bytes).await.unwrap();
        let mut received = sm.begin_receiving_snapshot().await.unwrap();
        received.write_all(&bytes).await.unwrap();
        let meta = sent.meta.clone();
        let mut installer = sm.clone();
        let mut builder = sm.get_snapshot_builder().await;
        let (i, b) = tokio::join!(
            installer.install_snapshot(&meta, received),
            builder.build_snapshot()
        );
        i.unwrap();
        let built = b.unwrap();
        eprintln!("P4: built snapshot {:?}", built.meta.last_log_id);
        let current = sm.get_current_snapshot().await.unwrap().unwrap();
        eprintln!(
            "P4: in memory: applied {:?}, current snapshot {:?}",
            sm.last_applied(),
            current.meta.last_log_id
        );
    }
    let sm = Storage::open(dir.path()).unwrap().state;
    assert_eq!(
        sm.last_applied().map(|l| l.index),
        Some(s_index),
        "P4: after reopening, the persisted snapshot is older than the one installed"
    );
}

/// P5: openraft may purge the log while a received snapshot is still being saved;
/// a crash in between left a hole between snapshot and log, and the replica could
/// not start. A purge now waits until a durable snapshot covers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p5_purge_waits_for_a_durable_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let ca = corral_pki::ClusterCa::generate("p5").unwrap();
    let config = corral_consensus::ReplicaConfig {
        id: 1,
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.path().to_path_buf(),
        tls: support::controller_tls(&ca, 1),
        timing: RaftTiming {
            snapshot_every_entries: 100_000,
            ..support::timing()
        },
        cluster_name: "p5".into(),
        clock: None,
        source: None,
    };
    let replica = corral_consensus::Replica::start(config).await.unwrap();
    let me = ReplicaAddr {
        peer: replica.peer_addr().to_string(),
        api: String::new(),
    };
    replica.initialize([(1, me)].into()).await.unwrap();
    let deadline = Instant::now() + PATIENCE;
    let mut written = 0;
    while written < 40 {
        match replica.propose(mark(&format!("p{written}"))).await {
            Ok(_) => written += 1,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => panic!("{e}"),
        }
    }
    replica.shutdown().await;

    let (durable, covered) = tokio::sync::watch::channel(Some(20u64));
    let log = Storage::open(dir.path())
        .unwrap()
        .log
        .purging_after(covered);
    let (first, last) = log.verify().unwrap().expect("entries were written");
    let target = log.clone().try_get_log_entries(35..36).await.unwrap()[0].log_id;
    // The durable snapshot covers 20: a purge to 35 must wait for it.
    let purge = {
        let mut log = log.clone();
        tokio::spawn(async move { log.purge(target).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!purge.is_finished(), "purged past the durable snapshot");
    assert_eq!(log.verify().unwrap(), Some((first, last)));
    durable.send_replace(Some(36));
    purge.await.unwrap().unwrap();
    assert_eq!(log.verify().unwrap(), Some((36, last)));
}

/// P6: a plain failover after a burst of large entries: the new leader probes
/// each follower with up to 64 entries from the middle of its log
/// (progress/entry/mod.rs:223, calc_mid) inside a 30 ms AppendEntries timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a release build: cargo test --release -p corral-consensus --test review_regressions -- --ignored"]
async fn p6_failover_after_big_entries() {
    let mut cluster = start_with(3, prod_timing()).await;
    cluster.propose(mark("early")).await.unwrap();
    let n = env_or("P6_N", 70);
    let kib = env_or("P6_KIB", 1024);
    write_big_marks(&cluster, n, kib).await;
    let old = cluster.leader().await;
    cluster.stop(old).await;
    let started = Instant::now();
    let mut result = None;
    while started.elapsed() < Duration::from_secs(60) {
        let leading = cluster
            .replicas
            .iter()
            .find(|(_, r)| r.leadership().borrow().is_self)
            .map(|(id, _)| *id);
        if let Some(l) = leading
            && let Ok(Ok(Ok(_))) = tokio::time::timeout(
                Duration::from_secs(2),
                cluster.replicas[&l].propose(mark("after")),
            )
            .await
        {
            result = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let m: Vec<_> = cluster.replicas.values().map(|r| r.metrics()).collect();
    for m in &m {
        eprintln!(
            "P6: {} {} term {} last_log {:?} applied {:?} lag {:?}",
            m.id, m.role, m.term, m.last_log_index, m.last_applied, m.follower_lag
        );
    }
    assert!(
        result.is_some(),
        "P6: no write committed within 60 s of the failover ({n} x {kib} KiB entries)"
    );
    eprintln!(
        "P6: first write after failover committed at {:?}",
        result.unwrap()
    );
    cluster.shutdown().await;
}
