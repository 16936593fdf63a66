//! The three-host deployment of `deploy/`, installed and run by the
//! runbook's own commands (its `step=` blocks, as written) on three
//! controller hosts and two GPU nodes, each a network and mount namespace
//! with the example's addresses (see `deploy_support`): certificates,
//! install, start, bootstrap, check; a job runs while the leader's host
//! loses its network for a minute (failover; the job goes on; a job
//! submitted meanwhile runs) and gets it back (it rejoins); a controller
//! host loses power and reboots; a backup is taken; every controller is
//! upgraded in place, followers first. Nothing submitted is lost, the long
//! job ran once, and no controller's log grew past a sane size.
//! The units themselves pass `systemd-analyze verify`.

#![allow(clippy::unwrap_used)]

mod deploy_support;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use deploy_support::{Host, Site, runbook_steps};
use support::{corral_bin, corrald_bin, netns_unsupported, sibling, wait_until};

const CONTROLLERS: [(&str, &str); 3] = [
    ("ctl1", "10.214.0.1"),
    ("ctl2", "10.214.0.2"),
    ("ctl3", "10.214.0.3"),
];
const NODES: [(&str, &str); 2] = [("gpu01", "10.214.0.11"), ("gpu02", "10.214.0.12")];
const CLUSTER: &str = "10.214.0.1:6817,10.214.0.2:6817,10.214.0.3:6817";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The admin machine: this one, on the bridge.
struct Admin {
    certs: PathBuf,
    work: PathBuf,
}

impl Admin {
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("CORRAL_CLUSTER", CLUSTER.to_string()),
            ("CORRAL_CA", self.certs.join("ca.pem").display().to_string()),
            (
                "CORRAL_CERT",
                self.certs.join("user-root.pem").display().to_string(),
            ),
            (
                "CORRAL_KEY",
                self.certs.join("user-root.key").display().to_string(),
            ),
        ]
    }

    fn corral(&self, args: &[&str]) -> Output {
        Command::new(corral_bin())
            .args(args)
            .envs(self.env())
            .current_dir(&self.work)
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.corral(args);
        assert!(
            out.status.success(),
            "corral {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn status(&self) -> serde_json::Value {
        serde_json::from_str(&self.ok(&["--json", "cluster"])).unwrap()
    }

    fn job(&self, id: &str) -> serde_json::Value {
        serde_json::from_str::<serde_json::Value>(&self.ok(&["--json", "show", "job", id])).unwrap()
            ["job"]
            .clone()
    }

    fn submit(&self, name: &str, body: &str) -> String {
        let path = self.work.join(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\n#SBATCH --gpus-per-node=1\n#SBATCH -o {}/{name}.out\n{body}\n",
                self.work.display()
            ),
        )
        .unwrap();
        self.ok(&["submit", "--parsable", path.to_str().unwrap()])
            .trim()
            .to_string()
    }

    /// Waits until every controller is a voter at lag 0 of a leader.
    fn settled(&self, what: &str) {
        wait_until(Duration::from_secs(90), what, || {
            let out = self.corral(&["--json", "cluster"]);
            let Ok(status) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
                return false;
            };
            status["leader"].as_u64().is_some()
                && status["members"]
                    .as_array()
                    .is_some_and(|m| m.len() == 3 && m.iter().all(|m| m["lag"].as_u64() == Some(0)))
        });
    }
}

/// A directory with the release's binaries and `deploy/`, as `DIST`.
fn dist(dir: &Path) -> PathBuf {
    let dist = dir.join("dist");
    std::fs::create_dir_all(&dist).unwrap();
    for (name, path) in [
        ("corrald", corrald_bin()),
        ("corral-agent", sibling("corral-agent")),
        ("corral", corral_bin()),
    ] {
        std::os::unix::fs::symlink(path, dist.join(name)).unwrap();
    }
    std::os::unix::fs::symlink(repo().join("deploy"), dist.join("deploy")).unwrap();
    dist
}

