//! `corral-chaos run --cluster`: the suite against a cluster it did not start
//! (here one `corral local up` started, standing in for an operator's
//! deployment), with faults injected only through the `--nemesis-exec`
//! commands it was given, and the cluster left running afterwards.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn chaos_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_corral-chaos"))
}

/// Stops the stand-in deployment however the test ends.
struct Deployment(PathBuf, PathBuf);

impl Drop for Deployment {
    fn drop(&mut self) {
        let _ = Command::new(&self.0)
            .args(["local", "down", "--dir"])
            .arg(&self.1)
            .output();
    }
}

fn certs(dir: &Path, name: &str) -> String {
    dir.join("certs").join(name).display().to_string()
}

#[test]
fn an_existing_deployment_is_faulted_only_through_the_commands_given() {
    let corral = chaos_bin().with_file_name("corral");
    assert!(corral.exists(), "build the workspace's binaries first");
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("deployment");
    let up = Command::new(&corral)
        .args(["--json", "local", "up", "--nodes", "2", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let _stop = Deployment(corral.clone(), dir.clone());
    let reply: serde_json::Value = serde_json::from_slice(&up.stdout).unwrap();
    let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    let user = format!("user-{}", user.trim());
    let pid = |name: &str| format!("$(cat {}/pids/{name}.pid)", dir.display());
    let start = |name: &str| {
        format!(
            "{} local start --dir {} {name}",
            corral.display(),
            dir.display()
        )
    };
    let out_dir = root.path().join("run");
    let out = Command::new(chaos_bin())
        .args(["run", "--scenario", "kill-leader", "--duration-s", "15"])
        .args(["--long-pct", "0", "--seed", "3"])
        .arg("--out")
        .arg(&out_dir)
        .args(["--cluster", reply["cluster"].as_str().unwrap()])
        .args(["--ca", &certs(&dir, "ca.pem")])
        .args(["--cert", &certs(&dir, &format!("{user}.pem"))])
        .args(["--key", &certs(&dir, &format!("{user}.key"))])
        .args(["--admin-cert", &certs(&dir, "user-corral-admin.pem")])
        .args(["--admin-key", &certs(&dir, "user-corral-admin.key")])
        .arg("--job-corral")
        .arg(&corral)
        .arg("--job-path")
        .arg(dir.join("bin"))
        .arg("--nemesis-exec")
        .arg(format!(
            "kill-controller=kill -9 {}",
            pid("controller-{id}")
        ))
        .arg("--nemesis-exec")
        .arg(format!("start-controller={}", start("controller-{id}")))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let history = std::fs::read_to_string(out_dir.join("history.jsonl")).unwrap();
    let kills = history
        .lines()
        .filter(|l| l.contains("\"fault_begin\"") && l.contains("kill-leader"))
        .count();
    assert!(kills >= 1, "no leader was killed:\n{stdout}");
    // Left running: the deployment still answers.
    let status = Command::new(&corral)
        .args(["--cluster", reply["cluster"].as_str().unwrap()])
        .args(["--ca", &certs(&dir, "ca.pem")])
        .args(["--cert", &certs(&dir, &format!("{user}.pem"))])
        .args(["--key", &certs(&dir, &format!("{user}.key"))])
        .arg("cluster")
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "the deployment was stopped: {}",
        String::from_utf8_lossy(&status.stderr)
    );
}
