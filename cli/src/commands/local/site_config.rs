//! `corral local up --config FILE`: a local cluster that looks like a site's
//! production one. The site's `corral.toml` (written by hand, or by `corral
//! import-slurm` from slurm.conf) gives the cluster's definition: nodes with
//! their CPUs, memory, GPUs and features, partitions, accounts, users, QOS,
//! topology, reservations and settings. Its daemon keys (`id`, `data_dir`,
//! `[tls]`, `[listen]`, `[[replicas]]`) are replaced by the local cluster's own,
//! the local users are added to its first account when it does not name them,
//! and each node gets a simulated agent with the node's resources.

use std::path::Path;

use anyhow::{Context, bail};
use corral_controller::config::{
    AccountSection, ConfigFile, ListenSection, ReplicaSection, TlsSection, UserSection,
};
use corral_state::slurm::hostlist;
use corral_state::slurm::memory::parse_memory_mb;

/// The account the local users charge when the site's file has none.
const LOCAL_ACCOUNT: &str = "local";

/// Most nodes a local cluster from a site's file may have: each is an agent
/// process on this machine.
pub const MAX_LOCAL_NODES: usize = 256;

/// One node of the site's file, as its simulated agent reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteNode {
    /// Its name.
    pub name: String,
    /// Schedulable CPUs.
    pub cpus: u32,
    /// Schedulable memory, MiB.
    pub memory_mb: u64,
    /// GPUs.
    pub gpus: u32,
    /// Their type (`h100`).
    pub gpu_type: Option<String>,
    /// Those split into MIG instances (`GPUS:PROFILES` entries).
    pub mig: Vec<String>,
}

impl SiteNode {
    /// The agent's `--gpus` value: simulated GPUs of the node's type, those
    /// its `mig` entries name split into MIG instances.
    pub fn agent_gpus(&self) -> String {
        match (&self.gpu_type, self.gpus) {
            (_, 0) => "none".to_string(),
            (Some(kind), count) if !self.mig.is_empty() => {
                format!("simulated:{count}:{kind}:mig={}", self.mig.join(","))
            }
            (Some(kind), count) => format!("simulated:{count}:{kind}"),
            (None, count) => format!("simulated:{count}"),
        }
    }
}

/// A site's definition, ready to be written for each local controller.
#[derive(Debug, Clone)]
pub struct SiteConfig {
    file: ConfigFile,
    /// Its nodes, expanded.
    pub nodes: Vec<SiteNode>,
}

impl SiteConfig {
    /// Reads `path`, checks it as a controller would (with stand-in daemon
    /// keys), expands its nodes, and adds `users` (each charging the file's
    /// first account) when the file does not name them.
    pub fn load(path: &Path, users: &[String]) -> anyhow::Result<SiteConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the cluster configuration {}", path.display()))?;
        let mut file =
            corral_controller::config::parse_file(&without_daemon_keys(&text, path)?, path)?;
        // A site without accounts (Slurm without accounting) gets one to
        // charge the local users' jobs to.
        if file.accounts.is_empty() {
            file.accounts.push(AccountSection {
                name: LOCAL_ACCOUNT.to_string(),
                parent: None,
                shares: None,
                default_qos: None,
                description: "added by corral local up: the site defines no accounts".into(),
            });
        }
        let account = file
            .accounts
            .first()
            .map(|a| a.name.clone())
            .unwrap_or_else(|| LOCAL_ACCOUNT.to_string());
        for user in users {
            if !file.users.iter().any(|u| &u.name == user) {
                file.users.push(UserSection {
                    name: user.clone(),
                    accounts: vec![account.clone()],
                    default_account: None,
                    role: None,
                });
            }
        }
        let mut nodes = Vec::new();
        for section in &file.nodes {
            let names = hostlist::expand(&section.names).with_context(|| {
                format!("{}: [[nodes]] names = {:?}", path.display(), section.names)
            })?;
            let memory_mb = parse_memory_mb(&section.memory).with_context(|| {
                format!(
                    "{}: [[nodes]] memory = {:?}",
                    path.display(),
                    section.memory
                )
            })?;
            nodes.extend(names.into_iter().map(|name| SiteNode {
                name,
                cpus: section.cpus,
                memory_mb,
                gpus: section.gpus,
                gpu_type: section.gpu_type.clone(),
                mig: section.mig.clone(),
            }));
        }
        if nodes.is_empty() {
            bail!("{} defines no [[nodes]]", path.display());
        }
        if nodes.len() > MAX_LOCAL_NODES {
            bail!(
                "{} defines {} nodes; a local cluster runs an agent process for each, at most {MAX_LOCAL_NODES}: trim the [[nodes]] lines to a sample of the cluster",
                path.display(),
                nodes.len()
            );
        }
        let config = SiteConfig { file, nodes };
        // Checked as a controller would check it, before anything starts.
        let probe = config.controller_text(
            1,
            &[(1, "127.0.0.1:1".into(), "127.0.0.1:2".into())],
            &ListenSection::default(),
            Path::new("/nonexistent-local-cluster"),
        )?;
        corral_controller::config::parse(&probe, path)?;
        Ok(config)
    }

    /// The site's cluster name.
    pub fn cluster_name(&self) -> &str {
        &self.file.cluster_name
    }

    /// The `corral.toml` of local controller `id` of `replicas` (id, peer,
    /// api), listening as `listen` says, with its data and certificates in
    /// `dir`.
    pub fn controller_text(
        &self,
        id: u64,
        replicas: &[(u64, String, String)],
        listen: &ListenSection,
        dir: &Path,
    ) -> anyhow::Result<String> {
        let certs = dir.join("certs");
        let mut file = self.file.clone();
        file.id = Some(id);
        file.data_dir = Some(dir.join(format!("controller-{id}/data")));
        file.listen = listen.clone();
        file.tls = TlsSection {
            ca: Some(certs.join("ca.pem")),
            cert: Some(certs.join(format!("controller-{id}.pem"))),
            key: Some(certs.join(format!("controller-{id}.key"))),
        };
        file.replicas = replicas
            .iter()
            .map(|(rid, peer, api)| ReplicaSection {
                id: *rid,
                peer: peer.clone(),
                api: api.clone(),
            })
            .collect();
        let text =
            toml::to_string(&file).context("cannot write the local controller's configuration")?;
        Ok(format!(
            "# Written by `corral local up --config`: the site's definition with this\n# local controller's own keys.\n{text}"
        ))
    }
}

/// The keys of one controller's own (`id`, `data_dir`, `[listen]`, `[tls]`,
/// `[[replicas]]`): the local cluster writes its own, so a site's file need
/// not have them and any it has are dropped.
const DAEMON_KEYS: [&str; 5] = ["id", "data_dir", "listen", "tls", "replicas"];

/// `text` without [`DAEMON_KEYS`], with a stand-in replica so that the
/// schema, which requires one, reads the rest.
fn without_daemon_keys(text: &str, path: &Path) -> anyhow::Result<String> {
    let mut table: toml::Table = text
        .parse()
        .with_context(|| format!("{} is not TOML", path.display()))?;
    for key in DAEMON_KEYS {
        table.remove(key);
    }
    let mut stand_in = toml::Table::new();
    stand_in.insert("id".into(), toml::Value::Integer(1));
    stand_in.insert("peer".into(), toml::Value::String("127.0.0.1:1".into()));
    stand_in.insert("api".into(), toml::Value::String("127.0.0.1:2".into()));
    table.insert(
        "replicas".into(),
        toml::Value::Array(vec![toml::Value::Table(stand_in)]),
    );
    toml::to_string(&table).context("cannot re-read the cluster configuration")
}
