//! The agent channel's frames, frozen per protocol version: a build that
//! speaks a protocol must read every frame an earlier build wrote in it and
//! write each back byte for byte, so agents and controllers of neighbouring
//! releases understand each other during a rolling upgrade.
//!
//! - `fixtures/agent-protocol-1.hex`: the frames corral 4d20653, the last
//!   build before versions, wrote for the protocol-1 messages below.
//! - `fixtures/agent-protocol-2.hex`: the frames protocol 2 added
//!   (`HelloV2`, `WelcomeV2`), as the build that introduced it wrote them.
//!
//! Neither is ever regenerated. A field added to a type these messages
//! carry (`Job` above all), or a variant inserted before an existing one,
//! breaks this test: such a change needs a new message and a new protocol.

use std::collections::BTreeMap;

use corral_proto::agent::{
    AgentHello, AgentMessage, AgentReport, AgentWelcome, ControllerMessage, GpuHealthSample,
    Launch, NodeResources, SignalScope,
};
use corral_proto::agent_protocol::{self, ProtocolRange};
use corral_proto::roster::{Roster, RosterDigest};
use corral_state::ids::JobId;
use corral_state::job::{BatchScript, ExitStatus};
use corral_state::slurm::signal::Signal;
use corral_state::testkit::{at, cluster, spec, start, submit};
use corral_state::topology::TopologyAddress;

/// The frozen frames of each protocol.
const FIXTURES: [(u32, &str); 2] = [
    (1, include_str!("fixtures/agent-protocol-1.hex")),
    (2, include_str!("fixtures/agent-protocol-2.hex")),
];

/// Either direction's message.
#[derive(Debug, PartialEq)]
enum Message {
    Agent(AgentMessage),
    Controller(ControllerMessage),
}

impl Message {
    fn encode(&self) -> Vec<u8> {
        match self {
            Message::Agent(m) => postcard::to_stdvec(m),
            Message::Controller(m) => postcard::to_stdvec(m),
        }
        .expect("every message encodes")
    }

    /// Decodes `bytes` as a message of the same direction as `self`.
    fn decode_like(&self, bytes: &[u8]) -> Result<Message, postcard::Error> {
        Ok(match self {
            Message::Agent(_) => Message::Agent(postcard::from_bytes(bytes)?),
            Message::Controller(_) => Message::Controller(postcard::from_bytes(bytes)?),
        })
    }
}

fn launch() -> Launch {
    let mut state = cluster(2, 8);
    let mut request = spec("alice", 2, 4);
    request.workdir = "/home/alice/run".to_string();
    let id = submit(&mut state, request, at(1));
    let nodes = start(&mut state, id, at(2));
    Launch {
        job: state.job(id).cloned().expect("just submitted"),
        attempt: 1,
        script: BatchScript {
            script: "#!/bin/sh\n#SBATCH -N2\nsrun python train.py\n".to_string(),
            argv: vec!["--lr".to_string(), "3e-4".to_string()],
            environment: [("PATH".to_string(), "/usr/bin:/bin".to_string())].into(),
        },
        step_peers: nodes
            .iter()
            .map(|n| (n.clone(), format!("{n}:7300")))
            .collect(),
        dispatched_by: (2, 7),
        topology: [(
            nodes[0].clone(),
            TopologyAddress {
                address: format!("root.leaf1.{}", nodes[0]),
                pattern: "switch.switch.node".to_string(),
            },
        )]
        .into(),
    }
}

/// The messages protocol `protocol` added, by name.
fn messages(protocol: u32) -> Vec<(&'static str, Message)> {
    match protocol {
        1 => protocol_one_messages(),
        2 => protocol_two_messages(),
        _ => Vec::new(),
    }
}

fn hello() -> AgentHello {
    AgentHello {
        node: "gpu-a01".to_string(),
        boot_id: "5b1c0e6e-boot".to_string(),
        version: "0.1.0".to_string(),
        resources: NodeResources {
            cpus: 64,
            memory_mb: 512_000,
            gpus: vec![(0, "h100".to_string()), (1, "h100".to_string())],
        },
        running: vec![(JobId(7), 2), (JobId(9), 1)],
        step_address: Some("10.0.0.11:7300".to_string()),
    }
}

