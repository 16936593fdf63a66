//! The cluster under test, reached with the `corral` CLI as a user would: a
//! local cluster of real processes started with `corral local up` (three
//! controllers, agents with simulated GPUs; stopped, with every process, when
//! dropped), or an existing deployment named by its addresses and a user's
//! certificate (left as it was found). Faults reach it through
//! [`Control`](crate::control::Control).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use anyhow::{Context, bail};
use nix::sys::signal::Signal;

use crate::control::{Control, signal};

/// A running cluster.
pub struct Cluster {
    /// The `corral` binary here.
    pub corral: PathBuf,
    /// The controllers' client addresses, `host:port,...`.
    pub addresses: String,
    /// The controllers' ids, and the nodes (`gpu01`...).
    pub controllers: Vec<u64>,
    pub nodes: Vec<String>,
    /// Whether partitions can be made (a local cluster on its own network,
    /// or a deployment with `cut` and `heal` commands).
    pub network: bool,
    /// What the jobs need on the nodes: a directory to put first on PATH
    /// (the local cluster's Slurm-named shims), and the `corral` they call.
    pub job_path: Option<PathBuf>,
    pub job_corral: PathBuf,
    /// How faults reach the processes.
    pub control: Control,
    /// The certificates: the CA, and the user's and the administrator's
    /// certificate and key.
    credentials: Credentials,
}

/// Whose certificate a call uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// The user the workload runs as.
    User,
    /// An administrator (the user again on a deployment without one given).
    Admin,
}

struct Credentials {
    ca: PathBuf,
    user: (PathBuf, PathBuf),
    admin: (PathBuf, PathBuf),
}

/// Where a local cluster's processes talk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalNetwork {
    /// Each in a network namespace of its own (`corral local up --netns`).
    Netns,
    /// On loopback behind a fault proxy (`--fault-proxy`).
    Proxy,
    /// On loopback with nothing between them: no partitions.
    Loopback,
}

/// An existing deployment, as `corral-chaos run --cluster` names it.
pub struct Deployment {
    pub addresses: String,
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub admin: Option<(PathBuf, PathBuf)>,
    pub commands: BTreeMap<String, String>,
    /// The `corral` the jobs call on the nodes, and a directory they put
    /// first on PATH (for `srun`).
    pub job_corral: PathBuf,
    pub job_path: Option<PathBuf>,
}

