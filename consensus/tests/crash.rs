//! Crash safety with real processes: a child proposes through a one-replica
//! cluster and prints every acknowledged write; the parent kills it with SIGKILL
//! at many points, reopens its directory, and checks that the log is contiguous
//! and every acknowledged write is still there.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command as Process, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_consensus::storage::Storage;
use corral_consensus::{Replica, ReplicaAddr, ReplicaConfig};
use corral_pki::ClusterCa;
use support::*;

const CHILD_DIR: &str = "CORRAL_CRASH_CHILD_DIR";
/// Acknowledged writes after which the child is killed, one run each.
const KILL_AFTER: [usize; 8] = [1, 2, 5, 13, 34, 60, 89, 144];

async fn single_replica(dir: &std::path::Path) -> Replica {
    let ca = ClusterCa::generate("crash").unwrap();
    let tls = controller_tls(&ca, 1);
    let config = ReplicaConfig {
        id: 1,
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.to_path_buf(),
        tls,
        timing: timing(),
        cluster_name: "crash".into(),
        clock: None,
        source: None,
    };
    let replica = Replica::start(config).await.unwrap();
    let me = ReplicaAddr {
        peer: replica.peer_addr().to_string(),
        api: String::new(),
    };
    replica.initialize([(1, me)].into()).await.unwrap();
    replica
}

/// Writers in the child: concurrent, so kills land inside group commits too.
const CHILD_WRITERS: usize = 8;

/// The child: write marks forever, printing each one once it is acknowledged.
#[test]
#[ignore = "runs only as the child process of acknowledged_writes_survive_sigkill"]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let replica = Arc::new(single_replica(std::path::Path::new(&dir)).await);
        let writers: Vec<_> = (0..CHILD_WRITERS)
            .map(|w| {
                let replica = Arc::clone(&replica);
                tokio::spawn(async move {
                    for i in 0.. {
                        let name = format!("c{w}-{i}");
                        if let Ok(Ok(_)) = replica.propose(mark(&name)).await {
                            let mut out = std::io::stdout().lock();
                            writeln!(out, "ack {name}").unwrap();
                            out.flush().unwrap();
                        }
                    }
                })
            })
            .collect();
        for writer in writers {
            let _ = writer.await;
        }
    });
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let exe = std::env::current_exe().unwrap();
    for kill_after in KILL_AFTER {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Process::new(&exe)
            .args([
                "crash_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut acknowledged = Vec::new();
        let deadline = Instant::now() + PATIENCE;
        while acknowledged.len() < kill_after {
            assert!(
                Instant::now() < deadline,
                "the child acknowledged only {} writes",
                acknowledged.len()
            );
            let line = lines.next().expect("the child exited early").unwrap();
            if let Some(name) = line.strip_prefix("ack ") {
                acknowledged.push(name.to_string());
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // Acknowledgements still in the pipe were printed before the kill.
        for line in lines.map_while(Result::ok) {
            if let Some(name) = line.strip_prefix("ack ") {
                acknowledged.push(name.to_string());
            }
        }

        {
            let store = Storage::open(dir.path()).unwrap().log;
            let span = store
                .verify()
                .unwrap_or_else(|e| panic!("after a kill at {kill_after}: {e}"));
            assert!(
                span.is_some(),
                "the log is empty after {} acknowledged writes",
                acknowledged.len()
            );
        }
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let replica = single_replica(dir.path()).await;
            let deadline = Instant::now() + PATIENCE;
            let missing = loop {
                match replica
                    .read(|s| {
                        acknowledged
                            .iter()
                            .filter(|n| !s.accounts().contains_key(*n))
                            .cloned()
                            .collect::<Vec<_>>()
                    })
                    .await
                {
                    Ok(missing) => break missing,
                    Err(_) if Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(20)).await
                    }
                    Err(e) => panic!("no leader after restart: {e}"),
                }
            };
            assert!(
                missing.is_empty(),
                "after a kill at {kill_after} acknowledged writes were lost: {missing:?}"
            );
            replica.shutdown().await;
        });
    }
}
