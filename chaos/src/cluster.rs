//! The cluster under test: a local cluster of real processes started with
//! `corral local up` (three controllers, agents with simulated GPUs), reached
//! with the `corral` CLI as a user would, faulted by signals to its
//! processes' pids and `corral local start` / `corral local xid`. Stopped,
//! with every process, when dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use anyhow::{Context, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A running local cluster.
pub struct Cluster {
    /// The `corral` binary.
    pub corral: PathBuf,
    /// The cluster's directory (certificates, logs, pids, `bin/` with the
    /// Slurm-named links).
    pub dir: PathBuf,
    /// The controllers' client addresses, `host:port,...`.
    pub addresses: String,
    /// Controllers (1..=n) and nodes (`gpu01`...).
    pub controllers: u32,
    pub nodes: Vec<String>,
    /// The principal jobs are submitted as (`user-NAME`).
    pub user: String,
    /// Whether every process has a network namespace of its own, so that
    /// [`Cluster::cut`] can partition them.
    pub network: bool,
}

impl Cluster {
    /// `corral local up` in `dir` (which must not hold a running cluster),
    /// with `--netns` when `network`.
    pub fn up(
        corral: &Path,
        dir: &Path,
        (controllers, nodes): (u32, u32),
        network: bool,
    ) -> anyhow::Result<Cluster> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let out = Command::new(corral)
            .args(["--json", "local", "up", "--dir"])
            .arg(dir)
            .args(["--controllers", &controllers.to_string()])
            .args(["--nodes", &nodes.to_string()])
            .args(network.then_some("--netns"))
            .output()
            .context("running corral local up")?;
        if !out.status.success() {
            bail!(
                "corral local up failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let reply: serde_json::Value =
            serde_json::from_slice(&out.stdout).context("corral local up's answer")?;
        let addresses = reply["cluster"]
            .as_str()
            .context("corral local up named no cluster address")?
            .to_string();
        let user = format!("user-{}", current_user()?);
        Ok(Cluster {
            corral: corral.to_path_buf(),
            dir: dir.to_path_buf(),
            addresses,
            controllers,
            nodes: (1..=nodes).map(|i| format!("gpu{i:02}")).collect(),
            user,
            network,
        })
    }

    /// `corral ARGS` as `principal`, with a deadline: a hung call is killed
    /// and reported as such.
    pub fn corral_as(
        &self,
        principal: &str,
        args: &[&str],
        deadline: Duration,
    ) -> anyhow::Result<Output> {
        let certs = self.dir.join("certs");
        let mut command = Command::new("timeout");
        command
            .args(["-s", "KILL", &format!("{}", deadline.as_secs_f64())])
            .arg(&self.corral)
            .arg("--cluster")
            .arg(&self.addresses)
            .arg("--ca")
            .arg(certs.join("ca.pem"))
            .arg("--cert")
            .arg(certs.join(format!("{principal}.pem")))
            .arg("--key")
            .arg(certs.join(format!("{principal}.key")))
            .args(args)
            .env_remove("CORRAL_CONFIG")
            .current_dir(&self.dir);
        command.output().context("running corral")
    }

    /// `corral ARGS` as the submitting user.
    pub fn corral(&self, args: &[&str], deadline: Duration) -> anyhow::Result<Output> {
        self.corral_as(&self.user, args, deadline)
    }

    /// The leader's id and term, if a controller names one.
    pub fn leader(&self) -> Option<(u64, u64)> {
        let out = self
            .corral_as(
                "user-corral-admin",
                &["--json", "cluster"],
                Duration::from_secs(3),
            )
            .ok()?;
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        Some((status["leader"].as_u64()?, status["term"].as_u64()?))
    }

    /// The pid of process `name` (`controller-1`, `agent-gpu01`).
    pub fn pid(&self, name: &str) -> anyhow::Result<i32> {
        let path = self.dir.join("pids").join(format!("{name}.pid"));
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        Ok(text.trim().parse()?)
    }

    /// Sends `signal` to process `name`.
    pub fn signal(&self, name: &str, signal: Signal) -> anyhow::Result<()> {
        let pid = self.pid(name)?;
        kill(Pid::from_raw(pid), signal).with_context(|| format!("{signal} to {name} (pid {pid})"))
    }

    /// Whether process `name` runs.
    pub fn alive(&self, name: &str) -> bool {
        self.pid(name)
            .is_ok_and(|pid| kill(Pid::from_raw(pid), None).is_ok() && !zombie(pid))
    }

    /// `corral local start NAME`: brings a stopped process back.
    pub fn start(&self, name: &str) -> anyhow::Result<()> {
        self.start_with_env(name, &[])
    }

    /// `corral local start NAME --env K=V...`: brings a stopped process back
    /// with extra environment (a skewed clock).
    pub fn start_with_env(&self, name: &str, env: &[String]) -> anyhow::Result<()> {
        let out = Command::new(&self.corral)
            .args(["local", "start", "--dir"])
            .arg(&self.dir)
            .arg(name)
            .args(env.iter().flat_map(|pair| ["--env", pair.as_str()]))
            .output()
            .context("running corral local start")?;
        if !out.status.success() {
            bail!(
                "corral local start {name}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// `corral local cut`: drops every packet between each process of `one`
    /// and each of `other`, until [`Cluster::heal`].
    pub fn cut(&self, one: &[String], other: &[String]) -> anyhow::Result<()> {
        self.local(&["cut", &one.join(","), "--from", &other.join(",")])
    }

    /// `corral local heal`: lifts every cut.
    pub fn heal(&self) -> anyhow::Result<()> {
        self.local(&["heal"])
    }

    fn local(&self, args: &[&str]) -> anyhow::Result<()> {
        let out = Command::new(&self.corral)
            .arg("local")
            .arg(args[0])
            .arg("--dir")
            .arg(&self.dir)
            .args(&args[1..])
            .output()
            .with_context(|| format!("running corral local {}", args[0]))?;
        if !out.status.success() {
            bail!(
                "corral local {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// `corral local xid`: an XID on a simulated GPU.
    pub fn xid(&self, node: &str, gpu: u32, xid: u32) -> anyhow::Result<()> {
        let out = Command::new(&self.corral)
            .args(["local", "xid", "--dir"])
            .arg(&self.dir)
            .args([
                "--node",
                node,
                "--gpu",
                &gpu.to_string(),
                "--xid",
                &xid.to_string(),
            ])
            .output()
            .context("running corral local xid")?;
        if !out.status.success() {
            bail!(
                "corral local xid on {node} GPU {gpu}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Resume anything paused first: a stopped process ignores SIGTERM.
        let names = (1..=self.controllers)
            .map(|i| format!("controller-{i}"))
            .chain(self.nodes.iter().map(|n| format!("agent-{n}")));
        for name in names {
            let _ = self.signal(&name, Signal::SIGCONT);
        }
        let _ = Command::new(&self.corral)
            .args(["local", "down", "--dir"])
            .arg(&self.dir)
            .output();
    }
}

/// Whether `pid` has exited but not been reaped.
fn zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// The user running this, as the cluster's certificates name them.
fn current_user() -> anyhow::Result<String> {
    let out = Command::new("id")
        .arg("-un")
        .output()
        .context("running id -un")?;
    let name = String::from_utf8(out.stdout)?.trim().to_string();
    if name.is_empty() {
        bail!("id -un named no user");
    }
    Ok(name)
}
