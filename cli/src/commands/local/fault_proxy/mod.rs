//! Network faults for a local cluster without root (`corral local up
//! --fault-proxy`): every process gets a loopback address of its own
//! (controllers `127.0.1.N`, agents `127.0.2.K`) and makes its connections
//! from it, and a proxy process, `corral local fault-proxy`, listens at the
//! addresses the processes know each controller by and carries the traffic
//! to the controller's real ports. Told by `corral local cut A B`, it parts
//! each process of A from each of B as a failed link would (see `forward`);
//! `corral local heal` lifts every cut.
//!
//! What it carries: the Raft traffic between controllers (and the proposals
//! followers forward to the leader, which travel on it), the agents' QUIC
//! channel to the controllers, and the clients' API calls. Unlike a
//! `--netns` cluster's cuts, it does not part two agents from each other
//! (their step channel goes direct), and clients on this machine are never
//! parted, as the machine is never cut off there either.
//!
//! The layout is kept in `DIR/fault-proxy.json`; the proxy takes requests
//! on `DIR/fault-proxy.sock`, one JSON line each (see `cuts`), and keeps the
//! cuts in force in `DIR/fault-proxy-cuts.json`, so a restarted proxy
//! (`corral local start fault-proxy`) parts what was parted.

mod cuts;
mod forward;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::watch;

use cuts::{Cuts, Reply, Request};

/// The name the proxy's process is recorded under.
pub const PROCESS: &str = "fault-proxy";

/// How long the CLI waits for the proxy to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Most agents a fault-proxied cluster has (one `127.0.2.K` each).
pub const MAX_AGENTS: usize = 250;

/// The addresses of a fault-proxied cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// Each process (`controller-1`, `agent-gpu01`) and its own address.
    pub members: BTreeMap<String, IpAddr>,
    /// What the proxy listens at, and for whom.
    pub routes: Vec<RouteSpec>,
}

/// One address the proxy listens at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteSpec {
    /// The process behind it.
    pub owner: String,
    /// Where its callers reach it (the address in the configuration).
    pub listen: SocketAddr,
    /// Where it really listens.
    pub upstream: SocketAddr,
    /// Whether datagrams are carried too (the client port: agents use it
    /// over UDP).
    pub udp: bool,
}

/// A controller's addresses in a fault-proxied cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerPlace {
    /// Its own address.
    pub ip: IpAddr,
    /// Where the others and the clients reach its Raft service and API
    /// (the proxy).
    pub peer: SocketAddr,
    pub api: SocketAddr,
    /// Where it listens itself.
    pub listen_peer: SocketAddr,
    pub listen_api: SocketAddr,
}

fn controller_ip(id: u64) -> anyhow::Result<IpAddr> {
    let last = u8::try_from(id)
        .ok()
        .filter(|n| *n > 0)
        .with_context(|| format!("controller id {id} does not fit a loopback address"))?;
    Ok(IpAddr::V4(Ipv4Addr::new(127, 0, 1, last)))
}

impl Layout {
    /// Addresses for `controllers` (ids) and `agents` (process names), with
    /// `ports` free on loopback, four per controller.
    pub fn plan(controllers: &[u64], agents: &[String], ports: &[u16]) -> anyhow::Result<Layout> {
        if agents.len() > MAX_AGENTS {
            bail!(
                "--fault-proxy gives each agent a loopback address of its own, {MAX_AGENTS} at most; \
                 start fewer nodes"
            );
        }
        if ports.len() < controllers.len() * 4 {
            bail!(
                "{} ports for {} controllers",
                ports.len(),
                controllers.len()
            );
        }
        let mut members = BTreeMap::new();
        let mut routes = Vec::new();
        for (id, ports) in controllers.iter().zip(ports.chunks(4)) {
            let name = format!("controller-{id}");
            let ip = controller_ip(*id)?;
            members.insert(name.clone(), ip);
            for (listen, upstream, udp) in [(ports[0], ports[2], false), (ports[1], ports[3], true)]
            {
                routes.push(RouteSpec {
                    owner: name.clone(),
                    listen: SocketAddr::new(ip, listen),
                    upstream: SocketAddr::new(ip, upstream),
                    udp,
                });
            }
        }
        for (k, agent) in agents.iter().enumerate() {
            let last = u8::try_from(k + 1).context("too many agents")?;
            members.insert(agent.clone(), IpAddr::V4(Ipv4Addr::new(127, 0, 2, last)));
        }
        Ok(Layout { members, routes })
    }

    /// Ports for `controllers`, four each, free on the controller's own
    /// address: the proxy's two and the controller's own two.
    pub fn free_ports(controllers: &[u64]) -> anyhow::Result<Vec<u16>> {
        let mut ports = Vec::new();
        for id in controllers {
            let ip = controller_ip(*id)?;
            ports.extend(super::ports::free_ports(ip, 4)?);
        }
        Ok(ports)
    }

