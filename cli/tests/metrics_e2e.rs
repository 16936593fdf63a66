//! Metrics end to end: `corral local up --metrics` gives every controller and
//! agent a `/metrics` endpoint, listed in `metrics-targets.json`
//! (Prometheus' `file_sd_configs` format). A running job shows in the
//! leader's queue and GPU gauges (and only the leader's, so that a sum over
//! the replicas counts it once), every replica reports its Raft standing,
//! log lines and process figures, each agent its GPUs' health, and an XID
//! counts on the agent that raised it. A real Prometheus (Debian's
//! `prometheus`, when installed) scrapes the cluster through the targets
//! file, and a PromQL query returns the running job.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::{LocalCluster, corral_bin, script, submit_and_start, wait_until};

/// `GET path` on `address`, the body (empty when it cannot be read).
fn get(address: &str, path: &str) -> String {
    let Ok(mut stream) = TcpStream::connect(address) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return String::new();
    }
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default()
}

/// The value of the sample `series` (name and labels as the text format
/// writes them, e.g. `corral_jobs{partition="gpu",state="running"}`).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// The samples of metric `name` (any labels), as (series, value).
fn samples(text: &str, name: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// Process name (`controller-1`, `agent-gpu01`) → metrics address.
fn targets(dir: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(dir.join("metrics-targets.json")).unwrap();
    let groups: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    groups
        .iter()
        .map(|g| {
            (
                g["labels"]["corral_process"].as_str().unwrap().to_string(),
                g["targets"][0].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn every_process_serves_its_metrics_and_the_leader_counts_the_queue_once() {
    let cluster = LocalCluster::start_with_args(3, &["--nodes", "2", "--metrics"]);
    let dir = cluster.dir.path();
    let targets = targets(dir);
    assert_eq!(targets.len(), 5, "{targets:?}");
    let (job, node) = submit_and_start(
        &cluster,
        &script(
            dir,
            "metered.sh",
            &format!(
                "#!/bin/bash\n#SBATCH --gpus-per-node=2\n#SBATCH --output=metered-%j.out\n\
                 echo 1 > \"$CORRAL_CHECKPOINT_DIR/step-1\"\n\
                 {} checkpoint --step 1 --path \"$CORRAL_CHECKPOINT_DIR/step-1\"\nsleep 300\n",
                corral_bin().display()
            ),
        ),
    );
    let leader = format!("controller-{}", cluster.leader());
    let scrape = |name: &str| get(&targets[name], "/metrics");
    wait_until(
        Duration::from_secs(60),
        "the leader's gauges show the running job",
        || {
            let text = scrape(&leader);
            samples(&text, "corral_jobs")
                .iter()
                .any(|(s, v)| s.contains("state=\"running\"") && *v == 1.0)
                && value(&text, "corral_gpus{state=\"allocated\"}") == Some(2.0)
        },
    );
    // The leader's queue by user and account, its passes, its charges and
    // the running job's checkpoint age.
    let user = support::me().trim_start_matches("user-").to_string();
    let record = support::wait_job(&cluster, &job, Duration::from_secs(5), "a read", |_| true);
    let account = record["account"].as_str().unwrap().to_string();
    wait_until(
        Duration::from_secs(60),
        "the job's checkpoint and GPU time on the leader",
        || {
            let text = scrape(&leader);
            value(&text, &format!("corral_job_checkpoint_age_seconds{{account=\"{account}\",job=\"{job}\",user=\"{user}\"}}"))
                .is_some_and(|age| age >= 0.0)
                && value(
                    &text,
                    &format!("corral_accounting_account_gpu_hours_total{{account=\"{account}\"}}"),
                )
                .is_some_and(|h| h > 0.0)
        },
    );
    let text = scrape(&leader);
    assert!(
        samples(&text, "corral_jobs").iter().any(|(s, v)| {
            s.contains("state=\"running\"")
                && s.contains(&format!("user=\"{user}\""))
                && s.contains(&format!("account=\"{account}\""))
                && *v == 1.0
        }),
        "{text}"
    );
    assert!(
        value(&text, "corral_scheduler_pass_duration_milliseconds_count").is_some_and(|n| n > 0.0),
        "{text}"
    );
    assert!(
        value(
            &text,
            "corral_scheduler_allocations_planned_total{placement=\"priority\"}"
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert!(
        value(
            &text,
            &format!("corral_accounting_user_gpu_hours_total{{user=\"{user}\"}}")
        )
        .is_some_and(|h| h > 0.0),
        "{text}"
    );
    for id in 1..=3 {
        let name = format!("controller-{id}");
        let text = scrape(&name);
        assert!(
            value(&text, "corral_raft_term").is_some_and(|t| t >= 1.0),
            "{name}: {text}"
        );
        assert_eq!(
            value(&text, "corral_raft_leadership_unconfirmed"),
            Some(0.0),
            "{name}"
        );
        let leads = value(&text, "corral_raft_leader");
        assert_eq!(
            leads,
            Some(if name == leader { 1.0 } else { 0.0 }),
            "{name}"
        );
        assert!(value(&text, "process_resident_memory_bytes").is_some_and(|b| b > 0.0));
        assert!(
            !samples(&text, "corral_log_lines_total").is_empty(),
            "{name}"
        );
        assert!(
            samples(&text, "corral_raft_sync_duration_milliseconds_count")
                .iter()
                .any(|(s, n)| s.contains("store=\"log\"") && *n > 0.0),
            "{name}: no log sync measured"
        );
        if name != leader {
            assert!(
                samples(&text, "corral_jobs").is_empty(),
                "{name} follows but reports the queue: a sum over replicas would count it twice"
            );
        }
    }
    let leader_text = scrape(&leader);
    assert!(
        samples(
            &leader_text,
            "corral_raft_propose_duration_milliseconds_count"
        )
        .iter()
        .any(|(s, n)| s.contains("outcome=\"committed\"") && *n > 0.0)
    );
    assert_eq!(
        samples(&leader_text, "corral_raft_follower_lag").len(),
        2,
        "{leader_text}"
    );
    prometheus_queries_the_running_job(dir, &job);
    // The agents: GPU health, the lease, and an XID counted where it
    // happened (an application XID on a GPU the job does not hold: it kills
    // nothing).
    let agent = format!("agent-{node}");
    let text = scrape(&agent);
    assert_eq!(
        samples(&text, "corral_gpu_temperature_celsius").len(),
        8,
        "{text}"
    );
    assert!(value(&text, "corral_agent_lease_remaining_milliseconds").is_some_and(|ms| ms > 0.0));
    assert!(
        value(
            &text,
            "corral_agent_heartbeat_round_trip_milliseconds_count"
        )
        .is_some_and(|n| n > 0.0),
        "{text}"
    );
    let idle_gpu = gpu_not_held(&cluster, &job, &node);
    let out = Command::new(corral_bin())
        .args(["local", "xid", "--dir"])
        .arg(dir)
        .args([
            "--node",
            &node,
            "--gpu",
            &idle_gpu.to_string(),
            "--xid",
            "13",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let counted = format!("corral_gpu_xids_total{{gpu=\"{idle_gpu}\",xid=\"13\"}}");
    wait_until(Duration::from_secs(30), "the XID is counted", || {
        value(&scrape(&agent), &counted) == Some(1.0)
    });
}

/// A GPU of `node` that job `job` does not hold.
fn gpu_not_held(cluster: &LocalCluster, job: &str, node: &str) -> u64 {
    let out = cluster.corral_at(
        "user-corral-admin",
        &cluster.addresses.join(","),
        &["--json", "show", "job", job],
    );
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let held: Vec<u64> = shown["job"]["attempts"][0]["allocation"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["node"] == node)
        .flat_map(|a| a["gpus"].as_array().cloned().unwrap_or_default())
        .filter_map(|g| g.as_u64())
        .collect();
    assert!(!held.is_empty(), "{shown}");
    (0..8).find(|g| !held.contains(g)).unwrap()
}

/// A real Prometheus scrapes the cluster through its targets file, and
/// `sum(corral_jobs{state="running"})` over the three replicas is 1 (the
/// leader's gauge alone).
fn prometheus_queries_the_running_job(dir: &Path, job: &str) {
    let Some(prometheus) = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        eprintln!(
            "skipped the Prometheus part: prometheus is not installed (apt-get install prometheus)"
        );
        return;
    };
    let port = free_port();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: corral\n    file_sd_configs:\n      - files: ['{}']\n        refresh_interval: 1s\n",
            dir.join("metrics-targets.json").display()
        ),
    )
    .unwrap();
    let server = KillOnDrop(
        Command::new(prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("prometheus-data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let address = format!("127.0.0.1:{port}");
    let query = "/api/v1/query?query=sum(corral_jobs%7Bstate%3D%22running%22%7D)";
    wait_until(
        Duration::from_secs(90),
        &format!("Prometheus counts job {job} running once"),
        || {
            let body = get(&address, query);
            serde_json::from_str::<serde_json::Value>(&body)
                .is_ok_and(|v| v["data"]["result"][0]["value"][1].as_str() == Some("1"))
        },
    );
    drop(server);
}

/// A port free on loopback now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_bad_metrics_address_is_refused_with_what_to_write() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("corral.toml");
    std::fs::write(
        &config,
        "cluster_name = \"c\"\nid = 1\n\n[listen]\nmetrics = \"nine-one-eight-oh\"\n\n[[replicas]]\nid = 1\npeer = \"127.0.0.1:7100\"\napi = \"127.0.0.1:6817\"\n",
    )
    .unwrap();
    let out = Command::new(support::corrald_bin())
        .args(["check-config", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("listen.metrics") && stderr.contains("0.0.0.0:9180"),
        "{stderr}"
    );
}
