//! `corral top` in a real terminal (tmux): it shows the leader and the
//! replicas, the queue, the running job on its GPUs; when the leader is
//! killed it lists the election and names the new leader; an XID on the
//! job's GPU shows as a GPU fault and a requeue; `q` ends it.

#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::{LocalCluster, corral_bin, script, submit_and_start};

/// A tmux session running one command, killed when dropped.
struct Tmux {
    name: String,
}

impl Tmux {
    fn start(command: &str) -> Tmux {
        let name = format!("corral-top-{}", std::process::id());
        let status = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &name,
                "-x",
                "150",
                "-y",
                "45",
                command,
            ])
            .status()
            .unwrap();
        assert!(status.success(), "tmux did not start");
        Tmux { name }
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the screen shows what `shows` looks for.
    fn wait_for(&self, what: &str, shows: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if shows(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "corral top never showed {what}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn alive(&self) -> bool {
        Command::new("tmux")
            .args(["has-session", "-t", &self.name])
            .output()
            .is_ok_and(|o| o.status.success())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .output();
    }
}

#[test]
fn top_follows_a_leader_kill_and_an_xid_and_quits_on_q() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipped: tmux is not installed");
        return;
    }
    let cluster = LocalCluster::start_with_args(3, &["--nodes", "2"]);
    let dir = cluster.dir.path();
    let (job, node) = submit_and_start(
        &cluster,
        &script(
            dir,
            "watched.sh",
            "#!/bin/sh\n#SBATCH --gpus-per-node=2\n#SBATCH --output=watched-%j.out\nsleep 300\n",
        ),
    );
    let top = Tmux::start(&format!(
        "set -a; . {}; exec {} top",
        dir.join("admin.env").display(),
        corral_bin().display()
    ));
    let leader = cluster.leader();
    let first = top.wait_for("the leader, the queue and the job's GPUs", |s| {
        s.contains(&format!("Leader {leader} ("))
            && s.contains("RUNNING")
            && s.lines()
                .any(|l| l.contains(&node) && l.matches(&format!(" {job}")).count() == 2)
    });
    assert!(
        first.contains("Replicas") && first.contains("Events"),
        "{first}"
    );

    cluster.kill(leader);
    let after = top.wait_for("the election", |s| {
        s.contains("election") && !s.contains(&format!("Leader {leader} ("))
    });
    assert!(after.contains("Leader "), "{after}");

    let record = support::wait_job(&cluster, &job, Duration::from_secs(5), "a read", |_| true);
    let gpu = record["attempts"][0]["allocation"][0]["gpus"][0]
        .as_u64()
        .unwrap()
        .to_string();
    let out = Command::new(corral_bin())
        .args(["local", "xid", "--dir"])
        .arg(dir)
        .args(["--node", &node, "--gpu", &gpu, "--xid", "79"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    top.wait_for("the GPU fault and the requeue", |s| {
        s.contains("gpu fault") && s.contains("XID 79") && s.contains("requeue")
    });

    let status = Command::new("tmux")
        .args(["send-keys", "-t", &top.name, "q"])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while top.alive() {
        assert!(Instant::now() < deadline, "q did not end corral top");
        std::thread::sleep(Duration::from_millis(100));
    }
}
