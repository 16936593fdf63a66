//! The documented example `corral.example.toml` parses, and its bootstrap
//! commands build the cluster it describes in a fresh state, every one accepted.

use std::path::{Path, PathBuf};

use corral_controller::config::{self, ControllerConfig};
use corral_state::partition::PreemptMode;
use corral_state::slurm::duration::TimeLimit;
use corral_state::{Actor, ClusterState, Role, Timestamp};

fn example_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corral.example.toml")
}

fn example() -> ControllerConfig {
    config::load(&example_path()).unwrap_or_else(|e| panic!("{e}"))
}

fn admin() -> Actor {
    Actor {
        user: "root".into(),
        role: Role::Admin,
    }
}

#[test]
fn the_example_describes_three_replicas_on_localhost() {
    let config = example();
    assert_eq!(config.cluster_name, "demo");
    assert_eq!(config.id, 1);
    assert_eq!(config.replicas.len(), 3);
    assert_eq!(config.this_replica().peer, "127.0.0.1:7101");
    assert_eq!(config.this_replica().api, "127.0.0.1:7201");
    assert_eq!(config.listen.peer.to_string(), "127.0.0.1:7101");
    assert_eq!(config.members().len(), 3);
    let dir = example_path().parent().unwrap().to_path_buf();
    assert_eq!(config.data_dir, dir.join("data/replica-1"));
    assert_eq!(config.tls.key, dir.join("tls/replica-1.key"));
    let timing = config.raft.timing();
    assert_eq!(
        (
            timing.heartbeat_ms,
            timing.election_min_ms,
            timing.election_max_ms
        ),
        (30, 100, 200)
    );
    assert_eq!(config.leader.schedule_interval_ms, 1000);
    assert_eq!(config.leader.kill_wait_ms, 10_000);
    assert_eq!(config.liveness.down_after_ms(), 15_000);
}

#[test]
fn the_example_bootstraps_a_fresh_cluster() {
    let config = example();
    let mut state = ClusterState::new(Default::default());
    let commands = config
        .cluster
        .bootstrap_commands(&admin(), Timestamp::from_secs(1_000));
    for command in commands {
        let shown = format!("{command:?}");
        if let Err(rejection) = state.apply(command) {
            panic!("refused: {rejection}\ncommand: {shown}");
        }
    }

    assert_eq!(state.config().cluster_name, "demo");
    assert_eq!(state.nodes().len(), 4);
    for node in state.nodes().values() {
        assert_eq!(node.gpus.len(), 8);
        assert!(node.gpus.iter().all(|g| g.gpu_type == "h100"));
        assert_eq!(node.cpus, 128);
        assert_eq!(node.memory_mb, 1536 * 1024);
        assert!(node.features.contains("ib"));
    }

    let gpu = &state.partitions()["gpu"];
    assert!(gpu.is_default);
    assert_eq!(gpu.nodes.len(), 4);
    assert_eq!(gpu.max_time, TimeLimit::Seconds(7 * 86_400));
    assert_eq!(gpu.preempt_mode, PreemptMode::Requeue);
    let urgent = &state.partitions()["urgent"];
    assert!(!urgent.is_default);
    assert!(urgent.priority_tier > gpu.priority_tier);

    let topology = state.topology();
    assert_eq!(topology.switches.len(), 3);
    assert_eq!(topology.switches["spine"].children, ["leaf1", "leaf2"]);
    assert_eq!(topology.switches["leaf2"].nodes, ["gpu03", "gpu04"]);

    let accounts = state.accounts();
    assert_eq!(accounts["nlp"].parent.as_deref(), Some("research"));
    assert_eq!(accounts["prod"].parent.as_deref(), Some("root"));
    assert_eq!(accounts["research"].shares, 3);
    assert_eq!(state.users()["alice"].default_account, "nlp");
    assert_eq!(state.users()["carol"].role, Role::Operator);
    assert!(state.qos()["high"].preempts.contains("normal"));
    assert_eq!(state.qos()["high"].max_wall_seconds, Some(2 * 86_400));
}

#[test]
fn the_example_sets_every_key_to_its_default_or_a_documented_value() {
    // The example spells out defaults; parsing it with those sections removed
    // must give the same daemon settings.
    let text = std::fs::read_to_string(example_path()).unwrap();
    let file = config::parse_file(&text, &example_path()).unwrap();
    assert_eq!(file.raft, Default::default());
    assert_eq!(file.leader, Default::default());
    assert_eq!(file.liveness, Default::default());
    assert_eq!(file.priority, Default::default());
    assert_eq!(file.scheduling, Default::default());
    assert_eq!(file.limits, Default::default());
}