impl Cluster {
    /// `corral local up` in `dir` (which must not hold a running cluster),
    /// on `network`; with `site`, the cluster that file defines (`--config`:
    /// it must define `nodes` nodes `gpu01`...).
    pub fn up(
        corral: &Path,
        dir: &Path,
        (controllers, nodes): (u32, u32),
        network: LocalNetwork,
        site: Option<&Path>,
    ) -> anyhow::Result<Cluster> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let shape: Vec<std::ffi::OsString> = match site {
            Some(file) => vec!["--config".into(), file.into()],
            None => vec!["--nodes".into(), nodes.to_string().into()],
        };
        let out = Command::new(corral)
            .args(["--json", "local", "up", "--dir"])
            .arg(dir)
            .args(["--controllers", &controllers.to_string()])
            .args(shape)
            .args(match network {
                LocalNetwork::Netns => Some("--netns"),
                LocalNetwork::Proxy => Some("--fault-proxy"),
                LocalNetwork::Loopback => None,
            })
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
        let certs = dir.join("certs");
        let pair = |principal: &str| {
            (
                certs.join(format!("{principal}.pem")),
                certs.join(format!("{principal}.key")),
            )
        };
        Ok(Cluster {
            corral: corral.to_path_buf(),
            addresses,
            controllers: (1..=u64::from(controllers)).collect(),
            nodes: (1..=nodes).map(|i| format!("gpu{i:02}")).collect(),
            network: network != LocalNetwork::Loopback,
            job_path: Some(dir.join("bin")),
            job_corral: corral.to_path_buf(),
            control: Control::Local {
                corral: corral.to_path_buf(),
                dir: dir.to_path_buf(),
            },
            credentials: Credentials {
                ca: certs.join("ca.pem"),
                user: pair(&format!("user-{}", current_user()?)),
                admin: pair("user-corral-admin"),
            },
        })
    }

    /// An existing deployment: its controllers and nodes are read from it
    /// (`corral cluster`, `corral nodes`); a controller's host is that of its
    /// client address, a node's its name.
    pub fn existing(corral: &Path, deployment: Deployment) -> anyhow::Result<Cluster> {
        let admin = deployment
            .admin
            .clone()
            .unwrap_or((deployment.cert.clone(), deployment.key.clone()));
        let mut cluster = Cluster {
            corral: corral.to_path_buf(),
            addresses: deployment.addresses.clone(),
            controllers: Vec::new(),
            nodes: Vec::new(),
            network: deployment.commands.contains_key("cut")
                && deployment.commands.contains_key("heal"),
            job_path: deployment.job_path.clone(),
            job_corral: deployment.job_corral.clone(),
            control: Control::Exec {
                commands: deployment.commands.clone(),
                hosts: BTreeMap::new(),
            },
            credentials: Credentials {
                ca: deployment.ca.clone(),
                user: (deployment.cert.clone(), deployment.key.clone()),
                admin,
            },
        };
        let deadline = Duration::from_secs(20);
        let status = cluster.json(Who::Admin, &["--json", "cluster"], deadline)?;
        let mut hosts = BTreeMap::new();
        for member in status["members"].as_array().into_iter().flatten() {
            let id = member["id"].as_u64().context("a member without an id")?;
            let api = member["api"].as_str().unwrap_or_default();
            let host = api.rsplit_once(':').map_or(api, |(host, _)| host);
            hosts.insert(
                format!("controller-{id}"),
                host.trim_matches(['[', ']']).to_string(),
            );
            cluster.controllers.push(id);
        }
        let nodes = cluster.json(Who::Admin, &["--json", "nodes"], deadline)?;
        for node in nodes["nodes"]
            .as_array()
            .or_else(|| nodes.as_array())
            .into_iter()
            .flatten()
        {
            if let Some(name) = node["name"].as_str() {
                hosts.insert(format!("agent-{name}"), name.to_string());
                cluster.nodes.push(name.to_string());
            }
        }
        if cluster.controllers.is_empty() || cluster.nodes.is_empty() {
            bail!(
                "{} named {} controllers and {} nodes: chaos needs both",
                deployment.addresses,
                cluster.controllers.len(),
                cluster.nodes.len()
            );
        }
        cluster.control = Control::Exec {
            commands: deployment.commands,
            hosts,
        };
        Ok(cluster)
    }

    /// `corral ARGS` as `who`, with a deadline: a hung call is killed and
    /// reported as such.
    pub fn corral_as(&self, who: Who, args: &[&str], deadline: Duration) -> anyhow::Result<Output> {
        let (cert, key) = match who {
            Who::User => &self.credentials.user,
            Who::Admin => &self.credentials.admin,
        };
        let mut command = Command::new("timeout");
        command
            .args(["-s", "KILL", &format!("{}", deadline.as_secs_f64())])
            .arg(&self.corral)
            .arg("--cluster")
            .arg(&self.addresses)
            .arg("--ca")
            .arg(&self.credentials.ca)
            .arg("--cert")
            .arg(cert)
            .arg("--key")
            .arg(key)
            .args(args)
            .env_remove("CORRAL_CONFIG");
        command.output().context("running corral")
    }

    /// `corral ARGS` as the submitting user.
    pub fn corral(&self, args: &[&str], deadline: Duration) -> anyhow::Result<Output> {
        self.corral_as(Who::User, args, deadline)
    }

    /// `corral ARGS` as `who`, which must succeed and print JSON.
    fn json(
        &self,
        who: Who,
        args: &[&str],
        deadline: Duration,
    ) -> anyhow::Result<serde_json::Value> {
        let out = self.corral_as(who, args, deadline)?;
        if !out.status.success() {
            bail!(
                "corral {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        serde_json::from_slice(&out.stdout)
            .with_context(|| format!("reading corral {}", args.join(" ")))
    }

    /// `corral ARGS` as the administrator, which must succeed (retried for
    /// 30 s while it fails: an election may be under way).
    pub fn admin(&self, args: &[&str]) -> anyhow::Result<()> {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let out = self.corral_as(Who::Admin, args, Duration::from_secs(30))?;
            if out.status.success() {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                bail!(
                    "corral {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Controller `id`'s peer and client addresses, as the cluster lists them.
    pub fn member_addresses(&self, id: u64) -> anyhow::Result<(String, String)> {
        let status = self.json(Who::Admin, &["--json", "cluster"], Duration::from_secs(10))?;
        let member = status["members"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["id"].as_u64() == Some(id))
            .with_context(|| format!("controller {id} is not a member"))?;
        let text = |key: &str| {
            member[key]
                .as_str()
                .map(String::from)
                .with_context(|| format!("controller {id} has no {key} address"))
        };
        Ok((text("peer")?, text("api")?))
    }

    /// The leader's id and term, if a controller names one.
    pub fn leader(&self) -> Option<(u64, u64)> {
        self.leader_view().map(|view| (view.leader, view.term))
    }

    /// The leader's view of the replicas, if a controller names a leader.
    pub fn leader_view(&self) -> Option<LeaderView> {
        let out = self
            .corral_as(Who::Admin, &["--json", "cluster"], Duration::from_secs(3))
            .ok()?;
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        let leader = status["leader"].as_u64()?;
        let members = status["members"].as_array().cloned().unwrap_or_default();
        // Lags are the leader's figures: an answer from another replica has none.
        let caught_up = members
            .iter()
            .filter(|m| m["lag"].as_u64() == Some(0))
            .filter_map(|m| m["id"].as_u64())
            .collect();
        Some(LeaderView {
            leader,
            term: status["term"].as_u64()?,
            members: members.iter().filter_map(|m| m["id"].as_u64()).collect(),
            caught_up,
        })
    }
}

/// Who leads, and which replicas its log reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderView {
    /// The leader.
    pub leader: u64,
    /// Its term.
    pub term: u64,
    /// Every member.
    pub members: Vec<u64>,
    /// The members at lag 0 (none when a replica that does not lead answered).
    pub caught_up: Vec<u64>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // A deployment is left as it was found (every fault healed itself).
        let Control::Local { corral, dir } = &self.control else {
            return;
        };
        // Resume anything paused first: a stopped process ignores SIGTERM.
        let names = self
            .controllers
            .iter()
            .map(|i| format!("controller-{i}"))
            .chain(self.nodes.iter().map(|n| format!("agent-{n}")));
        for name in names {
            let _ = signal(dir, &name, Signal::SIGCONT);
        }
        let _ = Command::new(corral)
            .args(["local", "down", "--dir"])
            .arg(dir)
            .output();
    }
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
