//! Who may speak the peer protocol, over real sockets: the cluster CA also signs
//! users' and node agents' certificates, so every peer RPC refuses a caller whose
//! certificate role is not `controller` (before reading its request), while the
//! replicas keep replicating among themselves.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use corral_consensus::codec;
use corral_consensus::leader_client::LeaderClient;
use corral_consensus::network::{Method, PeerNetwork};
use corral_pki::Role;
use support::*;
use tonic::Code;

const METHODS: [Method; 5] = [
    Method::AppendEntries,
    Method::Vote,
    Method::InstallSnapshot,
    Method::Propose,
    Method::Metrics,
];

const CALL_TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn peer_rpc_refuses_certificates_of_every_role_but_controller() {
    let cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let addr = cluster.addrs[&leader].to_string();
    let intrusion = codec::encode(&vec![mark("intruder")]).unwrap();

    for (role, name) in [
        (Role::User, "alice"),
        (Role::Operator, "oscar"),
        (Role::Admin, "root"),
        (Role::Agent, "gpu-001"),
    ] {
        let tls = cluster.ca.material(role, name, &[]).unwrap();
        let network = PeerNetwork::new(tls.client_config());
        for method in METHODS {
            let payload = match method {
                Method::Propose => intrusion.clone(),
                _ => Vec::new(),
            };
            let status = network
                .call(leader, &addr, method, payload, CALL_TIMEOUT)
                .await
                .unwrap_err();
            assert_eq!(
                status.code(),
                Code::PermissionDenied,
                "{name} ({role}) calling {method:?}: {status:?}"
            );
            assert!(status.message().contains("role controller"), "{status:?}");
        }
    }

    // A controller certificate gets through the same check: its undecodable
    // request reaches the handler, which refuses it for what it is.
    let controller = cluster
        .ca
        .material(Role::Controller, "controller-tool", &[])
        .unwrap();
    let status = PeerNetwork::new(controller.client_config())
        .call(
            leader,
            &addr,
            Method::AppendEntries,
            Vec::new(),
            CALL_TIMEOUT,
        )
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");

    // The replicas still replicate, and the refused proposal left no trace.
    cluster.propose(mark("after")).await.unwrap();
    let digests: BTreeSet<_> = cluster.converged_digests().await.into_values().collect();
    assert_eq!(digests.len(), 1, "replicas diverged");
    let (after, intruder) = cluster.replicas[&leader]
        .read(|state| {
            (
                state.accounts().contains_key("after"),
                state.accounts().contains_key("intruder"),
            )
        })
        .await
        .unwrap();
    assert!(after && !intruder);

    // And a controller-role client (as tools and benchmarks use) is served.
    let client = LeaderClient::new(&controller, vec![(leader, addr)], PATIENCE);
    assert_eq!(client.metrics(leader).await.unwrap().id, leader);
    let results = client.propose(vec![mark("tool")]).await.unwrap();
    assert!(results[0].is_ok());
    cluster.shutdown().await;
}