    /// Where controller `id` is reached and listens.
    pub fn controller(&self, id: u64) -> anyhow::Result<ControllerPlace> {
        let name = format!("controller-{id}");
        let mut routes = self.routes.iter().filter(|r| r.owner == name);
        let (Some(peer), Some(api)) = (routes.next(), routes.next()) else {
            bail!("the fault proxy's layout has no routes for {name}");
        };
        Ok(ControllerPlace {
            ip: peer.listen.ip(),
            peer: peer.listen,
            api: api.listen,
            listen_peer: peer.upstream,
            listen_api: api.upstream,
        })
    }

    /// Process `name`'s own address.
    pub fn member(&self, name: &str) -> Option<IpAddr> {
        self.members.get(name).copied()
    }

    fn record_path(dir: &Path) -> PathBuf {
        dir.join("fault-proxy.json")
    }

    /// Records the layout in `dir`.
    pub fn save(&self, dir: &Path) -> anyhow::Result<()> {
        let path = Self::record_path(dir);
        std::fs::write(&path, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// The layout recorded in `dir`, if the cluster there has a fault proxy.
    pub fn load(dir: &Path) -> anyhow::Result<Option<Layout>> {
        let path = Self::record_path(dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        serde_json::from_str(&text)
            .map(Some)
            .with_context(|| format!("{} is not a fault proxy layout", path.display()))
    }
}

fn socket_path(dir: &Path) -> PathBuf {
    dir.join("fault-proxy.sock")
}

fn cuts_path(dir: &Path) -> PathBuf {
    dir.join("fault-proxy-cuts.json")
}

/// Parts each process of `one` from each of `other` (both ways); the answer
/// names the pairs the proxy cannot part, if any.
pub fn cut(dir: &Path, one: &[String], other: &[String]) -> anyhow::Result<Option<String>> {
    ask(dir, &Request::Cut(one.to_vec(), other.to_vec()))
}

/// Lifts every cut.
pub fn heal(dir: &Path) -> anyhow::Result<()> {
    ask(dir, &Request::Heal).map(|_| ())
}

fn ask(dir: &Path, request: &Request) -> anyhow::Result<Option<String>> {
    let path = socket_path(dir);
    let unreachable = |e: std::io::Error| {
        anyhow::anyhow!(
            "cannot reach the fault proxy at {} ({e}); is the cluster up? \
             (`corral local status --dir {}`, and `corral local start {PROCESS}` if it stopped)",
            path.display(),
            dir.display()
        )
    };
    let mut stream = UnixStream::connect(&path).map_err(unreachable)?;
    stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    let mut line = serde_json::to_string(request)?;
    line.push('\n');
    stream.write_all(line.as_bytes()).map_err(unreachable)?;
    let mut answer = String::new();
    BufReader::new(stream)
        .read_line(&mut answer)
        .map_err(unreachable)?;
    let reply: Reply = serde_json::from_str(answer.trim())
        .with_context(|| format!("the fault proxy answered {answer:?}"))?;
    match reply.error {
        None => Ok(reply.warning),
        Some(error) => bail!("{error}"),
    }
}

/// Waits until the proxy of `dir` takes requests (it opens its socket once
/// every route listens).
pub fn wait_ready(dir: &Path, patience: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + patience;
    loop {
        match UnixStream::connect(socket_path(dir)) {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() >= deadline => bail!(
                "the fault proxy did not start within {} s ({e}); see {}",
                patience.as_secs(),
                dir.join("logs").join(format!("{PROCESS}.log")).display()
            ),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// The proxy itself (`corral local fault-proxy --dir DIR`): listens on every
/// route of the layout in `dir`, then takes requests until it is stopped.
pub async fn serve(dir: &Path) -> anyhow::Result<()> {
    let layout = Layout::load(dir)?.with_context(|| {
        format!(
            "{} has no fault proxy layout; `corral local up --fault-proxy` writes one",
            dir.display()
        )
    })?;
    let callers: Arc<BTreeMap<IpAddr, String>> = Arc::new(
        layout
            .members
            .iter()
            .map(|(name, ip)| (*ip, name.clone()))
            .collect(),
    );
    // The cuts in force when an earlier proxy of this cluster stopped.
    let kept = match std::fs::read_to_string(cuts_path(dir)) {
        Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
            eprintln!("fault proxy: ignoring {}: {e}", cuts_path(dir).display());
            Cuts::default()
        }),
        Err(_) => Cuts::default(),
    };
    let (cuts_tx, cuts_rx) = watch::channel(kept);
    for spec in &layout.routes {
        let route = Arc::new(forward::Route {
            owner: spec.owner.clone(),
            upstream: spec.upstream,
            callers: Arc::clone(&callers),
            cuts: cuts_rx.clone(),
        });
        let listener = tokio::net::TcpListener::bind(spec.listen)
            .await
            .with_context(|| format!("cannot listen on {} for {}", spec.listen, spec.owner))?;
        tokio::spawn(forward::tcp(listener, Arc::clone(&route)));
        if spec.udp {
            let socket = tokio::net::UdpSocket::bind(spec.listen)
                .await
                .with_context(|| {
                    format!("cannot listen on {} (UDP) for {}", spec.listen, spec.owner)
                })?;
            tokio::spawn(forward::udp(socket, route));
        }
    }
    let path = socket_path(dir);
    let _ = std::fs::remove_file(&path);
    let control = tokio::net::UnixListener::bind(&path)
        .with_context(|| format!("cannot listen on {}", path.display()))?;
    eprintln!("fault proxy: {} routes ready", layout.routes.len());
    let control_state = Arc::new(Control {
        cuts: cuts_tx,
        members: layout.members,
        record: cuts_path(dir),
    });
    loop {
        let stream = match control.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                eprintln!("fault proxy: accepting a request failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let state = Arc::clone(&control_state);
        tokio::spawn(async move {
            let _ = tokio::time::timeout(ANSWER_TIMEOUT, state.answer(stream)).await;
        });
    }
}

/// What the proxy's requests change: the cuts, checked against the
/// cluster's processes and recorded in `record`.
struct Control {
    cuts: watch::Sender<Cuts>,
    members: BTreeMap<String, IpAddr>,
    record: PathBuf,
}

impl Control {
    /// Reads one request from `stream` and answers it.
    async fn answer(&self, stream: tokio::net::UnixStream) -> std::io::Result<()> {
        let (read, mut write) = stream.into_split();
        let mut line = String::new();
        tokio::io::BufReader::new(read).read_line(&mut line).await?;
        let reply = match serde_json::from_str::<Request>(line.trim()) {
            Err(e) => Reply {
                error: Some(format!("not a fault proxy request ({e}): {line:?}")),
                warning: None,
            },
            Ok(request) => {
                let mut outcome = Ok(None);
                self.cuts.send_modify(|cuts| {
                    outcome = cuts.apply(&request, &self.members);
                    if outcome.is_ok()
                        && let Err(e) = serde_json::to_string(cuts)
                            .map_err(std::io::Error::other)
                            .and_then(|text| std::fs::write(&self.record, text))
                    {
                        eprintln!(
                            "fault proxy: cannot record the cuts in {}: {e}",
                            self.record.display()
                        );
                    }
                });
                eprintln!("fault proxy: {request:?}: {outcome:?}");
                match outcome {
                    Ok(warning) => Reply {
                        error: None,
                        warning,
                    },
                    Err(error) => Reply {
                        error: Some(error),
                        warning: None,
                    },
                }
            }
        };
        let mut answer = serde_json::to_string(&reply).map_err(std::io::Error::other)?;
        answer.push('\n');
        write.write_all(answer.as_bytes()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_process_gets_its_own_address_and_each_controller_two_routes() {
        let agents = vec!["agent-gpu01".to_string(), "agent-gpu02".to_string()];
        let layout = Layout::plan(&[1, 2, 3], &agents, &(7000..7012).collect::<Vec<_>>()).unwrap();
        assert_eq!(
            layout.member("controller-2"),
            Some("127.0.1.2".parse().unwrap())
        );
        assert_eq!(
            layout.member("agent-gpu02"),
            Some("127.0.2.2".parse().unwrap())
        );
        assert_eq!(layout.routes.len(), 6);
        let two = layout.controller(2).unwrap();
        assert_eq!(two.peer, "127.0.1.2:7004".parse().unwrap());
        assert_eq!(two.api, "127.0.1.2:7005".parse().unwrap());
        assert_eq!(two.listen_peer, "127.0.1.2:7006".parse().unwrap());
        assert_eq!(two.listen_api, "127.0.1.2:7007".parse().unwrap());
        assert!(
            layout
                .routes
                .iter()
                .filter(|r| r.udp)
                .all(|r| r.listen.port() % 4 == 1)
        );
    }

    #[test]
    fn too_many_agents_are_refused_with_the_limit() {
        let agents: Vec<String> = (0..=MAX_AGENTS).map(|i| format!("agent-n{i}")).collect();
        let err = Layout::plan(&[1], &agents, &[1, 2, 3, 4]).unwrap_err();
        assert!(err.to_string().contains("250"), "{err}");
    }
}
