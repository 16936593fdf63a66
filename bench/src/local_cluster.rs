//! A local cluster of real processes for the benchmarks that look at jobs
//! (`xid`, `failover-jobs`): started with `corral local up` (3 `corrald`, 4
//! `corral-agent` with simulated GPUs), reached through the client API with
//! the certificates it minted, stopped and removed at the end
//! (`CORRAL_BENCH_KEEP=1` keeps its directory: configs and logs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use corral_pki::TlsMaterial;
use corral_proto::api::corral_client::CorralClient;
use corral_proto::api::{Empty, GetJobRequest, SubmitJobRequest};
use corral_proto::records;
use corral_state::job::Job;
use tonic::transport::{Channel, Endpoint};

/// A running local cluster.
pub struct LocalCluster {
    dir: Kept,
    /// This build's `corral`, which starts and stops the cluster's processes
    /// (`corral local`).
    local: PathBuf,
    /// The `corral` a user of the cluster types (from `--bin-dir`, if given).
    pub corral: PathBuf,
    /// The controllers' client addresses, by replica id (1-based).
    pub addresses: Vec<String>,
}

/// The cluster directory: removed at the end unless kept.
enum Kept {
    Temp(tempfile::TempDir),
    Path(PathBuf),
}

impl LocalCluster {
    /// `corral local up` with the daemons in `bin_dir` (default: beside this
    /// program), `nodes` nodes of 8 simulated GPUs. The cluster's processes are
    /// started and stopped by this build's `corral`, so that another build's
    /// daemons can be measured the same way.
    pub fn up(bin_dir: Option<&Path>, nodes: u32) -> anyhow::Result<LocalCluster> {
        let local = binary(None, "corral")?;
        let corral = binary(bin_dir, "corral")?;
        let dir = tempfile::tempdir()?;
        let dir = if std::env::var_os("CORRAL_BENCH_KEEP").is_some() {
            let path = dir.keep();
            eprintln!("keeping {}", path.display());
            Kept::Path(path)
        } else {
            Kept::Temp(dir)
        };
        let path = match &dir {
            Kept::Temp(d) => d.path().to_path_buf(),
            Kept::Path(p) => p.clone(),
        };
        let up = Command::new(&local)
            .args(["--json", "local", "up", "--dir"])
            .arg(&path)
            .args(["--controllers", "3", "--nodes", &nodes.to_string()])
            .arg("--corrald")
            .arg(binary(bin_dir, "corrald")?)
            .arg("--corral-agent")
            .arg(binary(bin_dir, "corral-agent")?)
            .output()
            .context("running corral local up")?;
        if !up.status.success() {
            bail!(
                "corral local up failed: {}",
                String::from_utf8_lossy(&up.stderr)
            );
        }
        let reply: serde_json::Value = serde_json::from_slice(&up.stdout)?;
        let addresses = reply["cluster"]
            .as_str()
            .context("corral local up printed no cluster")?
            .split(',')
            .map(String::from)
            .collect();
        Ok(LocalCluster {
            dir,
            local,
            corral,
            addresses,
        })
    }

    /// The cluster's directory.
    pub fn dir(&self) -> &Path {
        match &self.dir {
            Kept::Temp(dir) => dir.path(),
            Kept::Path(path) => path,
        }
    }

    /// A client of the controller at `address` as `principal` (`user-alice`,
    /// `user-corral-admin`).
    pub async fn client_at(
        &self,
        principal: &str,
        address: &str,
    ) -> anyhow::Result<CorralClient<Channel>> {
        let certs = self.dir().join("certs");
        let tls = TlsMaterial::load(
            &certs.join("ca.pem"),
            &certs.join(format!("{principal}.pem")),
            &certs.join(format!("{principal}.key")),
        )?;
        let channel = Endpoint::from_shared(format!("https://{address}"))?
            .tls_config(tls.client_config())?
            .connect_timeout(Duration::from_secs(1))
            .timeout(Duration::from_secs(2))
            .connect()
            .await?;
        Ok(CorralClient::new(channel))
    }

