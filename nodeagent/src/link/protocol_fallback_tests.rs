//! An agent of this build against a controller of the release before agent
//! protocol versions: that controller reads the agent channel with the
//! four-variant `AgentMessage` below (the enum as 4d20653 defined it), so it
//! cannot decode a `HelloV2` and closes the connection unanswered, and it
//! answers a protocol-1 `Hello` with `Welcome`. The agent must end up
//! welcomed, in protocol 1, by saying hello again.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use corral_pki::{ClusterCa, Role};
use corral_proto::agent::{
    AgentHello, AgentReport, ControllerMessage, GpuHealthSample, NodeResources, write_frame,
};
use corral_proto::roster::RosterDigest;
use corral_state::ids::{AttemptNumber, JobId};
use serde::Deserialize;

use super::discovery::{Outcome, attach};

/// The agent channel's `AgentMessage` of protocol 1, exactly as it was.
#[derive(Debug, Deserialize)]
#[allow(dead_code)] // read only to decide what the old controller does
enum ProtocolOneAgentMessage {
    Hello {
        node: String,
        boot_id: String,
        version: String,
        resources: NodeResources,
        running: Vec<(JobId, AttemptNumber)>,
        step_address: Option<String>,
    },
    Heartbeat {
        seq: u64,
        running: Vec<(JobId, AttemptNumber)>,
        gpus: Vec<GpuHealthSample>,
    },
    Report {
        id: u64,
        report: AgentReport,
    },
    HeartbeatV2 {
        seq: u64,
        running: Vec<(JobId, AttemptNumber)>,
        gpus: Vec<GpuHealthSample>,
        last_ack: Option<u64>,
        roster: Option<RosterDigest>,
    },
}

/// Reads one length-prefixed frame as protocol 1 did.
async fn read_protocol_one(
    recv: &mut quinn::RecvStream,
) -> Option<Result<ProtocolOneAgentMessage, postcard::Error>> {
    let mut length = [0u8; 4];
    recv.read_exact(&mut length).await.ok()?;
    let mut body = vec![0u8; u32::from_le_bytes(length) as usize];
    recv.read_exact(&mut body).await.ok()?;
    Some(postcard::from_bytes(&body))
}

/// How the fake controller treats a hello.
#[derive(Clone, Copy)]
enum Behaviour {
    /// As 4d20653 did: welcome a protocol-1 hello, end the stream on one it
    /// cannot read.
    ProtocolOne,
    /// Drop the connection on any hello, without ending the stream (a crash,
    /// a reset): no reason to speak an older protocol.
    Abrupt,
}

/// A fake controller at an ephemeral port behaving as `behaviour` says; it
/// counts the hellos it did not welcome.
fn fake_controller(ca: &ClusterCa, behaviour: Behaviour) -> (quinn::Endpoint, Arc<AtomicUsize>) {
    let tls = ca
        .material(Role::Controller, "controller-1", &["127.0.0.1"])
        .expect("controller certificate");
    let config = tls.quic_server_config().expect("server config");
    let endpoint =
        quinn::Endpoint::server(config, SocketAddr::from(([127, 0, 0, 1], 0))).expect("a UDP port");
    let unreadable = Arc::new(AtomicUsize::new(0));
    let server = endpoint.clone();
    let counted = Arc::clone(&unreadable);
    tokio::spawn(async move {
        while let Some(incoming) = server.accept().await {
            let counted = Arc::clone(&counted);
            tokio::spawn(async move {
                let Ok(connection) = incoming.await else {
                    return;
                };
                let Ok((mut send, mut recv)) = connection.accept_bi().await else {
                    return;
                };
                let hello = read_protocol_one(&mut recv).await;
                if matches!(behaviour, Behaviour::Abrupt) {
                    counted.fetch_add(1, Ordering::SeqCst);
                    connection.close(1u32.into(), b"gone");
                    return;
                }
                match hello {
                    Some(Ok(ProtocolOneAgentMessage::Hello { .. })) => {
                        let welcome = ControllerMessage::Welcome {
                            heartbeat_ms: 500,
                            lease_ms: 5_000,
                            cluster_name: "old".to_string(),
                        };
                        let _ = write_frame(&mut send, &welcome).await;
                        // Held open as a session would be, until the agent
                        // drops it.
                        let _ = connection.closed().await;
                    }
                    _ => {
                        // What 4d20653's session did on a hello it could
                        // not decode: end the stream, give the peer a
                        // second to read its end, close.
                        counted.fetch_add(1, Ordering::SeqCst);
                        let _ = send.finish();
                        let _ =
                            tokio::time::timeout(std::time::Duration::from_secs(1), send.stopped())
                                .await;
                        connection.close(0u32.into(), b"bye");
                    }
                }
            });
        }
    });
    (endpoint, unreadable)
}

/// An agent endpoint with node `n1`'s certificate, and its hello.
fn agent(ca: &ClusterCa) -> (quinn::Endpoint, AgentHello) {
    let tls = ca
        .material(Role::Agent, "n1", &[])
        .expect("agent certificate");
    let mut agent = quinn::Endpoint::client(SocketAddr::from(([127, 0, 0, 1], 0))).expect("UDP");
    agent.set_default_client_config(tls.quic_client_config().expect("client config"));
    let hello = AgentHello {
        node: "n1".to_string(),
        boot_id: "boot".to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        resources: NodeResources {
            cpus: 4,
            memory_mb: 1024,
            gpus: Vec::new(),
        },
        running: Vec::new(),
        step_address: None,
    };
    (agent, hello)
}

/// One round of `attach` against a fake controller behaving as `behaviour`;
/// the outcome and how many hellos it did not welcome.
async fn attach_to(behaviour: Behaviour) -> (Outcome, usize) {
    corral_pki::install_crypto_provider();
    let ca = ClusterCa::generate("corral").expect("a CA");
    let (controller, unwelcomed) = fake_controller(&ca, behaviour);
    let address = controller.local_addr().expect("bound").to_string();
    let (agent, hello) = agent(&ca);
    let outcome = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        attach(&agent, &[address], &[], hello),
    )
    .await
    .expect("attach finished");
    (outcome, unwelcomed.load(Ordering::SeqCst))
}

#[tokio::test]
async fn an_agent_is_welcomed_in_protocol_1_by_a_controller_that_cannot_read_its_hello() {
    let (outcome, unwelcomed) = attach_to(Behaviour::ProtocolOne).await;
    let attached = match outcome {
        Outcome::Attached(attached) => attached,
        Outcome::NoLeader { reason, .. } => panic!("not welcomed: {reason}"),
    };
    assert_eq!(attached.protocol, 1);
    assert_eq!(attached.cluster_name, "old");
    assert_eq!(
        unwelcomed, 1,
        "the old controller was sent one hello it could not read first"
    );
}

#[tokio::test]
async fn a_connection_dropped_after_the_hello_is_not_taken_for_an_older_controller() {
    let (outcome, unwelcomed) = attach_to(Behaviour::Abrupt).await;
    assert!(matches!(outcome, Outcome::NoLeader { .. }));
    assert_eq!(
        unwelcomed, 1,
        "one hello, in this build's protocol, and no second one in protocol 1"
    );
}
