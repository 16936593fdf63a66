//! A bad `corral.toml` is refused with the file, the key path and the reason:
//! one test per kind of mistake.

use std::path::Path;

use corral_controller::config::{self, ConfigError};

const GOOD: &str = r#"
cluster_name = "demo"
id = 1

[[replicas]]
id = 1
peer = "127.0.0.1:7101"
api = "127.0.0.1:7201"

[[replicas]]
id = 2
peer = "127.0.0.1:7102"
api = "127.0.0.1:7202"

[[nodes]]
names = "gpu[01-04]"
cpus = 64
memory = "512G"
gpus = 8
gpu_type = "h100"

[[partitions]]
name = "gpu"
nodes = "gpu[01-04]"
max_time = "7-00:00:00"

[[partitions]]
name = "urgent"
nodes = "gpu[01-02]"
max_time = "1-00:00:00"

[[accounts]]
name = "ml"

[[users]]
name = "alice"
accounts = ["ml"]
"#;

/// Parses `GOOD` with `from` replaced by `to` (which must occur), expecting a refusal.
fn refused(from: &str, to: &str) -> ConfigError {
    assert!(GOOD.contains(from), "{from:?} not in the base file");
    let text = GOOD.replacen(from, to, 1);
    match config::parse(&text, Path::new("corral.toml")) {
        Ok(_) => panic!("accepted after replacing {from:?} with {to:?}"),
        Err(e) => e,
    }
}

/// Asserts the error names `key` and its reason contains `reason`.
fn assert_refusal(error: &ConfigError, key: &str, reason: &str) {
    let shown = error.to_string();
    assert_eq!(error.key(), Some(key), "{shown}");
    assert!(error.reason().contains(reason), "{shown}");
    assert!(
        shown.starts_with(&format!("corral.toml: {key}: ")),
        "{shown}"
    );
}

#[test]
fn the_base_file_is_accepted() {
    config::parse(GOOD, Path::new("corral.toml")).unwrap();
}

#[test]
fn an_unknown_key_is_named() {
    let e = refused("max_time = \"1-00:00:00\"", "max_tme = \"1-00:00:00\"");
    assert_refusal(&e, "partitions[1].max_tme", "unknown field `max_tme`");
    assert!(e.reason().contains("line 30, column 1"), "{e}");
}

#[test]
fn an_unknown_top_level_key_is_named() {
    let e = refused("id = 1\n", "id = 1\nclustername = \"x\"\n");
    assert_refusal(&e, "clustername", "unknown field");
}

#[test]
fn a_bad_time_limit_says_what_is_wrong_and_what_to_write() {
    let e = refused("\"1-00:00:00\"", "\"7-25:00:00\"");
    assert_refusal(
        &e,
        "partitions[1].max_time",
        "\"7-25:00:00\" is not a time limit",
    );
    assert!(
        e.reason()
            .contains("hours after a day field must be below 24"),
        "{e}"
    );
    assert!(e.reason().contains("D-HH:MM:SS"), "{e}");
}

#[test]
fn a_kill_wait_that_is_not_a_short_duration_is_refused() {
    let e = refused("id = 1\n", "id = 1\n[leader]\nkill_wait = \"30 s\"\n");
    assert_refusal(&e, "leader.kill_wait", "\"30 s\" is not a duration");
    // A bare number is minutes, as in Slurm's time format.
    let e = refused("id = 1\n", "id = 1\n[leader]\nkill_wait = \"90\"\n");
    assert_refusal(&e, "leader.kill_wait", "write seconds as 00:00:30");
}

#[test]
fn a_partition_naming_an_undefined_node_is_refused() {
    let e = refused("nodes = \"gpu[01-02]\"", "nodes = \"gpu[01-05]\"");
    assert_refusal(&e, "partitions[1].nodes", "node 'gpu05' is not defined");
}

#[test]
fn a_duplicate_replica_id_is_refused() {
    let e = refused("id = 2\n", "id = 1\n");
    assert_refusal(&e, "replicas[1].id", "replica id 1 is listed twice");
}

#[test]
fn this_id_must_be_among_the_replicas() {
    let e = refused("id = 1\n", "id = 3\n");
    assert_refusal(&e, "id", "replica 3 is not among the replicas (1, 2)");
}