fn protocol_two_messages() -> Vec<(&'static str, Message)> {
    vec![
        (
            "hello-v2",
            Message::Agent(AgentMessage::HelloV2 {
                protocol: ProtocolRange {
                    oldest: 1,
                    newest: 2,
                },
                hello: hello(),
            }),
        ),
        (
            "welcome-v2",
            Message::Controller(ControllerMessage::WelcomeV2 {
                protocol: 2,
                controller_build: "0.1.0".to_string(),
                welcome: AgentWelcome {
                    heartbeat_ms: 500,
                    lease_ms: 20_000,
                    cluster_name: "corral".to_string(),
                },
            }),
        ),
    ]
}

fn protocol_one_messages() -> Vec<(&'static str, Message)> {
    let running = vec![(JobId(7), 2), (JobId(9), 1)];
    vec![
        (
            "hello",
            Message::Agent(AgentMessage::unversioned_hello(hello())),
        ),
        (
            "heartbeat",
            Message::Agent(AgentMessage::Heartbeat {
                seq: 41,
                running: running.clone(),
                gpus: vec![GpuHealthSample {
                    index: 0,
                    healthy: false,
                    temperature_c: Some(71),
                    utilization_pct: None,
                    problem: Some("XID 79".to_string()),
                }],
            }),
        ),
        (
            "heartbeat-v2",
            Message::Agent(AgentMessage::HeartbeatV2 {
                seq: 42,
                running,
                gpus: Vec::new(),
                last_ack: Some(40),
                roster: Some(RosterDigest::of(["gpu-a01", "gpu-a02"])),
            }),
        ),
        (
            "report-exited",
            Message::Agent(AgentMessage::Report {
                id: 3,
                report: AgentReport::BatchExited {
                    job: JobId(7),
                    attempt: 2,
                    status: ExitStatus {
                        code: 0,
                        signal: Some(Signal::TERM),
                    },
                },
            }),
        ),
        (
            "report-checkpoint",
            Message::Agent(AgentMessage::Report {
                id: 4,
                report: AgentReport::Checkpoint {
                    job: JobId(7),
                    attempt: 2,
                    step: 1200,
                    path: "/ckpt/7/step-1200".to_string(),
                },
            }),
        ),
        (
            "report-xid",
            Message::Agent(AgentMessage::Report {
                id: 5,
                report: AgentReport::XidKilled {
                    gpu: 1,
                    xid: 13,
                    attempts: vec![(JobId(9), 1)],
                    reason: "Graphics Engine Exception".to_string(),
                },
            }),
        ),
        (
            "report-step",
            Message::Agent(AgentMessage::Report {
                id: 6,
                report: AgentReport::StepStarted {
                    job: JobId(9),
                    attempt: 1,
                    step: 0,
                    name: "python".to_string(),
                    nodes: vec!["gpu-a01".to_string(), "gpu-a02".to_string()],
                    ntasks: 16,
                    cpus: 64,
                },
            }),
        ),
        (
            "report-started",
            Message::Agent(AgentMessage::Report {
                id: 7,
                report: AgentReport::Started {
                    job: JobId(9),
                    attempt: 1,
                },
            }),
        ),
        (
            "report-released",
            Message::Agent(AgentMessage::Report {
                id: 8,
                report: AgentReport::Released {
                    job: JobId(9),
                    attempt: 1,
                },
            }),
        ),
        (
            "report-gpu-failed",
            Message::Agent(AgentMessage::Report {
                id: 9,
                report: AgentReport::GpuFailed {
                    gpu: 3,
                    xid: Some(79),
                    reason: "GPU has fallen off the bus".to_string(),
                    drain_node: true,
                },
            }),
        ),
        (
            "report-lost",
            Message::Agent(AgentMessage::Report {
                id: 10,
                report: AgentReport::Lost {
                    job: JobId(9),
                    attempt: 1,
                    reason: "the agent was restarted".to_string(),
                },
            }),
        ),
        (
            "report-unkillable",
            Message::Agent(AgentMessage::Report {
                id: 11,
                report: AgentReport::Unkillable {
                    job: JobId(9),
                    attempt: 1,
                    pids: vec![4242, 4243],
                    after_s: 60,
                },
            }),
        ),
        (
            "report-step-ended",
            Message::Agent(AgentMessage::Report {
                id: 12,
                report: AgentReport::StepEnded {
                    job: JobId(9),
                    attempt: 1,
                    step: 0,
                    status: ExitStatus {
                        code: 3,
                        signal: None,
                    },
                },
            }),
        ),
        (
            "welcome",
            Message::Controller(ControllerMessage::Welcome {
                heartbeat_ms: 500,
                lease_ms: 20_000,
                cluster_name: "corral".to_string(),
            }),
        ),
        (
            "not-leader",
            Message::Controller(ControllerMessage::NotLeader {
                leader: Some("10.0.0.2:7100".to_string()),
            }),
        ),
        (
            "refused",
            Message::Controller(ControllerMessage::Refused {
                reason: "node 'gpu-z' is not defined in this cluster".to_string(),
            }),
        ),
        (
            "heartbeat-ack",
            Message::Controller(ControllerMessage::HeartbeatAck { seq: 41 }),
        ),
        (
            "report-done",
            Message::Controller(ControllerMessage::ReportDone {
                id: 3,
                committed: true,
            }),
        ),
        (
            "launch",
            Message::Controller(ControllerMessage::Launch(Box::new(launch()))),
        ),
        (
            "signal",
            Message::Controller(ControllerMessage::Signal {
                job: JobId(7),
                attempt: 2,
                signal: Signal::USR1,
                scope: SignalScope::Full,
            }),
        ),
        (
            "signal-batch",
            Message::Controller(ControllerMessage::Signal {
                job: JobId(7),
                attempt: 2,
                signal: Signal::HUP,
                scope: SignalScope::Batch,
            }),
        ),
        (
            "signal-steps",
            Message::Controller(ControllerMessage::Signal {
                job: JobId(7),
                attempt: 2,
                signal: Signal::INT,
                scope: SignalScope::Steps,
            }),
        ),
        (
            "kill",
            Message::Controller(ControllerMessage::Kill {
                job: JobId(7),
                attempt: 2,
                signal: Signal::TERM,
                grace_ms: 30_000,
            }),
        ),
        (
            "roster",
            Message::Controller(ControllerMessage::Roster(Roster::new(BTreeMap::from([
                ("gpu-a01".to_string(), Some("10.0.0.11:7300".to_string())),
                ("gpu-a02".to_string(), None),
            ])))),
        ),
    ]
}

