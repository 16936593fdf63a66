//! `corral nodes --long`: one line per node in the spirit of `sinfo -N --long`:
//! its partitions, state, CPUs, memory, GPUs by type (`gpu:h100:8`), the health
//! of each GPU that is not in service, and why the node is drained or down.

use std::collections::BTreeMap;

use corral_state::node::{Availability, GpuHealth, Node};
use corral_state::partition::Partition;

use super::node_state::state_long;
use super::table::{Align, Column, Style, Width, render};

/// Every node, in the order given. PARTITION lists the partitions holding it
/// (default marked `*`; `-` for none); MEMORY is in MiB as sinfo prints it; GRES
/// counts GPUs per type; GPU_HEALTH is `ok`, `-` without GPUs, or each GPU out of
/// service as `INDEX:xidN`, `INDEX:fault` or `INDEX:drain`; REASON is the drain or
/// down reason.
pub fn node_list(nodes: &[Node], partitions: &[Partition], noheader: bool) -> String {
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|node| {
            vec![
                node.name.clone(),
                "1".to_string(),
                partitions_of(node, partitions),
                state_long(node.state_view()).to_string(),
                node.cpus.to_string(),
                node.memory_mb.to_string(),
                gres(node),
                gpu_health(node),
                reason(node),
            ]
        })
        .collect();
    let columns = [
        Column::new("NODELIST", Align::Left, Width::Fit),
        Column::new("NODES", Align::Right, Width::Fit),
        Column::new("PARTITION", Align::Left, Width::Fit),
        Column::new("STATE", Align::Left, Width::Fit),
        Column::new("CPUS", Align::Right, Width::Fit),
        Column::new("MEMORY", Align::Right, Width::Fit),
        Column::new("GRES", Align::Left, Width::Fit),
        Column::new("GPU_HEALTH", Align::Left, Width::Fit),
        Column::new("REASON", Align::Left, Width::Fit),
    ];
    render(
        &columns,
        &rows,
        Style {
            header: !noheader,
            rule: false,
        },
    )
}

fn partitions_of(node: &Node, partitions: &[Partition]) -> String {
    let names: Vec<String> = partitions
        .iter()
        .filter(|p| p.nodes.contains(&node.name))
        .map(|p| {
            if p.is_default {
                format!("{}*", p.name)
            } else {
                p.name.clone()
            }
        })
        .collect();
    if names.is_empty() {
        "-".to_string()
    } else {
        names.join(",")
    }
}

/// `gpu:TYPE:COUNT` per GPU type, comma-separated; `(null)` without GPUs.
fn gres(node: &Node) -> String {
    let mut by_type: BTreeMap<&str, usize> = BTreeMap::new();
    for gpu in &node.gpus {
        *by_type.entry(gpu.gpu_type.as_str()).or_default() += 1;
    }
    if by_type.is_empty() {
        return "(null)".to_string();
    }
    by_type
        .iter()
        .map(|(gpu_type, count)| format!("gpu:{gpu_type}:{count}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn gpu_health(node: &Node) -> String {
    if node.gpus.is_empty() {
        return "-".to_string();
    }
    let problems: Vec<String> = node
        .gpus
        .iter()
        .filter_map(|gpu| match (&gpu.health, &gpu.drain) {
            (GpuHealth::Unhealthy { xid: Some(xid), .. }, _) => {
                Some(format!("{}:xid{xid}", gpu.index))
            }
            (GpuHealth::Unhealthy { xid: None, .. }, _) => Some(format!("{}:fault", gpu.index)),
            (GpuHealth::Healthy, Some(_)) => Some(format!("{}:drain", gpu.index)),
            (GpuHealth::Healthy, None) => None,
        })
        .collect();
    if problems.is_empty() {
        "ok".to_string()
    } else {
        problems.join(",")
    }
}

fn reason(node: &Node) -> String {
    match (&node.availability, &node.drain) {
        (Availability::Down(why), _) => why.reason.clone(),
        (Availability::Up { .. }, Some(why)) => why.reason.clone(),
        (Availability::Up { .. }, None) => "none".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::test_jobs::{nodes, partitions, scenario};

    #[test]
    fn one_line_per_node_with_gpu_health() {
        let state = scenario();
        let out = node_list(&nodes(&state), &partitions(&state), false);
        let expected = "\
NODELIST NODES PARTITION STATE     CPUS MEMORY GRES       GPU_HEALTH REASON
n1           1 gpu*      allocated   64 524288 gpu:h100:8 ok         none
n2           1 gpu*      down        64 524288 gpu:h100:8 ok         agent lost
n3           1 gpu*      idle        64 524288 gpu:h100:8 5:xid79    none
n4           1 gpu*      allocated   64 524288 gpu:h100:8 ok         none
";
        assert_eq!(out, expected);
    }

    #[test]
    fn node_without_gpus_or_partition() {
        let state = scenario();
        let mut node = nodes(&state)[2].clone();
        node.gpus.clear();
        assert_eq!(
            node_list(&[node], &[], true),
            "n3 1 - idle 64 524288 (null) - none\n"
        );
    }
}