#[test]
fn the_id_is_required_with_several_replicas() {
    let e = refused("id = 1\n", "\n");
    assert_refusal(&e, "id", "missing");
}

#[test]
fn a_bad_address_is_refused() {
    let e = refused("peer = \"127.0.0.1:7102\"", "peer = \"127.0.0.1\"");
    assert_refusal(
        &e,
        "replicas[1].peer",
        "\"127.0.0.1\" is not host:port (no port)",
    );
    let e = refused("api = \"127.0.0.1:7202\"", "api = \"127.0.0.1:7201\"");
    assert_refusal(&e, "replicas[1].api", "is also replicas[0].api");
}

#[test]
fn an_unknown_account_parent_is_refused() {
    let e = refused("name = \"ml\"", "name = \"ml\"\nparent = \"research\"");
    assert_refusal(
        &e,
        "accounts[0].parent",
        "account 'research' is not defined",
    );
}

#[test]
fn an_unknown_user_account_is_refused() {
    let e = refused("accounts = [\"ml\"]", "accounts = [\"nlp\"]");
    assert_refusal(&e, "users[0].accounts", "account 'nlp' is not defined");
}

#[test]
fn a_toml_syntax_error_shows_the_line() {
    let e = refused("cpus = 64", "cpus = = 64");
    let ConfigError::Syntax { line, column, .. } = &e else {
        panic!("not a syntax error: {e}");
    };
    assert_eq!((*line, *column), (17, 8));
    let shown = e.to_string();
    assert!(
        shown.starts_with("corral.toml: TOML parse error at line 17, column 8"),
        "{shown}"
    );
    assert!(shown.contains("cpus = = 64"), "{shown}");
}

#[test]
fn a_value_of_the_wrong_type_is_named() {
    let e = refused("memory = \"512G\"", "memory = 512");
    assert_refusal(&e, "nodes[0].memory", "expected a string");
}

#[test]
fn a_missing_key_is_named() {
    let e = refused("cpus = 64\n", "");
    assert_refusal(&e, "nodes[0].cpus", "missing");
}

#[test]
fn a_bad_memory_size_is_refused() {
    let e = refused("\"512G\"", "\"1.5T\"");
    assert_refusal(&e, "nodes[0].memory", "is not a memory size");
}

#[test]
fn gpus_need_a_type() {
    let e = refused("gpu_type = \"h100\"\n", "");
    assert_refusal(&e, "nodes[0].gpu_type", "missing");
}

#[test]
fn a_mig_layout_must_fit_the_gpus() {
    let e = refused(
        "gpu_type = \"h100\"\n",
        "gpu_type = \"h100\"\nmig = [\"8:3g.40gb*2\"]\n",
    );
    assert_refusal(&e, "nodes[0].mig", "has 8 GPUs (0-7)");
    let e = refused(
        "gpu_type = \"h100\"\n",
        "gpu_type = \"h100\"\nmig = [\"0:4g.40gb*2\"]\n",
    );
    assert_refusal(&e, "nodes[0].mig", "need 8 compute slices");
    let e = refused("gpus = 8\ngpu_type = \"h100\"\n", "mig = [\"0:7g.80gb\"]\n");
    assert_refusal(&e, "nodes[0].mig", "set without gpus");
}

#[test]
fn a_bad_hostlist_is_refused() {
    let e = refused("names = \"gpu[01-04]\"", "names = \"gpu[04-01]\"");
    assert_refusal(&e, "nodes[0].names", "is not a hostlist");
}

#[test]
fn two_default_partitions_are_refused() {
    let text = GOOD
        .replace("name = \"gpu\"", "name = \"gpu\"\ndefault = true")
        .replace("name = \"urgent\"", "name = \"urgent\"\ndefault = true");
    let e = config::parse(&text, Path::new("corral.toml")).unwrap_err();
    assert_refusal(
        &e,
        "partitions[1].default",
        "partitions[0] is the default already",
    );
}

#[test]
fn a_topology_naming_an_undefined_node_is_refused() {
    let text = format!("{GOOD}\n[[topology.switches]]\nname = \"leaf1\"\nnodes = \"gpu[04-05]\"\n");
    let e = config::parse(&text, Path::new("corral.toml")).unwrap_err();
    assert_refusal(
        &e,
        "topology.switches[0].nodes",
        "node 'gpu05' is not defined",
    );
}

