//! Joining a controller to a running cluster (as a learner, then a voter) and
//! removing it again, with real processes: `corrald` for the new replica and
//! `corral admin members add|remove` as the administrator.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{LocalCluster, corral_bin, corrald_bin, script};

#[test]
fn a_fourth_replica_joins_serves_reads_and_leaves() {
    let cluster = LocalCluster::start(3, 2);
    let dir = cluster.dir.path();
    let job = script(dir, "job.sh", "#!/bin/bash\necho hi\n");
    let id = cluster
        .ok(
            "user-alice",
            &["submit", "--parsable", "--hold", job.to_str().unwrap()],
        )
        .trim()
        .to_string();

    // A certificate for replica 4 from the same CA (`corral certs` reuses it).
    let out = Command::new(corral_bin())
        .args(["certs", "--controllers", "4"])
        .arg(dir.join("certs"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Its configuration: replica 1's, as replica 4, listing itself too.
    let ports: Vec<u16> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect::<Vec<_>>()
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    let (peer, api) = (
        format!("127.0.0.1:{}", ports[0]),
        format!("127.0.0.1:{}", ports[1]),
    );
    let first = std::fs::read_to_string(dir.join("controller-1/corral.toml")).unwrap();
    let config = first
        .replacen("id = 1\n", "id = 4\n", 1)
        .replace("controller-1/data", "controller-4/data")
        .replace("controller-1.pem", "controller-4.pem")
        .replace("controller-1.key", "controller-4.key")
        + &format!("\n[[replicas]]\nid = 4\npeer = \"{peer}\"\napi = \"{api}\"\n");
    std::fs::create_dir_all(dir.join("controller-4")).unwrap();
    std::fs::write(dir.join("controller-4/corral.toml"), config).unwrap();
    let log = std::fs::File::create(dir.join("logs/controller-4.log")).unwrap();
    let mut replica4 = Command::new(corrald_bin())
        .arg("--config")
        .arg(dir.join("controller-4/corral.toml"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    // Recorded with the others, so `corral local down` (the cluster's drop) stops
    // it even when an assertion below fails first.
    std::fs::write(dir.join("pids/controller-4.pid"), replica4.id().to_string()).unwrap();

    let joined = cluster.ok(
        "user-corral-admin",
        &[
            "--json", "admin", "members", "add", "4", "--peer", &peer, "--api", &api,
        ],
    );
    let members: serde_json::Value = serde_json::from_str(&joined).unwrap();
    let voters: Vec<u64> = members["members"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["voter"] == true)
        .map(|m| m["id"].as_u64().unwrap())
        .collect();
    assert_eq!(voters, vec![1, 2, 3, 4]);

    // The new replica serves the job submitted before it joined.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = cluster.corral_at("user-alice", &api, &["--json", "queue", "-j", &id]);
        let jobs: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if jobs.len() == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "replica 4 never showed job {id}: {} {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            support::logs(dir)
        );
    }

    // A user may not change membership; the admin removes replica 4.
    let out = cluster.corral("user-bob", &["admin", "members", "remove", "4"]);
    assert_eq!(out.status.code(), Some(1));
    cluster.ok("user-corral-admin", &["admin", "members", "remove", "4"]);
    let status = cluster.status();
    let ids: Vec<u64> = status["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_u64().unwrap())
        .collect();
    assert!(!ids.contains(&4), "replica 4 is still a member: {ids:?}");
    let _ = replica4.kill();
    let _ = replica4.wait();
}