/// Runs a runbook step on the admin machine (this one), with `corral` on
/// its PATH.
fn on_admin_machine(script: &str, env: &[(&'static str, String)]) -> Output {
    Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .env(
            "PATH",
            format!(
                "{}:{}",
                corral_bin().parent().unwrap().display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .envs(env.iter().cloned())
        .output()
        .unwrap()
}

/// Every unit's output, for a failure's message.
fn site_logs(site: &Site) -> String {
    let mut text = String::new();
    for host in site.hosts.values() {
        for unit in ["corrald", "corral-agent"] {
            let log = host.unit_log(unit);
            if !log.is_empty() {
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                text.push_str(&format!("== {} {unit}\n", host.name));
                for line in tail.iter().rev() {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
    }
    text
}

#[test]
fn the_units_pass_systemd_analyze() {
    let Ok(probe) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("skipped: systemd-analyze is not installed");
        return;
    };
    assert!(probe.status.success());
    let dir = tempfile::tempdir().unwrap();
    let bin = corral_bin().parent().unwrap().to_path_buf();
    sibling("corral-agent");
    corrald_bin();
    let mut units = Vec::new();
    for unit in ["corrald.service", "corral-agent.service"] {
        let text = std::fs::read_to_string(repo().join("deploy/systemd").join(unit)).unwrap();
        let local = dir.path().join(unit);
        std::fs::write(
            &local,
            text.replace("/usr/local/bin/", &format!("{}/", bin.display())),
        )
        .unwrap();
        units.push(local);
    }
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .args(&units)
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_runbook_deploys_three_hosts_that_survive_a_cut_a_reboot_and_an_upgrade() {
    if let Some(why) = netns_unsupported() {
        eprintln!("skipped: {why}");
        return;
    }
    let steps = runbook_steps(&std::fs::read_to_string(repo().join("deploy/RUNBOOK.md")).unwrap());
    let step = |name: &str| -> &str {
        steps
            .get(name)
            .unwrap_or_else(|| panic!("the runbook has no step {name}"))
    };
    let dir = tempfile::tempdir().unwrap();
    let admin = Admin {
        certs: dir.path().join("certs"),
        work: dir.path().join("work"),
    };
    std::fs::create_dir_all(&admin.work).unwrap();
    let dist = dist(dir.path());
    let all: Vec<(&str, &str)> = CONTROLLERS.iter().chain(NODES.iter()).copied().collect();
    let site = Site::new(&all, &repo().join("cli/tests/fixtures/deploy/systemctl"));
    let common = [
        ("DIST", dist.display().to_string()),
        ("CERTS", admin.certs.display().to_string()),
    ];
    let with = |extra: &[(&'static str, String)]| -> Vec<(&'static str, String)> {
        common
            .iter()
            .cloned()
            .chain(extra.iter().cloned())
            .collect()
    };

    // 1. Certificates, on the admin machine.
    let certs = on_admin_machine(step("certs"), &with(&[]));
    assert!(
        certs.status.success(),
        "{}",
        String::from_utf8_lossy(&certs.stderr)
    );

    // 2-4. Install, start, bootstrap.
    let controllers: Vec<&Host> = CONTROLLERS.iter().map(|(n, _)| site.host(n)).collect();
    for (i, host) in controllers.iter().enumerate() {
        let id = (i + 1).to_string();
        host.ok(step("install-controller"), &with(&[("ID", id)]));
        host.ok(step("start-controller"), &with(&[]));
    }
    controllers[0].ok(step("bootstrap"), &with(&[]));
    for (node, _) in NODES {
        let host = site.host(node);
        host.ok(
            step("install-agent"),
            &with(&[
                ("NODE", node.to_string()),
                ("GPUS", "simulated:8:h100".to_string()),
                ("AGENT_OPTIONS", "--cpus 8 --memory-mb 16384".to_string()),
            ]),
        );
        host.ok(step("start-agent"), &with(&[]));
    }

    // 5. Check, as the runbook does, from the admin machine.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let nodes = admin.corral(&["--json", "nodes"]);
        let listed: serde_json::Value =
            serde_json::from_slice(&nodes.stdout).unwrap_or(serde_json::Value::Null);
        let up = listed["nodes"].as_array().map_or(0, |n| {
            n.iter()
                .filter(|n| n["availability"]["Up"].is_object() && n["drain"].is_null())
                .count()
        });
        if up == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "both nodes did not register: {listed}\n{}",
            site_logs(&site)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let check = on_admin_machine(step("check"), &with(&[]));
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success() && said.contains("Leader:"), "{said}");
    assert!(
        said.contains("gpu[01-02]") || (said.contains("gpu01") && said.contains("gpu02")),
        "{said}"
    );

    // A job that runs until released.
    let release = admin.work.join("release");
    let long = admin.submit(
        "long",
        &format!(
            "echo \"start attempt=$SLURM_RESTART_COUNT\"\nwhile [ ! -e {} ]; do sleep 0.2; done",
            release.display()
        ),
    );
    wait_until(Duration::from_secs(60), "the long job to start", || {
        admin.job(&long)["state"] == "Running"
    });

    // 6. The leader's host loses its network for a minute.
    let leader = admin.status()["leader"].as_u64().unwrap() as usize;
    let cut = controllers[leader - 1];
    cut.set_network(false);
    wait_until(Duration::from_secs(30), "a new leader", || {
        serde_json::from_slice::<serde_json::Value>(&admin.corral(&["--json", "cluster"]).stdout)
            .is_ok_and(|s| s["leader"].as_u64().is_some_and(|l| l as usize != leader))
    });
    let during = admin.submit("during", "echo during");
    wait_until(
        Duration::from_secs(60),
        "the job submitted during the cut",
        || admin.job(&during)["state"] == "Completed",
    );
    std::thread::sleep(Duration::from_secs(60));
    assert_eq!(
        admin.job(&long)["state"],
        "Running",
        "the long job outlives the cut"
    );
    cut.set_network(true);
    admin.settled("the cut-off host to rejoin");

    // A controller host loses power and reboots: its enabled unit starts.
    let rebooted = controllers[leader % 3];
    rebooted.crash();
    rebooted.ok("systemctl start corrald", &with(&[]));
    admin.settled("the rebooted host to catch up");

    // 10. A backup, from the admin's side of ctl1 (its /var/backups).
    controllers[0].ok(step("backup"), &with(&admin.env()));
    let backups: Vec<PathBuf> = std::fs::read_dir(controllers[0].path("/var/backups"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    let inspected = admin.corral(&["admin", "snapshot", "inspect", backups[0].to_str().unwrap()]);
    assert!(inspected.status.success(), "{inspected:?}");

    // 9. Upgrade in place, followers first, the leader last.
    let leader = admin.status()["leader"].as_u64().unwrap() as usize;
    let mut order: Vec<usize> = (1..=3).filter(|id| *id != leader).collect();
    order.push(leader);
    for id in order {
        controllers[id - 1].ok(step("upgrade-controller"), &with(&[]));
        admin.settled("the upgraded controller to catch up");
    }

    std::fs::write(&release, "").unwrap();
    let after = admin.submit("after", "echo after");
    for id in [&long, &during, &after] {
        wait_until(Duration::from_secs(90), "every job to complete", || {
            admin.job(id)["state"] == "Completed"
        });
    }
    let record = admin.job(&long);
    assert_eq!(record["requeue_count"], 0, "{record}");
    let out = std::fs::read_to_string(admin.work.join("long.out")).unwrap();
    assert_eq!(out.matches("start attempt=").count(), 1, "ran once: {out}");
    for host in &controllers {
        let log = host.unit_log("corrald");
        assert!(
            log.len() < 20 * 1024 * 1024,
            "{}'s corrald wrote {} bytes of log",
            host.name,
            log.len()
        );
        eprintln!("{}: corrald log {} bytes", host.name, log.len());
    }
    for (node, _) in NODES {
        let log = site.host(node).unit_log("corral-agent");
        assert!(
            !log.contains("lease lapsed"),
            "{node} fenced its jobs:\n{log}"
        );
    }
}
