//! `CORRAL_LOG_FORMAT=json`: the daemons write one JSON object per line (for
//! a log shipper), with the level, the message and its fields, through the
//! same capped file `corral local` gives them.

#![allow(clippy::unwrap_used)]

mod support;

use support::{LocalCluster, wait_until};

#[test]
fn with_json_asked_every_daemon_line_is_a_json_object() {
    let cluster =
        LocalCluster::start_with_env(1, &["--nodes", "1"], &[("CORRAL_LOG_FORMAT", "json")]);
    wait_until(
        std::time::Duration::from_secs(30),
        "the controller and the agent log their start",
        || {
            !cluster
                .controller_log_lines("controller started")
                .is_empty()
                && !cluster.agent_log_lines("attached to the leader").is_empty()
        },
    );
    let mut seen = 0;
    for line in cluster
        .controller_log_lines("")
        .into_iter()
        .chain(cluster.agent_log_lines(""))
    {
        // Each line comes as `FILE: LINE`.
        let line = line.split_once(": ").map_or(line.as_str(), |(_, l)| l);
        let Ok(object) = serde_json::from_str::<serde_json::Value>(line) else {
            // `corral local` itself may add a plain line (a restart marker).
            assert!(!line.contains("\"level\""), "a broken JSON line: {line}");
            continue;
        };
        assert!(object["level"].is_string(), "{line}");
        assert!(object["fields"]["message"].is_string(), "{line}");
        seen += 1;
    }
    assert!(seen >= 2, "no JSON line in the daemons' logs");
}