    /// A client of the leader (its state is the first to show a commit).
    pub async fn leader_client(&self, principal: &str) -> anyhow::Result<CorralClient<Channel>> {
        let mut last = String::new();
        for address in &self.addresses {
            let Ok(mut client) = self.client_at(principal, address).await else {
                continue;
            };
            match client.cluster_status(Empty {}).await {
                Ok(status) => {
                    let leader = status.into_inner().leader_api_addr;
                    if !leader.is_empty() {
                        return self.client_at(principal, &leader).await;
                    }
                    last = format!("{address}: no leader known");
                }
                Err(e) => last = format!("{address}: {}", e.message()),
            }
        }
        bail!("no controller names a leader: {last}")
    }

    /// The pid of process `name` (`controller-1`, `agent-gpu01`).
    pub fn pid(&self, name: &str) -> anyhow::Result<i32> {
        let path = self.dir().join("pids").join(format!("{name}.pid"));
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        Ok(text.trim().parse()?)
    }

    /// `corral local start NAME`: starts a stopped process again.
    pub fn start(&self, name: &str) -> anyhow::Result<()> {
        let out = Command::new(&self.local)
            .args(["local", "start", "--dir"])
            .arg(self.dir())
            .arg(name)
            .output()?;
        if !out.status.success() {
            bail!(
                "corral local start {name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        let _ = Command::new(&self.local)
            .args(["local", "down", "--dir"])
            .arg(self.dir())
            .output();
    }
}

/// Submits `script` as the local user from the cluster's directory.
pub async fn submit(
    user: &CorralClient<Channel>,
    dir: &Path,
    name: &str,
    script: &str,
) -> anyhow::Result<u64> {
    let reply = user
        .clone()
        .submit_job(SubmitJobRequest {
            script_path: name.into(),
            script_text: script.into(),
            cwd: dir.display().to_string(),
            uid: own_uid(),
            gid: own_gid(),
            submit_host: "localhost".into(),
            ..SubmitJobRequest::default()
        })
        .await?;
    Ok(reply.into_inner().first_job_id)
}

/// Job `id` as the controller `client` reaches has it.
pub async fn job(client: &CorralClient<Channel>, id: u64) -> anyhow::Result<Job> {
    let reply = client
        .clone()
        .get_job(GetJobRequest {
            job_id: id,
            consistent: false,
        })
        .await?
        .into_inner();
    Ok(records::decode("job", &reply.job_json)?)
}

/// Polls job `id` until `done` holds (every 2 ms) or `patience` runs out.
pub async fn poll(
    client: &CorralClient<Channel>,
    id: u64,
    patience: Duration,
    done: impl Fn(&Job) -> bool,
) -> anyhow::Result<Job> {
    let deadline = Instant::now() + patience;
    loop {
        let job = job(client, id).await?;
        if done(&job) {
            return Ok(job);
        }
        if Instant::now() > deadline {
            bail!(
                "job {id} did not get there in {patience:?}: state {}",
                job.state.slurm_name()
            );
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// This process's user name.
pub fn current_user() -> anyhow::Result<String> {
    Ok(
        String::from_utf8(Command::new("id").arg("-un").output()?.stdout)?
            .trim()
            .to_string(),
    )
}

/// This process's uid (the owner of `/proc/self`).
fn own_uid() -> u32 {
    std::fs::metadata("/proc/self").map_or(0, |m| std::os::unix::fs::MetadataExt::uid(&m))
}

/// This process's gid.
fn own_gid() -> u32 {
    std::fs::metadata("/proc/self").map_or(0, |m| std::os::unix::fs::MetadataExt::gid(&m))
}

/// A workspace binary in `bin_dir`, or beside this one (`cargo build --release
/// --bins` builds them).
pub fn binary(bin_dir: Option<&Path>, name: &str) -> anyhow::Result<PathBuf> {
    let path = match bin_dir {
        Some(dir) => dir.join(name),
        None => std::env::current_exe()?.with_file_name(name),
    };
    if !path.exists() {
        bail!(
            "{} not found: build the binaries first (`cargo build --release --bins`)",
            path.display()
        );
    }
    Ok(path)
}
