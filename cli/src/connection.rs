//! Reaching the cluster: which controllers to try (`--cluster`, `CORRAL_CLUSTER`,
//! or the client config file), the client certificate, and calls that follow the
//! leader. A call goes to the last controller that answered; a controller that
//! cannot be reached, or answers "not the leader" with the leader's address, sends
//! the call on to the next one. Only failures that say nothing was done are retried,
//! except where the caller marks the call idempotent (reads, keyed submissions).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, bail};
use corral_pki::TlsMaterial;
use corral_proto::LEADER_METADATA;
use corral_proto::api::corral_client::CorralClient;
use serde::Deserialize;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

/// Where the cluster is and who we are, as resolved from flags, environment and
/// the client config file.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    /// Controller client addresses, `host:port`.
    pub addresses: Vec<String>,
    /// CA certificate.
    pub ca: PathBuf,
    /// Client certificate.
    pub cert: PathBuf,
    /// Client key.
    pub key: PathBuf,
    /// How long a call keeps trying controllers.
    pub patience: Duration,
}

/// The client config file (`CORRAL_CONFIG`, `~/.config/corral/client.toml` or
/// `/etc/corral/client.toml`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientFile {
    cluster: Option<String>,
    ca: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
}

/// Flag values (which win over the environment, which wins over the file).
#[derive(Debug, Clone, Default)]
pub struct ClusterFlags {
    /// `--cluster`.
    pub cluster: Option<String>,
    /// `--ca`.
    pub ca: Option<PathBuf>,
    /// `--cert`.
    pub cert: Option<PathBuf>,
    /// `--key`.
    pub key: Option<PathBuf>,
    /// `--timeout` seconds.
    pub timeout_seconds: u64,
}

impl ClusterSettings {
    /// Resolves the settings.
    pub fn resolve(flags: &ClusterFlags) -> anyhow::Result<ClusterSettings> {
        let (file, file_path) = read_client_file()?;
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let cluster = flags
            .cluster
            .clone()
            .or_else(|| env("CORRAL_CLUSTER"))
            .or(file.cluster)
            .context(
                "no cluster address: give --cluster host:port[,host:port...], set CORRAL_CLUSTER, \
                 or source the env file `corral local up` wrote",
            )?;
        let pick = |flag: &Option<PathBuf>, var: &str, from_file: Option<PathBuf>, what: &str| {
            flag.clone()
                .or_else(|| env(var).map(PathBuf::from))
                .or(from_file)
                .with_context(|| {
                    format!(
                        "no {what}: give --{}, set {var}, or put it in {}",
                        what.split(' ').next().unwrap_or(what),
                        file_path
                            .as_deref()
                            .map_or("a client config file".into(), |p| p.display().to_string())
                    )
                })
        };
        let ca = pick(&flags.ca, "CORRAL_CA", file.ca, "ca certificate")?;
        let cert = pick(
            &flags.cert,
            "CORRAL_CERT",
            file.cert,
            "cert (client certificate)",
        )?;
        let key = pick(
            &flags.key,
            "CORRAL_KEY",
            file.key,
            "key (client private key)",
        )?;
        let addresses: Vec<String> = cluster
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(String::from)
            .collect();
        if addresses.is_empty() {
            bail!("the cluster address list '{cluster}' is empty; use host:port[,host:port...]");
        }
        Ok(ClusterSettings {
            addresses,
            ca,
            cert,
            key,
            patience: Duration::from_secs(flags.timeout_seconds.max(1)),
        })
    }
}

fn read_client_file() -> anyhow::Result<(ClientFile, Option<PathBuf>)> {
    let candidates: Vec<PathBuf> = std::env::var_os("CORRAL_CONFIG")
        .map(PathBuf::from)
        .into_iter()
        .chain(std::env::var_os("HOME").map(|h| Path::new(&h).join(".config/corral/client.toml")))
        .chain(std::iter::once(PathBuf::from("/etc/corral/client.toml")))
        .collect();
    for path in candidates {
        if let Ok(text) = std::fs::read_to_string(&path) {
            let file: ClientFile = toml::from_str(&text)
                .with_context(|| format!("reading the client config {}", path.display()))?;
            return Ok((file, Some(path)));
        }
    }
    Ok((ClientFile::default(), None))
}

/// A connection to the cluster that follows the leader.
pub struct Cluster {
    settings: ClusterSettings,
    tls: TlsMaterial,
    /// The address that answered last (tried first).
    preferred: Mutex<Option<String>>,
}

/// How long an idempotent call waits for one controller on its first round.
pub const FIRST_ROUND_DEADLINE: Duration = Duration::from_secs(1);

/// Whether a call may be repeated after an answer was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Reads, and changes made safe by an idempotency key.
    Idempotent,
    /// Changes: repeated only when the controller certainly did nothing.
    Once,
}

impl Cluster {
    /// Loads the certificate and prepares to call.
    pub fn new(settings: ClusterSettings) -> anyhow::Result<Cluster> {
        corral_pki::install_crypto_provider();
        let tls = TlsMaterial::load(&settings.ca, &settings.cert, &settings.key)?;
        Ok(Cluster {
            settings,
            tls,
            preferred: Mutex::new(None),
        })
    }

