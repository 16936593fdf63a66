//! `scontrol show node` and `scontrol show partition`: Slurm 22.05's
//! `Key=Value` records, one record per node or partition with a blank line
//! after each, filled with what corral knows. Values corral does not track
//! (architecture, CPU load, free memory, boot time, power) print as Slurm
//! prints them unknown (`N/A`, `n/a`, `0`); corral adds `GpuHealth=` for
//! nodes with an unhealthy or drained GPU.

use corral_state::node::{GpuHealth, Node};
use corral_state::partition::{Partition, PreemptMode};
use corral_state::slurm::duration::{TimeLimit, format_time_limit};
use corral_state::slurm::memory::format_memory_mb;

use super::datetime::format_timestamp;
use super::node_state::slurm_state;
use super::sinfo_fields::{features, gres, reason_of};

/// One node's record.
pub fn show_node(node: &Node, partitions: &[Partition]) -> String {
    let state_text = slurm_state(node).complete().to_uppercase();
    let alloc_cpus = node.cpus - node.free_cpus();
    let alloc_mem = node.memory_mb - node.free_memory_mb();
    let alloc_gpus = node
        .gpus
        .iter()
        .filter(|g| g.allocated_to.is_some())
        .count();
    let features = features(node);
    let in_partitions: Vec<&str> = partitions
        .iter()
        .filter(|p| p.nodes.contains(&node.name))
        .map(|p| p.name.as_str())
        .collect();
    let registration = node.registration.as_ref();
    let address = registration
        .and_then(|r| r.step_address.as_deref())
        .and_then(|a| a.rsplit_once(':').map(|(host, _)| host))
        .unwrap_or(&node.name);
    let mut out = format!(
        "NodeName={} Arch=N/A CoresPerSocket={} \n",
        node.name, node.cpus
    );
    out.push_str(&format!(
        "   CPUAlloc={alloc_cpus} CPUEfctv={0} CPUTot={0} CPULoad=N/A\n",
        node.cpus
    ));
    out.push_str(&format!("   AvailableFeatures={features}\n"));
    out.push_str(&format!("   ActiveFeatures={features}\n"));
    out.push_str(&format!("   Gres={}\n", gres(node)));
    out.push_str(&format!(
        "   NodeAddr={address} NodeHostName={} Version={}\n",
        node.name,
        registration.map_or("N/A", |r| r.agent_version.as_str())
    ));
    out.push_str(&format!(
        "   RealMemory={} AllocMem={alloc_mem} FreeMem=N/A Sockets=1 Boards=1\n",
        node.memory_mb
    ));
    out.push_str(&format!(
        "   State={state_text} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
    ));
    out.push_str(&format!("   Partitions={} \n", in_partitions.join(",")));
    out.push_str(&format!(
        "   BootTime=None SlurmdStartTime={}\n",
        registration.map_or_else(|| "None".into(), |r| format_timestamp(r.at))
    ));
    out.push_str(&format!(
        "   CfgTRES={}\n",
        tres(node.cpus, node.memory_mb, node.gpus.len())
    ));
    out.push_str(&format!(
        "   AllocTRES={}\n",
        if alloc_cpus == 0 && alloc_gpus == 0 {
            String::new()
        } else {
            tres(alloc_cpus, alloc_mem, alloc_gpus)
        }
    ));
    out.push_str("   CapWatts=n/a\n   CurrentWatts=0 AveWatts=0\n");
    out.push_str("   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s\n");
    let unhealthy: Vec<String> = node
        .gpus
        .iter()
        .filter_map(|g| match (&g.health, &g.drain) {
            (GpuHealth::Unhealthy { xid: Some(xid), .. }, _) => {
                Some(format!("{}:xid{xid}", g.index))
            }
            (GpuHealth::Unhealthy { .. }, _) => Some(format!("{}:unhealthy", g.index)),
            (GpuHealth::Healthy, Some(_)) => Some(format!("{}:drained", g.index)),
            (GpuHealth::Healthy, None) => None,
        })
        .collect();
    if !unhealthy.is_empty() {
        out.push_str(&format!("   GpuHealth={}\n", unhealthy.join(",")));
    }
    if let Some(why) = reason_of(node) {
        out.push_str(&format!(
            "   Reason={} [{}@{}]\n",
            why.reason,
            why.by,
            format_timestamp(why.since)
        ));
    }
    out.push('\n');
    out
}

/// `cpu=8,mem=4G,billing=8,gres/gpu=8`, as scontrol orders a node's TRES.
fn tres(cpus: u32, memory_mb: u64, gpus: usize) -> String {
    let mut text = format!("cpu={cpus}");
    if memory_mb > 0 {
        text.push_str(&format!(",mem={}", format_memory_mb(memory_mb)));
    }
    text.push_str(&format!(",billing={cpus}"));
    if gpus > 0 {
        text.push_str(&format!(",gres/gpu={gpus}"));
    }
    text
}

