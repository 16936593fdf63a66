//! The agent protocol versions a real controller speaks: a hello of the
//! release before versions (protocol 1, whose frames the proto crate's
//! fixture freezes) is welcomed in protocol 1, this build's hello in
//! protocol 2, and an agent whose versions do not meet the controller's is
//! refused with both sides' versions named and what to upgrade first. Each
//! hello is sent by hand over the agent channel with node `gpu01`'s certificate.

#![allow(clippy::unwrap_used)]

mod support;

use std::net::SocketAddr;

use corral_pki::{ClusterCa, Role};
use corral_proto::agent::{
    AgentHello, AgentMessage, ControllerMessage, NodeResources, read_frame, write_frame,
};
use corral_proto::agent_protocol::ProtocolRange;
use support::LocalCluster;

fn hello() -> AgentHello {
    AgentHello {
        node: "gpu01".to_string(),
        boot_id: "protocol-e2e".to_string(),
        version: "9.9.9".to_string(),
        resources: NodeResources {
            cpus: 4,
            memory_mb: 4096,
            gpus: Vec::new(),
        },
        running: Vec::new(),
        step_address: None,
    }
}

/// Says `hello` to each controller in turn (following a named leader) and
/// returns the first answer that is not `NotLeader`.
async fn answer(cluster: &LocalCluster, hello: &AgentMessage) -> ControllerMessage {
    let mut frame = Vec::new();
    write_frame(&mut frame, hello).await.unwrap();
    answer_frame(cluster, &frame).await
}

/// [`answer`] for a frame given as bytes (length prefix included).
async fn answer_frame(cluster: &LocalCluster, frame: &[u8]) -> ControllerMessage {
    // The cluster runs no agents: gpu01's certificate is minted by its CA here.
    let certs = cluster.dir.path().join("certs");
    let read = |name: &str| std::fs::read_to_string(certs.join(name)).unwrap();
    let ca = ClusterCa::from_pem(&read("ca.pem"), &read("ca.key")).expect("the cluster's CA");
    let tls = ca
        .material(Role::Agent, "gpu01", &[])
        .expect("node gpu01's certificate");
    let mut endpoint = quinn::Endpoint::client(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
    endpoint.set_default_client_config(tls.quic_client_config().unwrap());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut addresses = cluster.addresses.clone();
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no controller answered but NotLeader"
        );
        let address = addresses.remove(0);
        addresses.push(address.clone());
        let target: SocketAddr = address.parse().expect("an IP address and port");
        let Ok(connecting) = endpoint.connect(target, "127.0.0.1") else {
            continue;
        };
        let Ok(connection) = connecting.await else {
            continue;
        };
        let (mut send, mut recv) = connection.open_bi().await.unwrap();
        send.write_all(frame).await.unwrap();
        match read_frame::<_, ControllerMessage>(&mut recv).await {
            Ok(Some(ControllerMessage::NotLeader { leader })) => {
                if let Some(leader) = leader {
                    addresses.insert(0, leader);
                } else {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
            Ok(Some(other)) => return other,
            other => panic!("{address} answered the hello with {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_welcomes_both_protocols_and_names_both_versions_when_they_do_not_meet() {
    corral_pki::install_crypto_provider();
    let cluster = LocalCluster::start(3, 1);

    let old = answer(&cluster, &AgentMessage::unversioned_hello(hello())).await;
    assert!(
        matches!(old, ControllerMessage::Welcome { .. }),
        "a protocol-1 hello is welcomed in protocol 1 (the only welcome such an agent reads): {old:?}"
    );

    let current = AgentMessage::HelloV2 {
        protocol: corral_proto::agent_protocol::SPOKEN,
        hello: hello(),
    };
    match answer(&cluster, &current).await {
        ControllerMessage::WelcomeV2 {
            protocol,
            controller_build,
            welcome,
        } => {
            assert_eq!(protocol, 2);
            assert_eq!(controller_build, env!("CARGO_PKG_VERSION"));
            assert!(welcome.lease_ms > 0);
        }
        other => panic!("this build's hello is welcomed in protocol 2: {other:?}"),
    }

    let newer = AgentMessage::HelloV2 {
        protocol: ProtocolRange {
            oldest: 7,
            newest: 9,
        },
        hello: hello(),
    };
    let ControllerMessage::Refused { reason } = answer(&cluster, &newer).await else {
        panic!("an agent speaking only newer protocols is refused");
    };
    assert!(
        reason.contains("speaks agent protocol 7–9")
            && reason.contains("speaks 1–2")
            && reason.contains("upgrade the controllers to corral 9.9.9 first"),
        "{reason}"
    );

    let older = AgentMessage::HelloV2 {
        protocol: ProtocolRange::only(0),
        hello: hello(),
    };
    let ControllerMessage::Refused { reason } = answer(&cluster, &older).await else {
        panic!("an agent speaking only older protocols is refused");
    };
    assert!(
        reason.contains("agent protocol 0 and")
            && reason.contains("upgrade corral-agent on node 'gpu01'"),
        "{reason}"
    );

    // A hello of a protocol this build has never heard of (a variant it
    // does not know) is answered too, never left for the agent to take
    // for a controller of the release before versions.
    let unknown_variant = [1u8, 0, 0, 0, 0x63];
    let ControllerMessage::Refused { reason } = answer_frame(&cluster, &unknown_variant).await
    else {
        panic!("an unreadable hello is refused");
    };
    assert!(
        reason.contains("speaks agent protocol 1–2 and cannot read this agent's hello")
            && reason.contains("upgrade the controllers first"),
        "{reason}"
    );

    let registered = cluster.controller_log_lines("agent registered");
    assert!(
        registered.iter().any(|l| l.contains("protocol=1"))
            && registered.iter().any(|l| l.contains("protocol=2")),
        "the leader logs each session's protocol: {registered:?}"
    );
}
