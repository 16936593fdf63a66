//! `corral nodes`: sinfo's partition table (`%#P %.5a %.10l %.6D %.6t %N`), one
//! row per partition and node state, with a `GPUS(total/free)` column (GPUs in all and
//! GPUs free) before the hostlist-compressed node list.

use std::collections::BTreeMap;

use corral_state::node::{Node, NodeStateView};
use corral_state::partition::Partition;
use corral_state::slurm::duration::{TimeLimit, format_time_limit};
use corral_state::slurm::hostlist;

use super::node_state::{free_gpus, state_short};
use super::table::{Align, Column, Style, Width, render};

/// Rows in sinfo's order of states.
const STATE_ORDER: [NodeStateView; 6] = [
    NodeStateView::Idle,
    NodeStateView::Mixed,
    NodeStateView::Allocated,
    NodeStateView::Draining,
    NodeStateView::Drained,
    NodeStateView::Down,
];

/// The partitions, in the order given, each split into one row per node state
/// among the nodes given (nodes of a partition missing from `nodes` are left out;
/// a partition with none shows one row of `0` nodes in state `n/a`). The default
/// partition's name ends in `*`; AVAIL is `up` or `down`; TIMELIMIT is the
/// partition's MaxTime (`infinite` when unlimited). Nodes in no partition are
/// not shown, as in sinfo; `node_list` shows every node.
pub fn nodes_table(nodes: &[Node], partitions: &[Partition], noheader: bool) -> String {
    let by_name: BTreeMap<&str, &Node> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut rows = Vec::new();
    for partition in partitions {
        let mut groups: BTreeMap<usize, Vec<&Node>> = BTreeMap::new();
        for name in &partition.nodes {
            if let Some(node) = by_name.get(name.as_str()) {
                let rank = STATE_ORDER
                    .iter()
                    .position(|s| *s == node.state_view())
                    .unwrap_or(STATE_ORDER.len());
                groups.entry(rank).or_default().push(node);
            }
        }
        let head = partition_cells(partition);
        if groups.is_empty() {
            rows.push(
                head.iter()
                    .cloned()
                    .chain(["0".into(), "n/a".into(), "0/0".into(), String::new()])
                    .collect(),
            );
        }
        for group in groups.values() {
            let state = group.first().map_or("n/a", |n| state_short(n.state_view()));
            let total: usize = group.iter().map(|n| n.gpus.len()).sum();
            let free: usize = group.iter().map(|n| free_gpus(n)).sum();
            let names: Vec<&str> = group.iter().map(|n| n.name.as_str()).collect();
            let mut row = head.clone();
            row.extend([
                group.len().to_string(),
                state.to_string(),
                format!("{total}/{free}"),
                hostlist::compress(&names),
            ]);
            rows.push(row);
        }
    }
    let columns = [
        Column::new("PARTITION", Align::Left, Width::Fit),
        Column::new("AVAIL", Align::Right, Width::Cut(5)),
        Column::new("TIMELIMIT", Align::Right, Width::Cut(10)),
        Column::new("NODES", Align::Right, Width::Cut(6)),
        Column::new("STATE", Align::Right, Width::Cut(6)),
        Column::new("GPUS(total/free)", Align::Right, Width::Fit),
        Column::new("NODELIST", Align::Left, Width::Fit),
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

/// PARTITION, AVAIL and TIMELIMIT of a partition's rows.
fn partition_cells(partition: &Partition) -> Vec<String> {
    let name = if partition.is_default {
        format!("{}*", partition.name)
    } else {
        partition.name.clone()
    };
    let avail = if partition.up { "up" } else { "down" };
    let limit = match partition.max_time {
        TimeLimit::Unlimited => "infinite".to_string(),
        limit => format_time_limit(limit),
    };
    vec![name, avail.to_string(), limit]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::test_jobs::{nodes, partitions, scenario};

    #[test]
    fn one_row_per_partition_and_state() {
        let state = scenario();
        let out = nodes_table(&nodes(&state), &partitions(&state), false);
        let expected = "\
PARTITION AVAIL  TIMELIMIT  NODES  STATE GPUS(total/free) NODELIST
gpu*         up 1-00:00:00      1   idle              8/7 n3
gpu*         up 1-00:00:00      2  alloc             16/0 n[1,4]
gpu*         up 1-00:00:00      1   down              8/0 n2
";
        assert_eq!(out, expected);
    }

    #[test]
    fn down_unlimited_partition_without_nodes() {
        let state = scenario();
        let mut empty = partitions(&state)[0].clone();
        empty.name = "maint".into();
        empty.is_default = false;
        empty.up = false;
        empty.max_time = TimeLimit::Unlimited;
        empty.nodes.clear();
        let out = nodes_table(&nodes(&state), &[empty], true);
        assert_eq!(out, "maint  down   infinite      0    n/a 0/0\n");
    }
}
