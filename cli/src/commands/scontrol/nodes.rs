//! scontrol's node, partition and controller commands: `show node`, `show
//! partition`, `update NodeName=... State=...` and `ping` (whose controller
//! lines `show config` prints too), answering with scontrol's words and exit
//! statuses.

use std::process::ExitCode;

use corral_proto::api::corral_client::CorralClient;
use corral_proto::api::{ClusterStatusReply, Empty, ListNodesRequest};
use corral_state::node::Node;
use corral_state::partition::Partition;
use corral_state::slurm::hostlist;

use crate::args::NodeAction;
use crate::connection::{Cluster, FIRST_ROUND_DEADLINE, Retry};
use crate::format::show_config::{controller_line, controller_role};
use crate::format::show_node::{show_node, show_partition};

/// Every node and partition.
async fn everything(cluster: &Cluster) -> anyhow::Result<(Vec<Node>, Vec<Partition>)> {
    super::super::nodes::fetch(cluster, ListNodesRequest::default()).await
}

/// `show node [NAME]`: exit 1 with `Node NAME not found` for an unknown one.
pub async fn show_nodes(
    cluster: &Cluster,
    name: Option<&str>,
    oneliner: bool,
) -> anyhow::Result<ExitCode> {
    let (nodes, partitions) = everything(cluster).await?;
    let wanted: Vec<String> = match name {
        Some(list) => hostlist::expand(list).unwrap_or_else(|_| vec![list.to_string()]),
        None => nodes.iter().map(|n| n.name.clone()).collect(),
    };
    let mut status = ExitCode::SUCCESS;
    for name in wanted {
        match nodes.iter().find(|n| n.name == name) {
            Some(node) => print_record(&show_node(node, &partitions), oneliner),
            None => {
                println!("Node {name} not found");
                status = ExitCode::from(1);
            }
        }
    }
    Ok(status)
}

/// `show partition [NAME]`.
pub async fn show_partitions(
    cluster: &Cluster,
    name: Option<&str>,
    oneliner: bool,
) -> anyhow::Result<ExitCode> {
    let (nodes, partitions) = everything(cluster).await?;
    if let Some(name) = name
        && !partitions.iter().any(|p| p.name == name)
    {
        println!("Partition {name} not found");
        return Ok(ExitCode::from(1));
    }
    if partitions.is_empty() {
        println!("No partitions in the system");
    }
    for partition in partitions
        .iter()
        .filter(|p| name.is_none_or(|n| n == p.name))
    {
        print_record(&show_partition(partition, &nodes), oneliner);
    }
    Ok(ExitCode::SUCCESS)
}

/// A record as is, or (`-o`) on one line.
fn print_record(text: &str, oneliner: bool) {
    if oneliner {
        println!("{}", super::one_line(text));
    } else {
        print!("{text}");
    }
}

/// scontrol's node states corral's update maps: drain, down, resume.
const VALID_STATES: &str = "NoResp DRAIN FAIL FUTURE RESUME POWER_DOWN POWER_UP UNDRAIN";

/// `update NodeName=LIST State=... [Reason=...]`.
pub async fn update_nodes(
    cluster: &Cluster,
    nodes: &str,
    state: &str,
    reason: Option<String>,
) -> anyhow::Result<ExitCode> {
    let reason = reason.filter(|r| !r.trim().is_empty());
    let needs_reason = || {
        eprintln!("You must specify a reason when DOWNING or DRAINING a node. Request denied");
        Ok(ExitCode::from(1))
    };
    let action = match state.to_ascii_uppercase().as_str() {
        "DRAIN" | "FAIL" => match reason {
            Some(reason) => NodeAction::Drain {
                nodes: nodes.to_string(),
                gpu: None,
                reason,
            },
            None => return needs_reason(),
        },
        "DOWN" => match reason {
            Some(reason) => NodeAction::Down {
                nodes: nodes.to_string(),
                reason,
            },
            None => return needs_reason(),
        },
        "RESUME" | "UNDRAIN" | "IDLE" => NodeAction::Resume {
            nodes: nodes.to_string(),
            gpu: None,
        },
        _ => {
            eprintln!("Invalid input: State={state}");
            eprintln!("Request aborted");
            eprintln!("Valid states are: {VALID_STATES}");
            eprintln!("Not all states are valid given a node's prior state");
            return Ok(ExitCode::from(1));
        }
    };
    let (known, _) = everything(cluster).await?;
    let names = hostlist::expand(nodes).unwrap_or_default();
    if names.is_empty() || names.iter().any(|n| !known.iter().any(|k| &k.name == n)) {
        eprintln!("slurm_update error: Invalid node name specified");
        return Ok(ExitCode::from(1));
    }
    super::super::nodes::set_state(cluster, action).await
}

/// One controller replica as `ping` and `show config` report it.
pub struct ControllerProbe {
    /// scontrol's name for it: `primary` (the leader), `backup1`, ...
    pub role: String,
    /// Its client address.
    pub address: String,
    /// Whether it answered within the first round's deadline.
    pub up: bool,
}

/// Asks every replica of `status` in turn, the leader first as primary, the
/// others by id as backups.
pub async fn probe_controllers(
    cluster: &Cluster,
    status: &ClusterStatusReply,
) -> Vec<ControllerProbe> {
    let mut members = status.members.clone();
    members.sort_by_key(|m| (Some(m.id) != status.leader_id, m.id));
    let count = members.len();
    let mut probes = Vec::with_capacity(count);
    for (index, member) in members.iter().enumerate() {
        let up = tokio::time::timeout(FIRST_ROUND_DEADLINE, async {
            let channel = cluster.connect(&member.api_addr).await.ok()?;
            CorralClient::new(channel)
                .cluster_status(Empty {})
                .await
                .ok()
        })
        .await
        .ok()
        .flatten()
        .is_some();
        let role = match status.leader_id {
            Some(leader) if leader == member.id => controller_role(0, count),
            Some(_) => controller_role(index, count),
            // Without a leader no replica is primary: all are backups.
            None => controller_role(index + 1, count + 1),
        };
        probes.push(ControllerProbe {
            role,
            address: member.api_addr.clone(),
            up,
        });
    }
    probes
}

/// The cluster's members and leader, as the replica reached sees them.
pub async fn cluster_status(cluster: &Cluster) -> anyhow::Result<ClusterStatusReply> {
    cluster
        .call(Retry::Idempotent, |mut c| async move {
            c.cluster_status(Empty {}).await
        })
        .await
}

/// Prints each probe's `Slurmctld(ROLE) at ADDRESS is UP|DOWN` line.
pub fn print_probes(probes: &[ControllerProbe]) {
    for probe in probes {
        println!("{}", controller_line(&probe.role, &probe.address, probe.up));
    }
}

/// `ping`: every replica, the leader as primary, the others as backups;
/// as scontrol: exit 0 when any answers, and the RESTORE banner for root
/// when one does not.
pub async fn ping(cluster: &Cluster) -> anyhow::Result<ExitCode> {
    let status = cluster_status(cluster).await?;
    let probes = probe_controllers(cluster, &status).await;
    print_probes(&probes);
    if probes.iter().any(|p| !p.up) && nix::unistd::getuid().is_root() {
        println!("*****************************************");
        println!("** RESTORE SLURMCTLD DAEMON TO SERVICE **");
        println!("*****************************************");
    }
    Ok(if probes.iter().any(|p| p.up) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
