//! A `ConfigFile` written with `toml::to_string` reads back to the same file and
//! the same `ControllerConfig`: how `corral local up` generates replica files.

use std::path::{Path, PathBuf};

use corral_controller::config::{
    self, AccountSection, BlockSection, ConfigFile, ListenSection, NodeSection, PartitionSection,
    PartitionStateName, PreemptModeName, QosSection, RaftSection, ReplicaSection,
    ReservationSection, RoleName, SwitchSection, TlsSection, TopologySection, UserSection,
};

fn generated(id: u64) -> ConfigFile {
    let replicas = (1..=3)
        .map(|i| ReplicaSection {
            id: i,
            peer: format!("127.0.0.1:{}", 7100 + i),
            api: format!("127.0.0.1:{}", 7200 + i),
        })
        .collect();
    ConfigFile {
        cluster_name: "local".into(),
        id: Some(id),
        data_dir: Some(PathBuf::from(format!("replica-{id}/data"))),
        listen: ListenSection {
            peer: None,
            api: Some("0.0.0.0:7201".into()),
            source: Some("10.0.0.7".into()),
            metrics: Some("0.0.0.0:9180".into()),
        },
        tls: TlsSection {
            ca: Some("pki/ca.crt".into()),
            cert: None,
            key: Some("/secure/replica.key".into()),
        },
        raft: RaftSection {
            heartbeat_ms: 50,
            election_min_ms: 300,
            election_max_ms: 600,
            ..RaftSection::default()
        },
        topology: TopologySection {
            block_sizes: vec![2],
            switches: vec![
                SwitchSection {
                    name: "leaf1".into(),
                    nodes: Some("node[1-2]".into()),
                    switches: None,
                },
                SwitchSection {
                    name: "top".into(),
                    nodes: None,
                    switches: Some("leaf1".into()),
                },
            ],
            blocks: vec![BlockSection {
                name: "b1".into(),
                nodes: "node[1-2]".into(),
            }],
        },
        replicas,
        nodes: vec![NodeSection {
            names: "node[1-2]".into(),
            cpus: 8,
            memory: "32G".into(),
            gpus: 2,
            gpu_type: Some("sim".into()),
            mig: vec!["1:3g.20gb*2".into()],
            features: vec!["fake".into()],
        }],
        partitions: vec![
            PartitionSection {
                name: "debug".into(),
                nodes: "node1".into(),
                max_time: Some("1:00:00".into()),
                default_time: Some("10".into()),
                state: Some(PartitionStateName::Down),
                ..PartitionSection::default()
            },
            PartitionSection {
                name: "main".into(),
                nodes: "node[1-2]".into(),
                default: true,
                priority_tier: Some(5),
                allowed_accounts: Some(vec!["team".into()]),
                preempt_mode: Some(PreemptModeName::Cancel),
                ..PartitionSection::default()
            },
        ],
        qos: vec![
            QosSection {
                name: "high".into(),
                priority: 10,
                preempts: vec!["low".into()],
                max_wall: Some("UNLIMITED".into()),
                ..QosSection::default()
            },
            QosSection {
                name: "low".into(),
                grp_gpu_minutes_per_account: Some(1_000),
                ..QosSection::default()
            },
        ],
        accounts: vec![
            AccountSection {
                name: "root".into(),
                description: "everyone".into(),
                shares: Some(1),
                ..AccountSection::default()
            },
            AccountSection {
                name: "team".into(),
                default_qos: Some("low".into()),
                ..AccountSection::default()
            },
        ],
        users: vec![UserSection {
            name: "dev".into(),
            accounts: vec!["team".into()],
            default_account: None,
            role: Some(RoleName::Admin),
        }],
        reservations: vec![ReservationSection {
            name: "maint".into(),
            nodes: "node2".into(),
            start: "2030-01-01T08:00:00Z".parse().expect("a date-time"),
            end: "2030-01-01T10:00:00+01:00".parse().expect("a date-time"),
            users: vec!["dev".into()],
            accounts: vec![],
            maintenance: true,
        }],
        ..ConfigFile::default()
    }
}

#[test]
fn a_generated_file_reads_back_the_same() {
    let source = Path::new("/tmp/corral-local/replica-2/corral.toml");
    let file = generated(2);
    let text = toml::to_string(&file).unwrap();
    let read = config::parse_file(&text, source).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(read, file);
    let expected = file.validate(source).unwrap();
    let parsed = config::parse(&text, source).unwrap();
    assert_eq!(parsed, expected);
    assert_eq!(parsed.id, 2);
    assert_eq!(parsed.tls.key, Path::new("/secure/replica.key"));
    assert_eq!(
        parsed.tls.cert,
        Path::new("/tmp/corral-local/replica-2/tls/replica-2.crt")
    );
    assert_eq!(parsed.listen.api.to_string(), "0.0.0.0:7201");
    assert_eq!(parsed.cluster.reservations.len(), 1);
    let qos: Vec<&str> = parsed.cluster.qos.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(qos, ["low", "high"], "preempted QOS first");
}

#[test]
fn a_generated_file_bootstraps_a_cluster() {
    let config = generated(1).validate(Path::new("corral.toml")).unwrap();
    let admin = corral_state::Actor {
        user: "root".into(),
        role: corral_state::Role::Admin,
    };
    let mut state = corral_state::ClusterState::new(Default::default());
    for command in config
        .cluster
        .bootstrap_commands(&admin, corral_state::Timestamp::from_secs(5))
    {
        state.apply(command).unwrap();
    }
    assert_eq!(state.reservations().len(), 1);
    let types: Vec<&str> = state.nodes()["node1"]
        .gpus
        .iter()
        .map(|g| g.gpu_type.as_str())
        .collect();
    assert_eq!(
        types,
        ["sim", "sim_3g.20gb", "sim_3g.20gb"],
        "GPU 1 split in two"
    );
    assert_eq!(state.accounts()["root"].description, "everyone");
    assert!(state.partitions()["main"].is_default);
    assert!(!state.partitions()["debug"].up);
}

#[test]
fn the_example_reads_back_the_same() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("corral.example.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let file = config::parse_file(&text, &path).unwrap();
    let written = toml::to_string(&file).unwrap();
    assert_eq!(
        config::parse(&written, &path).unwrap(),
        config::load(&path).unwrap()
    );
}
