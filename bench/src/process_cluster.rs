//! A replica group of real processes (`corral-bench replica`) on loopback, with a
//! fresh development CA: start, SIGKILL, restart, and a leader-following client.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use corral_consensus::leader_client::LeaderClient;
use corral_pki::{ClusterCa, Role, TlsMaterial};
use tempfile::TempDir;

/// Replica processes and their files. Dropping it kills them all.
pub struct ProcessCluster {
    root: TempDir,
    exe: PathBuf,
    peers: BTreeMap<u64, String>,
    children: BTreeMap<u64, Child>,
    client_tls: TlsMaterial,
    timing_args: Vec<String>,
}

/// A free loopback port (bound and released; fine for a benchmark).
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl ProcessCluster {
    /// Starts `replicas` processes and bootstraps them as one group.
    pub fn start(replicas: u64, timing_args: Vec<String>) -> anyhow::Result<Self> {
        corral_pki::install_crypto_provider();
        let root = tempfile::tempdir()?;
        let ca = ClusterCa::generate("bench")?;
        std::fs::write(root.path().join("ca.pem"), ca.ca_pem())?;
        for id in 1..=replicas {
            let issued = ca.issue(
                Role::Controller,
                &format!("controller-{id}"),
                &["127.0.0.1"],
            )?;
            std::fs::write(root.path().join(format!("{id}.crt")), issued.cert_pem)?;
            std::fs::write(root.path().join(format!("{id}.key")), issued.key_pem)?;
        }
        // The peer protocol serves controllers only; the client proposes through it.
        let client_tls = ca.material(Role::Controller, "bench-client", &[])?;
        let peers = (1..=replicas)
            .map(|id| Ok((id, format!("127.0.0.1:{}", free_port()?))))
            .collect::<anyhow::Result<_>>()?;
        let mut cluster = ProcessCluster {
            root,
            exe: std::env::current_exe()?,
            peers,
            children: BTreeMap::new(),
            client_tls,
            timing_args,
        };
        for id in 1..=replicas {
            cluster.launch(id, id == 1)?;
        }
        Ok(cluster)
    }

    /// Starts (or restarts, on its old port and directory) replica `id`.
    pub fn launch(&mut self, id: u64, bootstrap: bool) -> anyhow::Result<()> {
        let root = self.root.path();
        let peers = self
            .peers
            .iter()
            .map(|(id, a)| format!("{id}={a}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut command = Command::new(&self.exe);
        command
            .arg("replica")
            .args(["--id", &id.to_string(), "--peers", &peers])
            .arg("--dir")
            .arg(root.join(format!("data-{id}")))
            .arg("--ca")
            .arg(root.join("ca.pem"))
            .arg("--cert")
            .arg(root.join(format!("{id}.crt")))
            .arg("--key")
            .arg(root.join(format!("{id}.key")))
            .args(&self.timing_args)
            .stdout(Stdio::null());
        // With CORRAL_BENCH_LOG_DIR set, each replica's stderr (its logs) goes there.
        match std::env::var_os("CORRAL_BENCH_LOG_DIR") {
            Some(dir) => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(std::path::Path::new(&dir).join(format!("replica-{id}.log")))?;
                command.stderr(file);
            }
            None => {
                command.stderr(Stdio::null());
            }
        }
        if bootstrap {
            command.arg("--bootstrap");
        }
        self.children.insert(id, command.spawn()?);
        Ok(())
    }

    /// Replica `id`'s data directory.
    pub fn data_dir(&self, id: u64) -> PathBuf {
        self.root.path().join(format!("data-{id}"))
    }

    /// SIGKILLs replica `id`.
    pub fn kill(&mut self, id: u64) -> anyhow::Result<()> {
        if let Some(mut child) = self.children.remove(&id) {
            child.kill()?;
            child.wait()?;
        }
        Ok(())
    }

    /// A client that follows the leader, giving up after `patience`.
    pub fn client(&self, patience: Duration) -> LeaderClient {
        let replicas = self.peers.iter().map(|(id, a)| (*id, a.clone())).collect();
        LeaderClient::new(&self.client_tls, replicas, patience)
    }

    /// Replica ids.
    pub fn ids(&self) -> Vec<u64> {
        self.peers.keys().copied().collect()
    }
}

impl Drop for ProcessCluster {
    fn drop(&mut self) {
        for child in self.children.values_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
