//! `corral local up|down|status|start`: a cluster of real processes on this machine.
//! `up` mints certificates, writes one `corral.toml` per controller, starts each
//! `corrald` in the background with its own data directory and log, bootstraps the
//! cluster, and writes `DIR/env` (CORRAL_CLUSTER and certificate paths to source;
//! `DIR/admin.env` holds the administrator's). The node agents join these once
//! the node agent exists. Tests, the demo and the chaos suite build on it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use corral_controller::config::ListenSection;
use corral_pki::{BundleSpec, Role};
use corral_state::slurm::hostlist;

use crate::args::{LocalAction, LocalGpuBackend, LocalUpArgs};

mod fault_proxy;
mod netns;
mod ports;
mod process;
mod site_config;

use site_config::SiteConfig;

pub use netns::Network;
pub use process::{Launch, restart};

/// The local cluster's administrator.
const ADMIN: &str = "corral-admin";

/// Runs a `corral local` action.
pub async fn run(action: LocalAction, json: bool) -> anyhow::Result<ExitCode> {
    match action {
        LocalAction::Up(args) => {
            let cluster = up(&args).await?;
            if json {
                super::print_json(&serde_json::json!({
                    "dir": cluster.dir,
                    "cluster": cluster.addresses.join(","),
                    "env": cluster.dir.join("env"),
                    "admin_env": cluster.dir.join("admin.env"),
                }))?;
            } else {
                println!(
                    "corral local cluster up: {} controllers at {}\n  source {}   # as {}\n  source {}   # as admin\n  stop with: corral local down --dir {}",
                    cluster.addresses.len(),
                    cluster.addresses.join(","),
                    cluster.dir.join("env").display(),
                    cluster.user,
                    cluster.dir.join("admin.env").display(),
                    cluster.dir.display()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        LocalAction::Down { dir, purge } => {
            let stopped = down(&dir)?;
            if purge && dir.exists() {
                std::fs::remove_dir_all(&dir)
                    .with_context(|| format!("cannot remove {}", dir.display()))?;
            }
            if json {
                super::print_json(&serde_json::json!({ "stopped": stopped }))?;
            } else {
                println!("stopped {} processes", stopped.len());
            }
            Ok(ExitCode::SUCCESS)
        }
        LocalAction::Xid {
            dir,
            node,
            gpu,
            xid,
        } => {
            inject_xid(&absolute(&dir)?, &node, gpu, xid)?;
            if !json {
                println!("XID {xid} injected into {node} GPU {gpu}");
            }
            Ok(ExitCode::SUCCESS)
        }
        LocalAction::Cut { dir, one, from } => {
            let dir = absolute(&dir)?;
            match network_of(&dir)? {
                Faults::Netns(network) => network.cut(&one, &from)?,
                Faults::Proxy => {
                    if let Some(warning) = fault_proxy::cut(&dir, &one, &from)? {
                        eprintln!("corral local cut: warning: {warning}");
                    }
                }
            }
            if !json {
                println!("cut {} from {}", one.join(","), from.join(","));
            }
            Ok(ExitCode::SUCCESS)
        }
        LocalAction::Heal { dir } => {
            let dir = absolute(&dir)?;
            match network_of(&dir)? {
                Faults::Netns(network) => network.heal()?,
                Faults::Proxy => fault_proxy::heal(&dir)?,
            }
            if !json {
                println!("every cut lifted");
            }
            Ok(ExitCode::SUCCESS)
        }
        LocalAction::FaultProxy { dir } => {
            fault_proxy::serve(&absolute(&dir)?).await?;
            Ok(ExitCode::SUCCESS)
        }
        LocalAction::Start {
            dir,
            process,
            env,
            program,
        } => {
            let extra = env
                .iter()
                .map(|pair| {
                    pair.split_once('=')
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .with_context(|| format!("--env {pair}: give NAME=VALUE"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let pid = restart(&absolute(&dir)?, &process, &extra, program.as_deref())?;
            if json {
                super::print_json(&serde_json::json!({ "process": process, "pid": pid }))?;
            } else {
                println!("started {process} (pid {pid})");
            }
            Ok(ExitCode::SUCCESS)
        }
        LocalAction::Status { dir } => {
            let processes = status(&dir)?;
            if json {
                let list: Vec<serde_json::Value> = processes
                    .iter()
                    .map(
                        |p| serde_json::json!({"name": p.name, "pid": p.pid, "running": p.running}),
                    )
                    .collect();
                super::print_json(&list)?;
            } else {
                println!("{:<16} {:>8}  STATE", "PROCESS", "PID");
                for p in &processes {
                    let state = if p.running { "running" } else { "stopped" };
                    println!("{:<16} {:>8}  {state}", p.name, p.pid);
                }
            }
            let all_running = processes.iter().all(|p| p.running) && !processes.is_empty();
            Ok(if all_running {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

/// A started local cluster.
#[derive(Debug, Clone)]
pub struct LocalCluster {
    /// Its directory.
    pub dir: PathBuf,
    /// Controllers' client addresses.
    pub addresses: Vec<String>,
    /// The user `DIR/env` acts as.
    pub user: String,
}

/// Starts a local cluster.
pub async fn up(args: &LocalUpArgs) -> anyhow::Result<LocalCluster> {
    if args.controllers == 0 || args.controllers > 7 {
        bail!("--controllers must be 1 to 7 (odd numbers tolerate failures best: 3 or 5)");
    }
    let node_count = args.nodes.unwrap_or(match args.gpu_backend {
        LocalGpuBackend::Simulated => 4,
        LocalGpuBackend::Nvml => 1,
    });
    if node_count == 0 || node_count > 999 {
        bail!("--nodes must be 1 to 999");
    }
    if args.gpu_backend == LocalGpuBackend::Nvml && node_count > 1 {
        bail!(
            "--gpu-backend nvml gives this machine's GPUs to one node, and no GPU may belong \
             to two nodes: drop --nodes, or use --gpu-backend simulated for more nodes"
        );
    }
    if args.config.is_some() && args.gpu_backend == LocalGpuBackend::Nvml {
        bail!(
            "--config gives every node of the file simulated GPUs of its type; drop --gpu-backend nvml"
        );
    }
    let node_gpus = node_gpus(args)?;
    let dir = absolute(&args.dir)?;
    if status(&dir)?.iter().any(|p| p.running) {
        bail!(
            "a local cluster is already running in {}; stop it with `corral local down --dir {}`",
            dir.display(),
            dir.display()
        );
    }
    if dir.join("controller-1/data").exists() {
        bail!(
            "{} holds the data of an earlier local cluster, whose members had other addresses; \
             use another --dir, or remove it with `corral local down --dir {} --purge`",
            dir.display(),
            dir.display()
        );
    }
    for sub in ["certs", "logs", "pids"] {
        std::fs::create_dir_all(dir.join(sub))
            .with_context(|| format!("cannot create {}", dir.join(sub).display()))?;
    }
    let corrald = match &args.corrald {
        Some(path) => path.clone(),
        None => sibling_binary("corrald")?,
    };
    let user = current_user();
    let mut users = vec![user.clone()];
    for extra in ["alice", "bob"] {
        if !users.iter().any(|u| u == extra) {
            users.push(extra.to_string());
        }
    }
    let mut principals: Vec<(String, Role)> =
        users.iter().map(|u| (u.clone(), Role::User)).collect();
    principals.push((ADMIN.to_string(), Role::Admin));
    // The administrator may submit too (the demo does).
    users.push(ADMIN.to_string());
    let site = match &args.config {
        Some(path) => Some(SiteConfig::load(path, &users)?),
        None => None,
    };
    // Each node with what its agent reports: the site's nodes, or N alike.
    let agents: Vec<(String, AgentShape)> = match &site {
        Some(site) => site
            .nodes
            .iter()
            .map(|n| {
                let shape = AgentShape {
                    gpus: n.agent_gpus(),
                    cpus: n.cpus,
                    memory_mb: n.memory_mb,
                };
                (n.name.clone(), shape)
            })
            .collect(),
        None => node_names(node_count)
            .into_iter()
            .map(|name| {
                let shape = AgentShape {
                    gpus: node_gpus.agent_spec(),
                    cpus: NODE_CPUS,
                    memory_mb: NODE_MEMORY_MB,
                };
                (name, shape)
            })
            .collect(),
    };
    let nodes: Vec<String> = agents.iter().map(|(name, _)| name.clone()).collect();
    let controller_ids: Vec<u64> = (1..=u64::from(args.controllers)).collect();
    // From here on, a failure stops what was started.
    let mut started = StopOnFailure {
        dir: dir.clone(),
        armed: true,
    };
    let network = if args.netns {
        netns::check_support()?;
        let names: Vec<String> = controller_ids
            .iter()
            .map(|id| format!("controller-{id}"))
            .chain(nodes.iter().map(|node| format!("agent-{node}")))
            .collect();
        Some(Network::create(&dir, &names, subnet_hint(&dir))?)
    } else {
        None
    };
    let proxy = if args.fault_proxy {
        let agent_names: Vec<String> = nodes.iter().map(|n| format!("agent-{n}")).collect();
        let layout = fault_proxy::Layout::plan(
            &controller_ids,
            &agent_names,
            &fault_proxy::Layout::free_ports(&controller_ids)?,
        )?;
        layout.save(&dir)?;
        process::spawn(
            &dir,
            fault_proxy::PROCESS,
            &Launch {
                program: std::env::current_exe().context("cannot find this program's own path")?,
                args: vec![
                    "local".into(),
                    "fault-proxy".into(),
                    "--dir".into(),
                    dir.display().to_string(),
                ],
                env: Vec::new(),
                netns: None,
            },
        )?;
        fault_proxy::wait_ready(&dir, Duration::from_secs(10))?;
        Some(layout)
    } else {
        None
    };
    // Each controller's own address on the cluster's network.
    let controller_ip = |id: u64| {
        network
            .as_ref()
            .and_then(|n| n.members.get(&format!("controller-{id}")))
            .map(|m| m.ip.to_string())
            .or_else(|| {
                proxy
                    .as_ref()
                    .and_then(|p| p.member(&format!("controller-{id}")))
                    .map(|ip| ip.to_string())
            })
    };
    corral_pki::write_dev_bundle(
        &dir.join("certs"),
        &BundleSpec {
            cluster_name: site.as_ref().map_or("local", |s| s.cluster_name()).into(),
            controllers: controller_ids
                .iter()
                .map(|id| (*id, controller_ip(*id).into_iter().collect()))
                .collect(),
            agents: nodes.clone(),
            users: principals,
        },
    )?;
    let replicas: Vec<(u64, String, String)> = if let Some(proxy) = &proxy {
        // Known by the proxy's addresses; each listens behind it.
        controller_ids
            .iter()
            .map(|id| {
                let place = proxy.controller(*id)?;
                Ok((*id, place.peer.to_string(), place.api.to_string()))
            })
            .collect::<anyhow::Result<_>>()?
    } else if network.is_some() {
        // Each in a namespace of its own: every one may take the same ports.
        controller_ids
            .iter()
            .filter_map(|id| {
                let ip = controller_ip(*id)?;
                Some((*id, format!("{ip}:{PEER_PORT}"), format!("{ip}:{API_PORT}")))
            })
            .collect()
    } else {
        let ports = ports::free_ports(IpAddr::from([127, 0, 0, 1]), controller_ids.len() * 2)?;
        controller_ids
            .iter()
            .zip(ports.chunks(2))
            .map(|(id, p)| {
                (
                    *id,
                    format!("127.0.0.1:{}", p[0]),
                    format!("127.0.0.1:{}", p[1]),
                )
            })
            .collect()
    };

    // Each process's metrics address, when asked for: its own address on
    // the cluster's network (the same port in every namespace), else a free
    // loopback port.
    let metrics = if args.metrics {
        // Ports chosen already but not bound yet: the replicas' own, and
        // behind the proxy its listeners'.
        let mut taken: BTreeSet<u16> = replicas
            .iter()
            .flat_map(|(_, peer, api)| [peer, api])
            .filter_map(|a| a.parse::<SocketAddr>().ok())
            .map(|a| a.port())
            .collect();
        if let Some(proxy) = &proxy {
            for id in &controller_ids {
                let place = proxy.controller(*id)?;
                taken.extend([place.listen_peer.port(), place.listen_api.port()]);
            }
        }
        metrics_addresses(
            (&controller_ids, taken),
            if args.no_agents { &[] } else { &nodes },
            |name| {
                network
                    .as_ref()
                    .and_then(|n| n.members.get(name))
                    .map(|m| IpAddr::V4(m.ip))
                    .or_else(|| proxy.as_ref().and_then(|p| p.member(name)))
            },
            network.is_some(),
        )?
    } else {
        BTreeMap::new()
    };
    if !metrics.is_empty() {
        write_metrics_targets(&dir, &metrics)?;
    }
    for (id, _, _) in &replicas {
        let config_dir = dir.join(format!("controller-{id}"));
        std::fs::create_dir_all(&config_dir)?;
        let listen = match &proxy {
            Some(proxy) => {
                let place = proxy.controller(*id)?;
                ListenSection {
                    peer: Some(place.listen_peer.to_string()),
                    api: Some(place.listen_api.to_string()),
                    source: Some(place.ip.to_string()),
                    metrics: None,
                }
            }
            None => ListenSection::default(),
        };
        let listen = ListenSection {
            metrics: metrics
                .get(&format!("controller-{id}"))
                .map(ToString::to_string),
            ..listen
        };
        let text = match &site {
            Some(site) => site.controller_text(*id, &replicas, &listen, &dir)?,
            None => config_text(*id, &replicas, &listen, &nodes, &node_gpus, &users, &dir),
        };
        let text = match &args.mail_program {
            Some(program) => with_mail_program(text, &absolute(program)?)?,
            None => text,
        };
        std::fs::write(config_dir.join("corral.toml"), text)?;
        if let Some(backup) = &args.restore {
            restore_controller(&corrald, &config_dir.join("corral.toml"), backup)?;
        }
        process::spawn(
            &dir,
            &format!("controller-{id}"),
            &Launch {
                program: corrald.clone(),
                args: vec![
                    "--config".into(),
                    config_dir.join("corral.toml").display().to_string(),
                ],
                env: vec![(
                    "RUST_LOG".into(),
                    std::env::var("RUST_LOG").unwrap_or_else(|_| "info,openraft=warn".into()),
                )],
                netns: network
                    .as_ref()
                    .and_then(|n| n.members.get(&format!("controller-{id}")))
                    .map(|m| m.netns.clone()),
            },
        )?;
    }
    let addresses: Vec<String> = replicas.iter().map(|(_, _, api)| api.clone()).collect();
    if !args.no_agents {
        let agent = match &args.corral_agent {
            Some(path) => path.clone(),
            None => sibling_binary("corral-agent")?,
        };
        std::fs::create_dir_all(dir.join("checkpoints"))?;
        for (node, shape) in &agents {
            let name = format!("agent-{node}");
            let place = match (&network, &proxy) {
                (Some(network), _) => network.members.get(&name).map(|m| AgentPlace {
                    ip: IpAddr::V4(m.ip),
                    netns: Some(m.netns.clone()),
                }),
                (None, Some(proxy)) => proxy.member(&name).map(|ip| AgentPlace { ip, netns: None }),
                (None, None) => None,
            };
            let metrics = metrics.get(&name).copied();
            start_agent(
                &dir,
                &agent,
                node,
                (&addresses, metrics),
                shape,
                place.as_ref(),
            )?;
        }
    }
    // sbatch, srun, ... for the jobs and the shells of this cluster.
    let exe = std::env::current_exe().context("cannot find this program's own path")?;
    super::shims::link_all(&dir.join("bin"), &exe)?;
    let corral_link = dir.join("bin").join("corral");
    if corral_link.symlink_metadata().is_err() {
        std::os::unix::fs::symlink(&exe, &corral_link)
            .with_context(|| format!("cannot create {}", corral_link.display()))?;
    }
    write_env(&dir, "env", &addresses, &format!("user-{user}"))?;
    write_env(&dir, "admin.env", &addresses, "user-corral-admin")?;

    // Bootstrap the way an operator does: `corrald init` on the first replica.
    let first = dir.join("controller-1/corral.toml");
    let init = std::process::Command::new(&corrald)
        .arg("init")
        .arg("--config")
        .arg(&first)
        .args(["--timeout-seconds", "60"])
        .env("RUST_LOG", "warn")
        .output()
        .with_context(|| format!("cannot run {} init", corrald.display()))?;
    if !init.status.success() {
        bail!(
            "bootstrapping the local cluster failed (its controllers were stopped): {}(logs in {})",
            String::from_utf8_lossy(&init.stderr),
            dir.join("logs").display()
        );
    }
    started.armed = false;
    Ok(LocalCluster {
        dir,
        addresses,
        user,
    })
}

/// `corrald restore --config CONFIG BACKUP`, as an operator runs it on each
/// controller of a new cluster.
fn restore_controller(corrald: &Path, config: &Path, backup: &Path) -> anyhow::Result<()> {
    let restored = std::process::Command::new(corrald)
        .arg("restore")
        .arg("--config")
        .arg(config)
        .arg(absolute(backup)?)
        .env("RUST_LOG", "warn")
        .output()
        .with_context(|| format!("cannot run {} restore", corrald.display()))?;
    if !restored.status.success() {
        bail!(
            "restoring {} from {} failed: {}",
            config.display(),
            backup.display(),
            String::from_utf8_lossy(&restored.stderr).trim()
        );
    }
    Ok(())
}

/// Stops the processes recorded in `dir` when dropped armed: `up` failed after
/// starting some, and nothing else would stop them.
struct StopOnFailure {
    dir: PathBuf,
    armed: bool,
}

impl Drop for StopOnFailure {
    fn drop(&mut self) {
        if self.armed {
            let _ = down(&self.dir);
        }
    }
}

/// Each node's GPUs: how many, of which type, and where the agent finds them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NodeGpus {
    count: u32,
    model: String,
    backend: LocalGpuBackend,
    /// GPUs in MIG mode and their instances (`GPUS:PROFILES` entries), as
    /// NVML finds them.
    mig: Vec<String>,
}

impl NodeGpus {
    /// The agent's `--gpus` value.
    fn agent_spec(&self) -> String {
        match self.backend {
            LocalGpuBackend::Nvml => "nvml".to_string(),
            LocalGpuBackend::Simulated if self.count == 0 => "none".to_string(),
            LocalGpuBackend::Simulated => format!("simulated:{}:{}", self.count, self.model),
        }
    }
}

/// The nodes' GPUs: simulated H100s, or what NVML finds on this machine.
fn node_gpus(args: &LocalUpArgs) -> anyhow::Result<NodeGpus> {
    match args.gpu_backend {
        LocalGpuBackend::Simulated => {
            let count = args.gpus_per_node.unwrap_or(8);
            if count > 64 {
                bail!("--gpus-per-node must be at most 64");
            }
            Ok(NodeGpus {
                count,
                model: "h100".to_string(),
                backend: LocalGpuBackend::Simulated,
                mig: Vec::new(),
            })
        }
        LocalGpuBackend::Nvml => {
            if args.gpus_per_node.is_some() {
                bail!(
                    "--gpus-per-node is for simulated nodes: with --gpu-backend nvml the node \
                     has the GPUs NVML finds on this machine"
                );
            }
            let found = corral_agent::gpu::nvml_inventory().map_err(|error| {
                use corral_agent::gpu::GpuError;
                let why = match error {
                    GpuError::NvmlLibraryMissing { .. } => {
                        "this machine has no NVIDIA driver (libnvidia-ml.so.1 is missing)".into()
                    }
                    GpuError::NvmlDriverNotLoaded => {
                        "the NVIDIA kernel driver is not loaded (check nvidia-smi)".into()
                    }
                    GpuError::NvmlNoGpus => "NVML finds no GPU (check nvidia-smi)".into(),
                    other => other.to_string(),
                };
                anyhow::anyhow!(
                    "--gpu-backend nvml needs this machine's GPUs, but {why}; \
                     use --gpu-backend simulated for simulated ones"
                )
            })?;
            let mut models: Vec<&str> = found.iter().map(|gpu| gpu.model.as_str()).collect();
            models.dedup();
            let [model] = models[..] else {
                bail!(
                    "this machine has GPUs of several types ({}); a local node has one type: \
                     use --gpu-backend simulated, or a cluster configuration with one node \
                     line per type",
                    models.join(", ")
                );
            };
            if let Some(empty) = found.iter().find(|gpu| gpu.mig_mode && gpu.mig.is_empty()) {
                bail!(
                    "GPU {} is in MIG mode but has no MIG instances, so it could run nothing; create instances (nvidia-smi mig -cgi PROFILES -C) or turn MIG off (nvidia-smi -i {} -mig 0)",
                    empty.index,
                    empty.index
                );
            }
            // Each GPU in MIG mode, with its instances as NVML lists them.
            let mig = found
                .iter()
                .filter(|gpu| !gpu.mig.is_empty())
                .map(|gpu| {
                    let profiles: Vec<&str> = gpu.mig.iter().map(|m| m.profile.as_str()).collect();
                    format!("{}:{}", gpu.index, profiles.join("+"))
                })
                .collect();
            Ok(NodeGpus {
                count: u32::try_from(found.len()).context("too many GPUs")?,
                model: model.to_string(),
                backend: LocalGpuBackend::Nvml,
                mig,
            })
        }
    }
}

/// What a node's agent reports: its `--gpus` value, CPUs and memory.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AgentShape {
    gpus: String,
    cpus: u32,
    memory_mb: u64,
}

/// Starts the agent of `node` as `shape` says.
/// An agent's own address, and its network namespace (`--netns`).
struct AgentPlace {
    ip: IpAddr,
    netns: Option<String>,
}

fn start_agent(
    dir: &Path,
    agent: &Path,
    node: &str,
    (addresses, metrics): (&[String], Option<SocketAddr>),
    shape: &AgentShape,
    place: Option<&AgentPlace>,
) -> anyhow::Result<()> {
    let certs = dir.join("certs");
    let state_dir = dir.join("agents").join(node);
    std::fs::create_dir_all(&state_dir)?;
    let gpus = shape.gpus.clone();
    let path = |p: PathBuf| p.display().to_string();
    let mut args = vec![
        "--controllers".to_string(),
        addresses.join(","),
        "--ca".into(),
        path(certs.join("ca.pem")),
        "--cert".into(),
        path(certs.join(format!("agent-{node}.pem"))),
        "--key".into(),
        path(certs.join(format!("agent-{node}.key"))),
        "--gpus".into(),
        gpus,
        "--state-dir".into(),
        path(state_dir),
        "--checkpoint-root".into(),
        path(dir.join("checkpoints")),
        // Without namespaces agents share the loopback interface's ports.
        "--step-listen".into(),
        match place {
            Some(AgentPlace { ip, netns: Some(_) }) => format!("{ip}:6818"),
            Some(AgentPlace { ip, netns: None }) => format!("{ip}:0"),
            None => "127.0.0.1:0".into(),
        },
        "--cpus".into(),
        shape.cpus.to_string(),
        "--memory-mb".into(),
        shape.memory_mb.to_string(),
    ];
    if let Some(AgentPlace { ip, netns: None }) = place {
        // Behind the fault proxy, which names callers by their address.
        args.extend(["--source-ip".to_string(), ip.to_string()]);
    }
    if let Some(metrics) = metrics {
        args.extend(["--metrics-listen".to_string(), metrics.to_string()]);
    }
    let env = std::env::var("RUST_LOG")
        .ok()
        .map(|filter| ("RUST_LOG".to_string(), filter))
        .into_iter()
        .collect();
    process::spawn(
        dir,
        &format!("agent-{node}"),
        &Launch {
            program: agent.to_path_buf(),
            args,
            env,
            netns: place.and_then(|p| p.netns.clone()),
        },
    )?;
    Ok(())
}

/// Injects an XID into a simulated GPU of a local cluster's node.
pub fn inject_xid(dir: &Path, node: &str, gpu: u32, xid: u32) -> anyhow::Result<()> {
    let control = dir.join("agents").join(node).join("gpu-control.sock");
    corral_agent::gpu::inject(&control, &corral_agent::gpu::FaultCommand::Xid { gpu, xid })
        .with_context(|| format!("injecting XID {xid} into {node} GPU {gpu}"))?;
    Ok(())
}

/// A controller's peer (Raft) and client ports in its own namespace.
const PEER_PORT: u16 = 6820;
const API_PORT: u16 = 6817;

/// Where to start looking for a free subnet: a hash of the cluster's
/// directory, so that clusters in different directories rarely collide.
fn subnet_hint(dir: &Path) -> u8 {
    let hash = dir
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
    hash.to_le_bytes().iter().fold(0, |x, b| x ^ b)
}

/// How network faults reach the cluster in `dir`.
enum Faults {
    /// Its own network (`--netns`).
    Netns(Network),
    /// Its fault proxy (`--fault-proxy`).
    Proxy,
}

/// How network faults reach the cluster in `dir`, which must have been
/// started with `--netns` or `--fault-proxy`.
fn network_of(dir: &Path) -> anyhow::Result<Faults> {
    if let Some(network) = Network::load(dir)? {
        return Ok(Faults::Netns(network));
    }
    if fault_proxy::Layout::load(dir)?.is_some() {
        return Ok(Faults::Proxy);
    }
    bail!(
        "the cluster in {} can not be partitioned: start it with `corral local up --netns` \
         (as root) or `corral local up --fault-proxy`",
        dir.display()
    )
}

/// The port every process's metrics listen on inside its own namespace.
const METRICS_PORT: u16 = 9180;

/// Each controller's (`controller-ID`) and agent's (`agent-NODE`) metrics
/// address: on its own IP (`ip_of`) where it has one, the same port in every
/// namespace (`namespaced`) or free ports on it; else free loopback ports.
fn metrics_addresses(
    (controllers, mut taken): (&[u64], BTreeSet<u16>),
    nodes: &[String],
    ip_of: impl Fn(&str) -> Option<IpAddr>,
    namespaced: bool,
) -> anyhow::Result<BTreeMap<String, SocketAddr>> {
    let names: Vec<String> = controllers
        .iter()
        .map(|id| format!("controller-{id}"))
        .chain(nodes.iter().map(|node| format!("agent-{node}")))
        .collect();
    let mut found = BTreeMap::new();
    for name in names {
        let own = ip_of(&name);
        let ip = own.unwrap_or(IpAddr::from([127, 0, 0, 1]));
        let port = if namespaced && own.is_some() {
            METRICS_PORT
        } else {
            // Every port this cluster took on any address, so that no two
            // listeners (on 0.0.0.0 or one address) meet.
            let port = ports::free_ports(ip, taken.len() + 1)?
                .into_iter()
                .find(|p| !taken.contains(p))
                .context("no free port for a metrics endpoint")?;
            taken.insert(port);
            port
        };
        found.insert(name, SocketAddr::new(ip, port));
    }
    Ok(found)
}

/// `DIR/metrics-targets.json`: the endpoints in Prometheus' `file_sd_configs`
/// format, one group per process with its `corral_process` label.
fn write_metrics_targets(dir: &Path, metrics: &BTreeMap<String, SocketAddr>) -> anyhow::Result<()> {
    let groups: Vec<serde_json::Value> = metrics
        .iter()
        .map(|(name, address)| {
            serde_json::json!({
                "targets": [address.to_string()],
                "labels": { "corral_process": name },
            })
        })
        .collect();
    let path = dir.join("metrics-targets.json");
    let text = serde_json::to_string_pretty(&groups)?;
    std::fs::write(&path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}

/// `text` (a corral.toml) with `[leader] mail_program` set to `program`.
fn with_mail_program(text: String, program: &Path) -> anyhow::Result<String> {
    if text.contains("\nmail_program") {
        bail!(
            "the site configuration sets [leader] mail_program already; drop --mail-program or that key"
        );
    }
    let line = format!("mail_program = {:?}", program.display().to_string());
    Ok(match text.find("\n[leader]\n") {
        Some(at) => {
            let after = at + "\n[leader]\n".len();
            format!("{}{line}\n{}", &text[..after], &text[after..])
        }
        None => format!("{text}\n[leader]\n{line}\n"),
    })
}

/// CPUs of a local node (as its configuration says).
const NODE_CPUS: u32 = 64;
/// Memory of a local node, MiB (512G).
const NODE_MEMORY_MB: u64 = 524_288;

/// The `corral.toml` of controller `id`.
fn config_text(
    id: u64,
    replicas: &[(u64, String, String)],
    listen: &ListenSection,
    nodes: &[String],
    gpus: &NodeGpus,
    users: &[String],
    dir: &Path,
) -> String {
    let certs = dir.join("certs");
    let mut text = String::new();
    let _ = writeln!(text, "# Written by `corral local up`.");
    let _ = writeln!(text, "cluster_name = \"local\"");
    let _ = writeln!(text, "id = {id}");
    let _ = writeln!(
        text,
        "data_dir = {:?}",
        dir.join(format!("controller-{id}/data"))
            .display()
            .to_string()
    );
    let _ = writeln!(text, "\n[tls]");
    let _ = writeln!(
        text,
        "ca = {:?}",
        certs.join("ca.pem").display().to_string()
    );
    let _ = writeln!(
        text,
        "cert = {:?}",
        certs
            .join(format!("controller-{id}.pem"))
            .display()
            .to_string()
    );
    let _ = writeln!(
        text,
        "key = {:?}",
        certs
            .join(format!("controller-{id}.key"))
            .display()
            .to_string()
    );
    let _ = writeln!(
        text,
        "\n[leader]\nschedule_interval_ms = 500\ntick_interval_ms = 1000"
    );
    let listen_keys = [
        ("peer", &listen.peer),
        ("api", &listen.api),
        ("source", &listen.source),
        ("metrics", &listen.metrics),
    ];
    if listen_keys.iter().any(|(_, v)| v.is_some()) {
        let _ = writeln!(text, "\n[listen]");
        for (key, value) in listen_keys {
            if let Some(value) = value {
                let _ = writeln!(text, "{key} = {value:?}");
            }
        }
    }
    for (rid, peer, api) in replicas {
        let _ = writeln!(
            text,
            "\n[[replicas]]\nid = {rid}\npeer = \"{peer}\"\napi = \"{api}\""
        );
    }
    let all = hostlist::compress(nodes);
    let _ = writeln!(
        text,
        "\n[[nodes]]\nnames = \"{all}\"\ncpus = {NODE_CPUS}\nmemory = \"{NODE_MEMORY_MB}M\""
    );
    if gpus.count > 0 {
        let _ = writeln!(text, "gpus = {}\ngpu_type = \"{}\"", gpus.count, gpus.model);
        if !gpus.mig.is_empty() {
            let _ = writeln!(text, "mig = {:?}", gpus.mig);
        }
    }
    // Two leaf switches under a spine (one leaf for a single node).
    let half = nodes.len().div_ceil(2);
    let leaves: Vec<&[String]> = nodes.chunks(half.max(1)).collect();
    let _ = writeln!(text, "\n[topology]");
    for (i, leaf) in leaves.iter().enumerate() {
        let _ = writeln!(
            text,
            "\n[[topology.switches]]\nname = \"leaf{}\"\nnodes = \"{}\"",
            i + 1,
            hostlist::compress(leaf)
        );
    }
    let _ = writeln!(
        text,
        "\n[[topology.switches]]\nname = \"spine\"\nswitches = \"leaf[1-{}]\"",
        leaves.len()
    );
    let _ = writeln!(
        text,
        "\n[[partitions]]\nname = \"gpu\"\nnodes = \"{all}\"\nmax_time = \"7-00:00:00\"\ndefault_time = \"1:00:00\"\ndefault = true\npreempt_mode = \"requeue\""
    );
    let _ = writeln!(
        text,
        "\n[[partitions]]\nname = \"urgent\"\nnodes = \"{all}\"\nmax_time = \"1-00:00:00\"\npriority_tier = 10"
    );
    let _ = writeln!(text, "\n[[accounts]]\nname = \"research\"\nshares = 1");
    for user in users {
        let _ = writeln!(
            text,
            "\n[[users]]\nname = \"{user}\"\naccounts = [\"research\"]"
        );
    }
    text
}

fn write_env(dir: &Path, name: &str, addresses: &[String], principal: &str) -> anyhow::Result<()> {
    let certs = dir.join("certs");
    let text = format!(
        "# Source me: corral (and the sbatch, srun, ... shims in bin/) then reach the local cluster.\nexport PATH={}:$PATH\nexport CORRAL_CLUSTER={}\nexport CORRAL_CA={}\nexport CORRAL_CERT={}\nexport CORRAL_KEY={}\n",
        dir.join("bin").display(),
        addresses.join(","),
        certs.join("ca.pem").display(),
        certs.join(format!("{principal}.pem")).display(),
        certs.join(format!("{principal}.key")).display(),
    );
    std::fs::write(dir.join(name), text)
        .with_context(|| format!("cannot write {}", dir.join(name).display()))
}

/// A process of a local cluster.
#[derive(Debug, Clone)]
pub struct LocalProcess {
    /// `controller-1`, ...
    pub name: String,
    /// Its pid.
    pub pid: i32,
    /// Whether it runs (and is still a corral process).
    pub running: bool,
}

/// The processes recorded in `DIR/pids`.
pub fn status(dir: &Path) -> anyhow::Result<Vec<LocalProcess>> {
    let pids = dir.join("pids");
    let Ok(entries) = std::fs::read_dir(&pids) else {
        return Ok(Vec::new());
    };
    let mut processes = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()).map(String::from) else {
            continue;
        };
        let text = std::fs::read_to_string(&path)?;
        let Ok(pid) = text.trim().parse::<i32>() else {
            continue;
        };
        processes.push(LocalProcess {
            name,
            pid,
            running: is_corral_process(pid),
        });
    }
    processes.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(processes)
}

/// Stops every recorded process: SIGTERM, then SIGKILL after 10 s.
pub fn down(dir: &Path) -> anyhow::Result<Vec<String>> {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let processes = status(dir)?;
    for p in processes.iter().filter(|p| p.running) {
        let _ = kill(Pid::from_raw(p.pid), Signal::SIGTERM);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while processes.iter().any(|p| is_corral_process(p.pid)) && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    for p in processes.iter().filter(|p| is_corral_process(p.pid)) {
        let _ = kill(Pid::from_raw(p.pid), Signal::SIGKILL);
    }
    let mut stopped = Vec::new();
    for p in processes {
        let _ = std::fs::remove_file(dir.join("pids").join(format!("{}.pid", p.name)));
        stopped.push(p.name);
    }
    if let Some(network) = Network::load(dir)? {
        network.remove(dir);
    }
    Ok(stopped)
}

/// True when `pid` runs a corral program (not a zombie, not a reused pid).
fn is_corral_process(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().next());
    if state == Some("Z") {
        return false;
    }
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|cmd| String::from_utf8_lossy(&cmd).contains("corral"))
        .unwrap_or(false)
}

/// Node names `gpu01`.. (three digits above 99 nodes).
fn node_names(count: u32) -> Vec<String> {
    let width = if count > 99 { 3 } else { 2 };
    (1..=count).map(|i| format!("gpu{i:0width$}")).collect()
}

fn current_user() -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.name)
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "user".into())
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    if path.is_absolute() {
        Ok(path.to_path_buf())
    } else {
        Ok(std::env::current_dir()?.join(path))
    }
}

/// A program installed beside this one (`corrald` next to `corral`).
pub fn sibling_binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find this program's own path")?;
    let candidate = exe.with_file_name(name);
    if candidate.exists() {
        return Ok(candidate);
    }
    bail!(
        "cannot find {name} next to {} (build it with `cargo build --bin {name}`, or give --{name} PATH)",
        exe.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_config_is_valid_for_the_controller() {
        let dir = Path::new("/tmp/corral-local-test");
        let replicas = vec![
            (
                1,
                "127.0.0.1:7001".to_string(),
                "127.0.0.1:7101".to_string(),
            ),
            (
                2,
                "127.0.0.1:7002".to_string(),
                "127.0.0.1:7102".to_string(),
            ),
            (
                3,
                "127.0.0.1:7003".to_string(),
                "127.0.0.1:7103".to_string(),
            ),
        ];
        for nodes in [1, 4, 5] {
            let listen = ListenSection {
                peer: Some("127.0.1.2:7202".into()),
                api: Some("127.0.1.2:7302".into()),
                source: Some("127.0.1.2".into()),
                metrics: None,
            };
            let text = config_text(
                2,
                &replicas,
                &listen,
                &node_names(nodes),
                &NodeGpus {
                    count: 8,
                    model: "h100".to_string(),
                    backend: LocalGpuBackend::Simulated,
                    mig: vec!["7:3g.40gb*2".to_string()],
                },
                &["me".into(), "alice".into()],
                dir,
            );
            let config = corral_controller::config::parse(&text, &dir.join("corral.toml"))
                .unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(config.id, 2);
            assert_eq!(config.listen.api.to_string(), "127.0.1.2:7302");
            assert_eq!(config.listen.source, Some("127.0.1.2".parse().unwrap()));
            assert_eq!(config.cluster.nodes.len(), nodes as usize);
            assert_eq!(
                config.cluster.nodes[0].gpus[8].gpu_type, "h100_3g.40gb",
                "GPU 7 in two instances: 9 GPUs"
            );
            let mut state = corral_state::ClusterState::default();
            let admin = corral_state::ids::Actor {
                user: "root".into(),
                role: corral_state::ids::Role::Admin,
            };
            for command in config
                .cluster
                .bootstrap_commands(&admin, corral_state::time::Timestamp(1))
            {
                state.apply(command).unwrap();
            }
            assert_eq!(state.partitions().len(), 2);
        }
    }
}