    /// This client's certificate and the cluster CA (for QUIC to agents).
    pub fn tls(&self) -> &TlsMaterial {
        &self.tls
    }

    /// Calls `f` on a controller, following the leader and skipping controllers
    /// that cannot be reached, until it answers or the patience runs out.
    pub async fn call<T, F, Fut>(&self, retry: Retry, mut f: F) -> anyhow::Result<T>
    where
        F: FnMut(CorralClient<Channel>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let deadline = tokio::time::Instant::now() + self.settings.patience;
        let mut tried: Vec<String> = Vec::new();
        let mut last_error = String::new();
        let mut round = 0u32;
        loop {
            let mut queue: std::collections::VecDeque<String> = self.order().into();
            let mut redirects = 0;
            while let Some(address) = queue.pop_front() {
                if !tried.contains(&address) {
                    tried.push(address.clone());
                }
                let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
                let limit = if retry == Retry::Idempotent && round == 0 {
                    FIRST_ROUND_DEADLINE.min(remaining)
                } else {
                    remaining.max(FIRST_ROUND_DEADLINE)
                };
                let answered = tokio::time::timeout(limit, async {
                    let channel = self.connect(&address).await?;
                    Ok::<_, anyhow::Error>(f(CorralClient::new(channel)).await)
                })
                .await;
                let answer = match answered {
                    Ok(Ok(answer)) => answer,
                    Ok(Err(e)) => {
                        last_error = format!("{address}: {e:#}");
                        continue;
                    }
                    Err(_) if retry == Retry::Idempotent => {
                        last_error =
                            format!("{address}: no answer within {} ms", limit.as_millis());
                        continue;
                    }
                    Err(_) => bail!(
                        "{address} did not answer within {} s: the change may or may not have been made; check before retrying",
                        limit.as_secs()
                    ),
                };
                match answer {
                    Ok(response) => {
                        self.remember(&address);
                        return Ok(response.into_inner());
                    }
                    Err(status) => {
                        last_error = format!("{address}: {}", status.message());
                        match leader_hint(&status) {
                            // Go to the leader next (a few times at most: hints
                            // may be stale while an election settles).
                            Some(leader) if leader != address && redirects < 3 => {
                                redirects += 1;
                                queue.retain(|a| a != &leader);
                                queue.push_front(leader);
                            }
                            _ if worth_retrying(&status, retry) => {}
                            _ => return Err(StatusError(status).into()),
                        }
                    }
                }
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "cannot reach the cluster (tried {}): {last_error}; check CORRAL_CLUSTER/--cluster and that the controllers run (`corral local status`)",
                    tried.join(", ")
                );
            }
            round += 1;
            let backoff = Duration::from_millis(50 * u64::from(round.min(10)));
            tokio::time::sleep(backoff.min(deadline - tokio::time::Instant::now())).await;
        }
    }

    /// The controllers' addresses as given (CORRAL_CLUSTER, --cluster).
    pub fn addresses(&self) -> &[String] {
        &self.settings.addresses
    }

    /// A channel to `address`.
    pub async fn connect(&self, address: &str) -> anyhow::Result<Channel> {
        let endpoint = Endpoint::from_shared(format!("https://{address}"))
            .with_context(|| format!("'{address}' is not a host:port address"))?
            .tls_config(self.tls.client_config())?
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(30));
        Ok(endpoint.connect().await?)
    }

    fn order(&self) -> Vec<String> {
        let preferred = self.preferred.lock().ok().and_then(|p| p.clone());
        let mut order: Vec<String> = preferred.into_iter().collect();
        for address in &self.settings.addresses {
            if !order.contains(address) {
                order.push(address.clone());
            }
        }
        order
    }

    fn remember(&self, address: &str) {
        if let Ok(mut preferred) = self.preferred.lock() {
            *preferred = Some(address.to_string());
        }
    }
}

/// The leader's address from a "not the leader" answer.
fn leader_hint(status: &Status) -> Option<String> {
    if status.code() != Code::Unavailable {
        return None;
    }
    status
        .metadata()
        .get(LEADER_METADATA)
        .and_then(|v| v.to_str().ok())
        .map(String::from)
}

/// True when trying again (elsewhere) cannot do harm and may help.
fn worth_retrying(status: &Status, retry: Retry) -> bool {
    match status.code() {
        // Nothing was done: no leader, or the controller is going away.
        Code::Unavailable => true,
        // The outcome is unknown: repeat only what may be repeated.
        Code::DeadlineExceeded | Code::Unknown | Code::Cancelled | Code::Aborted => {
            retry == Retry::Idempotent
        }
        _ => false,
    }
}

/// A controller's answer that is final: shown to the user as it is.
#[derive(Debug)]
pub struct StatusError(pub Status);

impl std::fmt::Display for StatusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0.message())
    }
}

impl std::error::Error for StatusError {}
