//! A minimal `corral.toml` (a name, one replica, one node line, one partition)
//! works, with defaults for everything else.

use std::path::Path;

use corral_controller::config;
use corral_state::config::ClusterConfig;
use corral_state::partition::PreemptMode;
use corral_state::slurm::duration::TimeLimit;
use corral_state::{Actor, ClusterState, Role, Timestamp};

const MINIMAL: &str = r#"
cluster_name = "tiny"

[[replicas]]
id = 7
peer = "ctl.example.org:7100"
api = "ctl.example.org:7200"

[[nodes]]
names = "n[1-2]"
cpus = 16
memory = "64G"

[[partitions]]
name = "batch"
nodes = "n[1-2]"
"#;

#[test]
fn a_minimal_file_takes_defaults() {
    let config = config::parse(MINIMAL, Path::new("/etc/corral/corral.toml")).unwrap();
    assert_eq!(config.id, 7, "the only replica is this one");
    assert_eq!(config.this_replica().api, "ctl.example.org:7200");
    assert_eq!(config.listen.peer.to_string(), "0.0.0.0:7100");
    assert_eq!(config.listen.api.to_string(), "0.0.0.0:7200");
    assert_eq!(config.data_dir, Path::new("/etc/corral/data/replica-7"));
    assert_eq!(config.tls.ca, Path::new("/etc/corral/tls/ca.crt"));
    assert_eq!(config.tls.cert, Path::new("/etc/corral/tls/replica-7.crt"));
    assert_eq!(config.raft.heartbeat_ms, 30);
    assert_eq!(config.raft.election_min_ms, 100);
    assert_eq!(config.raft.election_max_ms, 200);
    assert_eq!(config.leader.schedule_interval_ms, 1000);
    assert_eq!(config.leader.tick_interval_ms, 1000);

    let cluster = &config.cluster;
    assert_eq!(
        cluster.config,
        ClusterConfig {
            cluster_name: "tiny".into(),
            ..ClusterConfig::default()
        }
    );
    assert_eq!(cluster.nodes.len(), 2);
    assert!(cluster.nodes[0].gpus.is_empty());
    assert_eq!(cluster.nodes[1].memory_mb, 64 * 1024);
    let partition = &cluster.partitions[0];
    assert!(partition.is_default, "the only partition is the default");
    assert!(partition.up);
    assert_eq!(partition.max_time, TimeLimit::Unlimited);
    assert_eq!(partition.default_time, None);
    assert_eq!(partition.priority_tier, 1);
    assert_eq!(partition.preempt_mode, PreemptMode::Off);
    assert_eq!(partition.allowed_accounts, None);
    assert!(cluster.topology.switches.is_empty());
    assert!(cluster.accounts.is_empty() && cluster.users.is_empty() && cluster.qos.is_empty());

    let admin = Actor {
        user: "root".into(),
        role: Role::Admin,
    };
    let mut state = ClusterState::new(Default::default());
    for command in cluster.bootstrap_commands(&admin, Timestamp::from_secs(1)) {
        state.apply(command).unwrap();
    }
    assert_eq!(state.nodes().len(), 2);
    assert!(state.partitions()["batch"].is_default);
}

#[test]
fn nodes_are_defined_in_batches() {
    let text = MINIMAL.replace("n[1-2]", "n[1-600]");
    let config = config::parse(&text, Path::new("corral.toml")).unwrap();
    let admin = Actor {
        user: "root".into(),
        role: Role::Admin,
    };
    let commands = config
        .cluster
        .bootstrap_commands(&admin, Timestamp::from_secs(1));
    let batches = commands
        .iter()
        .filter(|c| matches!(c, corral_state::Command::DefineNodes { .. }))
        .count();
    assert_eq!(batches, 600_usize.div_ceil(config::NODES_PER_COMMAND));
    let mut state = ClusterState::new(Default::default());
    for command in commands {
        state.apply(command).unwrap();
    }
    assert_eq!(state.nodes().len(), 600);
    assert_eq!(state.partitions()["batch"].nodes.len(), 600);
}