/// One partition's record; `nodes` are the cluster's nodes (for totals).
pub fn show_partition(partition: &Partition, nodes: &[Node]) -> String {
    let members: Vec<&Node> = nodes
        .iter()
        .filter(|n| partition.nodes.contains(&n.name))
        .collect();
    let cpus: u64 = members.iter().map(|n| u64::from(n.cpus)).sum();
    let memory: u64 = members.iter().map(|n| n.memory_mb).sum();
    let gpus: usize = members.iter().map(|n| n.gpus.len()).sum();
    let accounts = partition.allowed_accounts.as_ref().map_or_else(
        || "ALL".to_string(),
        |a| a.iter().cloned().collect::<Vec<_>>().join(","),
    );
    let time = |limit: TimeLimit| match limit {
        TimeLimit::Unlimited => "UNLIMITED".to_string(),
        limit => format_time_limit(limit),
    };
    let preempt = match partition.preempt_mode {
        PreemptMode::Off => "OFF",
        PreemptMode::Requeue => "REQUEUE",
        PreemptMode::Cancel => "CANCEL",
    };
    let mut tres_text = format!("cpu={cpus}");
    if memory > 0 {
        tres_text.push_str(&format!(",mem={}", format_memory_mb(memory)));
    }
    tres_text.push_str(&format!(",node={},billing={cpus}", members.len()));
    if gpus > 0 {
        tres_text.push_str(&format!(",gres/gpu={gpus}"));
    }
    let mut out = format!("PartitionName={}\n", partition.name);
    out.push_str(&format!(
        "   AllowGroups=ALL AllowAccounts={accounts} AllowQos=ALL\n"
    ));
    out.push_str(&format!(
        "   AllocNodes=ALL Default={} QoS=N/A\n",
        if partition.is_default { "YES" } else { "NO" }
    ));
    out.push_str(&format!(
        "   DefaultTime={} DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO\n",
        partition.default_time.map_or_else(|| "NONE".into(), time)
    ));
    out.push_str(&format!(
        "   MaxNodes=UNLIMITED MaxTime={} MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED\n",
        time(partition.max_time)
    ));
    out.push_str(&format!("   Nodes={}\n", partition.hostlist));
    out.push_str(&format!(
        "   PriorityJobFactor=1 PriorityTier={} RootOnly=NO ReqResv=NO OverSubscribe=NO\n",
        partition.priority_tier
    ));
    out.push_str(&format!("   OverTimeLimit=NONE PreemptMode={preempt}\n"));
    out.push_str(&format!(
        "   State={} TotalCPUs={cpus} TotalNodes={} SelectTypeParameters=NONE\n",
        if partition.up { "UP" } else { "DOWN" },
        members.len()
    ));
    out.push_str("   JobDefaults=(null)\n");
    out.push_str("   DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED\n");
    out.push_str(&format!("   TRES={tres_text}\n\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::test_jobs::{nodes, partitions, scenario};

    #[test]
    fn a_drained_node_with_a_failed_gpu() {
        let state = scenario();
        let mut n3 = nodes(&state).into_iter().find(|n| n.name == "n3").unwrap();
        n3.drain = Some(corral_state::node::StateReason {
            reason: "bad gpu, waiting for an RMA".into(),
            since: crate::format::test_jobs::t(1500),
            by: "root".into(),
        });
        let text = show_node(&n3, &partitions(&state));
        assert!(text.starts_with("NodeName=n3 Arch=N/A "), "{text}");
        assert!(text.contains("\n   State=IDLE+DRAIN "), "{text}");
        assert!(text.contains("\n   Gres=gpu:h100:8\n"), "{text}");
        assert!(text.contains("\n   GpuHealth=5:xid79\n"), "{text}");
        assert!(
            text.contains("\n   Reason=bad gpu, waiting for an RMA ["),
            "{text}"
        );
        assert!(text.ends_with("[root@2026-11-21T08:25:00]\n\n"), "{text}");
    }

    #[test]
    fn a_partition_with_its_totals() {
        let state = scenario();
        let parts = partitions(&state);
        let text = show_partition(&parts[0], &nodes(&state));
        assert!(
            text.starts_with(&format!("PartitionName={}\n", parts[0].name)),
            "{text}"
        );
        assert!(text.contains("\n   State=UP TotalCPUs="), "{text}");
        assert!(text.ends_with("\n\n"), "{text}");
    }
}