/// The frames protocol `protocol`'s fixture holds: name → bytes.
fn fixture(protocol: u32) -> BTreeMap<String, Vec<u8>> {
    let (_, text) = FIXTURES
        .iter()
        .find(|(p, _)| *p == protocol)
        .expect("a fixture per protocol");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let (name, hex) = line.split_once(' ').expect("each line is `name hex`");
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
                .collect();
            (name.to_string(), bytes)
        })
        .collect()
}

#[test]
fn this_build_reads_every_frozen_frame_and_writes_it_back_unchanged() {
    for (protocol, _) in FIXTURES {
        assert!(
            agent_protocol::SPOKEN.speaks(protocol) || protocol < agent_protocol::SPOKEN.oldest,
            "a fixture for a protocol this build does not know"
        );
        if !agent_protocol::SPOKEN.speaks(protocol) {
            continue;
        }
        let fixture = fixture(protocol);
        let messages = messages(protocol);
        assert_eq!(
            fixture.len(),
            messages.len(),
            "protocol {protocol}: the fixture and the messages name the same frames"
        );
        for (name, message) in &messages {
            let old = fixture
                .get(*name)
                .unwrap_or_else(|| panic!("protocol {protocol}'s fixture has no frame `{name}`"));
            let read = message.decode_like(old).unwrap_or_else(|e| {
                panic!("protocol {protocol}'s `{name}` no longer decodes: {e}")
            });
            assert_eq!(
                &read.encode(),
                old,
                "protocol {protocol}'s `{name}` decodes but is written back differently: a peer of that protocol would misread it"
            );
        }
    }
}

#[test]
fn the_simple_frames_mean_what_they_meant() {
    // Frames built from literals only (not from the state machine's test
    // helpers, whose defaults may move) must decode to the same values.
    for (protocol, _) in FIXTURES {
        let fixture = fixture(protocol);
        for (name, message) in messages(protocol) {
            if name == "launch" {
                continue;
            }
            let read = message.decode_like(&fixture[name]).expect("decodes");
            assert_eq!(
                read, message,
                "protocol {protocol}'s `{name}` reads as something else"
            );
        }
    }
}

/// Prints the fixture lines of the protocol `CORRAL_FIXTURE_PROTOCOL`
/// names. Run once, by the build that defined that protocol; a fixture is
/// not to be written again.
#[test]
#[ignore = "writes a frozen fixture's text; never rerun"]
fn print_fixture() {
    let protocol = std::env::var("CORRAL_FIXTURE_PROTOCOL")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(1);
    for (name, message) in messages(protocol) {
        let hex: String = message
            .encode()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        println!("{name} {hex}");
    }
}
