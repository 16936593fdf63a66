//! The peer call stream over real sockets: many concurrent calls share one
//! stream and each gets its own answer; a call to a replica that stopped fails
//! instead of hanging, and the next call after its restart opens a new stream.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_consensus::codec;
use corral_consensus::network::{Method, PeerNetwork};
use corral_consensus::proposer::Results;
use corral_pki::Role;
use corral_state::account::Account;
use corral_state::{Command, Rejection};
use support::*;

const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Account `name` under `parent`: refused, naming the parent, when it does not
/// exist.
fn account_under(name: &str, parent: &str) -> Command {
    Command::SetAccount {
        account: Account {
            name: name.into(),
            parent: Some(parent.into()),
            shares: 1,
            default_qos: None,
            description: String::new(),
            limits: Default::default(),
        },
        by: admin(),
    }
}

/// A peer client with a controller's certificate, as a forwarding replica has.
fn forwarder(cluster: &TestCluster) -> PeerNetwork {
    let tls = cluster
        .ca
        .material(Role::Controller, "forwarder", &[])
        .unwrap();
    PeerNetwork::new(tls.client_config())
}

/// Proposes `command` to `target`: the transport's failure, or the replica's
/// answer.
async fn propose(
    network: &PeerNetwork,
    target: u64,
    addr: &str,
    command: Command,
) -> Result<Results, tonic::Status> {
    let payload = codec::encode(&vec![command]).unwrap();
    let reply = network
        .call(target, addr, Method::Propose, payload, CALL_TIMEOUT)
        .await?;
    Ok(codec::decode(&reply).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_on_one_stream_each_get_their_own_answer() {
    let cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let addr = cluster.addrs[&leader].to_string();
    let network = Arc::new(forwarder(&cluster));
    // Half are accepted, half refused naming their own missing parent: an
    // answer handed to the wrong caller shows.
    let calls: Vec<_> = (0..200)
        .map(|i| {
            let (network, addr) = (Arc::clone(&network), addr.clone());
            tokio::spawn(async move {
                let command = if i % 2 == 0 {
                    account_under(&format!("ok-{i}"), "root")
                } else {
                    account_under(&format!("refused-{i}"), &format!("missing-{i}"))
                };
                (i, propose(&network, leader, &addr, command).await)
            })
        })
        .collect();
    for call in calls {
        let (i, answer) = call.await.unwrap();
        let results = answer
            .unwrap_or_else(|e| panic!("call {i}: {e}"))
            .unwrap_or_else(|e| panic!("call {i}: {e}"));
        assert_eq!(results.len(), 1, "call {i}");
        if i % 2 == 0 {
            assert!(results[0].is_ok(), "call {i}: {:?}", results[0]);
        } else {
            assert_eq!(
                results[0],
                Err(Rejection::UnknownAccount(format!("missing-{i}"))),
                "call {i}"
            );
        }
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_to_a_stopped_replica_fails_and_its_restart_gets_a_new_stream() {
    let mut cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let addr = cluster.addrs[&leader].to_string();
    let network = forwarder(&cluster);
    let first = propose(&network, leader, &addr, mark("before")).await;
    assert!(
        matches!(first, Ok(Ok(ref r)) if r.iter().all(Result::is_ok)),
        "{first:?}"
    );

    cluster.stop(leader).await;
    let started = Instant::now();
    let status = propose(&network, leader, &addr, mark("while-down"))
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < CALL_TIMEOUT,
        "the call waited out its deadline: {status:?}"
    );
    assert!(
        matches!(
            status.code(),
            tonic::Code::Unavailable | tonic::Code::Unknown
        ),
        "{status:?}"
    );

    // Back on the same address: the next call opens a new stream and reaches
    // it (it answers, whether or not it leads again).
    cluster.launch(leader).await;
    let deadline = Instant::now() + PATIENCE;
    loop {
        match propose(&network, leader, &addr, mark("after")).await {
            Ok(_answered) => break,
            Err(status) => {
                assert!(Instant::now() < deadline, "never served again: {status:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    cluster.shutdown().await;
}