#[test]
fn an_account_cycle_is_refused() {
    let text = format!(
        "{GOOD}\n[[accounts]]\nname = \"a\"\nparent = \"b\"\n\n[[accounts]]\nname = \"b\"\nparent = \"a\"\n"
    );
    let e = config::parse(&text, Path::new("corral.toml")).unwrap_err();
    assert_refusal(&e, "accounts[1].parent", "its own ancestor");
}

#[test]
fn election_timeouts_must_exceed_the_heartbeat() {
    let text = format!("{GOOD}\n[raft]\nheartbeat_ms = 150\n");
    let e = config::parse(&text, Path::new("corral.toml")).unwrap_err();
    assert_refusal(
        &e,
        "raft.election_min_ms",
        "must be above raft.heartbeat_ms",
    );
}

#[test]
fn an_unreadable_file_names_it() {
    let e = config::load(Path::new("/nonexistent/corral.toml")).unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }));
    assert!(
        e.to_string()
            .starts_with("/nonexistent/corral.toml: cannot read"),
        "{e}"
    );
}

#[test]
fn a_default_time_beyond_max_time_is_refused() {
    let e = refused(
        "max_time = \"7-00:00:00\"",
        "max_time = \"7-00:00:00\"\ndefault_time = \"8-00:00:00\"",
    );
    assert_refusal(&e, "partitions[0].default_time", "longer than max_time");
}

#[test]
fn a_qos_preemption_cycle_is_refused() {
    let text = format!(
        "{GOOD}\n[[qos]]\nname = \"a\"\npreempts = [\"b\"]\n\n[[qos]]\nname = \"b\"\npreempts = [\"a\"]\n"
    );
    let e = config::parse(&text, Path::new("corral.toml")).unwrap_err();
    assert_refusal(&e, "qos[0].preempts", "preemption cycle");
}

#[test]
fn an_undefined_default_qos_is_refused() {
    let e = refused("name = \"ml\"", "name = \"ml\"\ndefault_qos = \"gold\"");
    assert_refusal(&e, "accounts[0].default_qos", "QOS 'gold' is not defined");
}

#[test]
fn a_switch_with_nodes_and_switches_is_refused() {
    let text = format!(
        "{GOOD}\n[[topology.switches]]\nname = \"s\"\nnodes = \"gpu01\"\nswitches = \"s\"\n"
    );
    let e = config::parse(&text, Path::new("corral.toml")).unwrap_err();
    assert_refusal(&e, "topology.switches[0].switches", "not both");
}

#[test]
fn a_node_under_two_leaves_is_refused() {
    let text = format!(
        "{GOOD}\n[[topology.switches]]\nname = \"a\"\nnodes = \"gpu[01-02]\"\n\n[[topology.switches]]\nname = \"b\"\nnodes = \"gpu[02-03]\"\n"
    );
    let e = config::parse(&text, Path::new("corral.toml")).unwrap_err();
    assert_refusal(
        &e,
        "topology.switches",
        "node 'gpu02' appears under both 'a' and 'b'",
    );
}

#[test]
fn overlapping_reservations_are_refused() {
    let reservation = |name: &str, nodes: &str| {
        format!(
            "\n[[reservations]]\nname = \"{name}\"\nnodes = \"{nodes}\"\nstart = 2030-01-01T00:00:00Z\nend = 2030-01-02T00:00:00Z\n"
        )
    };
    let text = format!(
        "{GOOD}{}{}",
        reservation("one", "gpu[01-02]"),
        reservation("two", "gpu[02-03]")
    );
    let e = config::parse(&text, Path::new("corral.toml")).unwrap_err();
    assert_refusal(&e, "reservations[1].nodes", "overlaps reservation 'one'");
}

#[test]
fn a_bad_listen_address_is_refused() {
    let e = refused("id = 1\n", "id = 1\nlisten = { peer = \"ctl1:7101\" }\n");
    assert_refusal(&e, "listen.peer", "is not a socket address");
}

#[test]
fn a_source_that_is_not_an_ip_address_is_refused() {
    let e = refused("id = 1\n", "id = 1\nlisten = { source = \"ctl1\" }\n");
    assert_refusal(&e, "listen.source", "is not an IP address");
}
