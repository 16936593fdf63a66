//! Which nodes share a line of sinfo's output, and in what order lines come,
//! as Slurm 22.05's sinfo decides: partition by partition, each node joins the
//! first line of a matching partition whose nodes show alike in every field
//! printed (state, reason, features, ...), else starts a line. With `-N`
//! (`per_node`) every node of every partition has a line of its own; with
//! `-R` (`any_partition`) partitions do not matter. When a field names the
//! partition, every partition shown has a line even if none of its nodes are
//! (`0 n/a`).
//!
//! Lines are then sorted as sinfo sorts by default: by partition, in the order
//! the partitions are given, then by state, highest Slurm state number first
//! (drained and not responding, mixed, allocated, idle, down); with `-N`, by
//! node name, numbers compared as numbers. Where Slurm's order depends on
//! thread timing (two partitions' nodes merged into one line), this order is
//! the partitions' own.

use std::cmp::{Ordering, Reverse};
use std::collections::BTreeMap;

use corral_state::node::Node;
use corral_state::partition::Partition;

use super::sinfo_fields::{Field, Line};

/// How nodes are put on lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Grouping {
    /// `-N`: one line per node and partition.
    pub per_node: bool,
    /// `-R`: nodes of different partitions share lines.
    pub any_partition: bool,
}

/// The lines for `nodes` (those shown) of `partitions` (those shown, in
/// order), printing `fields`, sorted.
pub fn lines<'a>(
    nodes: &'a [Node],
    partitions: &'a [Partition],
    fields: &[Field],
    grouping: Grouping,
) -> Vec<Line<'a>> {
    let by_name: BTreeMap<&str, &Node> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut lines: Vec<Line<'a>> = Vec::new();
    if !grouping.per_node && fields.iter().any(|f| f.names_partition()) {
        lines.extend(
            partitions
                .iter()
                .enumerate()
                .map(|(partition_index, partition)| Line {
                    partition,
                    partition_index,
                    nodes: Vec::new(),
                }),
        );
    }
    for (index, partition) in partitions.iter().enumerate() {
        let mut members: Vec<&Node> = partition
            .nodes
            .iter()
            .filter_map(|name| by_name.get(name.as_str()).copied())
            .collect();
        members.sort_by(|a, b| name_order(&a.name, &b.name));
        for node in members {
            let joins = lines.iter_mut().find(|line| {
                same_partition(line, partition, index, fields, grouping)
                    && line
                        .nodes
                        .first()
                        .is_none_or(|first| !grouping.per_node && alike(first, node, fields))
            });
            match joins {
                Some(line) if line.nodes.iter().any(|n| n.name == node.name) => {}
                Some(line) => line.nodes.push(node),
                None => lines.push(Line {
                    partition,
                    partition_index: index,
                    nodes: vec![node],
                }),
            }
        }
    }
    if grouping.per_node {
        lines.sort_by(|a, b| name_order(first_name(a), first_name(b)));
    } else {
        lines.sort_by_key(|line| (line.partition_index, Reverse(line.state().number())));
    }
    lines
}

/// Whether nodes of `partition` may join `line`.
fn same_partition(
    line: &Line,
    partition: &Partition,
    index: usize,
    fields: &[Field],
    grouping: Grouping,
) -> bool {
    grouping.any_partition
        || line.partition_index == index
        || fields
            .iter()
            .all(|f| f.partition_key(line.partition) == f.partition_key(partition))
}

/// Whether `node` shows as `first` does in every field.
fn alike(first: &Node, node: &Node, fields: &[Field]) -> bool {
    fields.iter().all(|f| f.node_key(first) == f.node_key(node))
}

/// The line's first node name in hostlist order.
fn first_name<'a>(line: &Line<'a>) -> &'a str {
    line.nodes
        .iter()
        .copied()
        .map(|n| n.name.as_str())
        .min_by(|a, b| name_order(a, b))
        .unwrap_or("")
}

/// sinfo's node name order: runs of digits compare as numbers (`n9` before
/// `n10`), the rest as text. (sinfo compares only at the first difference,
/// which is not a total order for names such as `n1a`, `n9`, `n10`; this
/// compares run by run, which agrees with it for names ending in a number.)
pub fn name_order(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (runs(a), runs(b));
    loop {
        match (x.next(), y.next()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(p), Some(q)) => {
                let numeric = |s: &str| s.starts_with(|c: char| c.is_ascii_digit());
                let order = if numeric(p) && numeric(q) {
                    let (p, q) = (p.trim_start_matches('0'), q.trim_start_matches('0'));
                    p.len().cmp(&q.len()).then_with(|| p.cmp(q))
                } else {
                    p.cmp(q)
                };
                if order != Ordering::Equal {
                    return order;
                }
            }
        }
    }
}

/// `name` cut into runs of digits and of other characters.
fn runs(name: &str) -> impl Iterator<Item = &str> {
    let mut rest = name;
    std::iter::from_fn(move || {
        let digits = rest.starts_with(|c: char| c.is_ascii_digit());
        let end = rest
            .find(|c: char| c.is_ascii_digit() != digits)
            .unwrap_or(rest.len());
        let (run, tail) = rest.split_at(end);
        rest = tail;
        (!run.is_empty()).then_some(run)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::test_jobs::{nodes, partitions, scenario};

    fn shown(lines: &[Line]) -> Vec<(String, Vec<String>)> {
        lines
            .iter()
            .map(|l| {
                (
                    l.partition.name.clone(),
                    l.nodes.iter().map(|n| n.name.clone()).collect(),
                )
            })
            .collect()
    }

    fn row(partition: &str, names: &[&str]) -> (String, Vec<String>) {
        (
            partition.to_string(),
            names.iter().map(|n| n.to_string()).collect(),
        )
    }

    #[test]
    fn nodes_alike_share_a_line_sorted_by_state() {
        let state = scenario();
        let (all, parts) = (nodes(&state), partitions(&state));
        let fields = [Field::Partition, Field::StateCompact, Field::NodeList];
        let out = lines(&all, &parts, &fields, Grouping::default());
        assert_eq!(
            shown(&out),
            [
                row("gpu", &["n1", "n4"]),
                row("gpu", &["n3"]),
                row("gpu", &["n2"])
            ]
        );
    }

    #[test]
    fn partitions_without_shown_nodes_keep_a_line_and_per_node_lines_sort_by_name() {
        let state = scenario();
        let (all, parts) = (nodes(&state), partitions(&state));
        let mut two = parts.clone();
        two.push(Partition {
            name: "debug".into(),
            is_default: false,
            nodes: ["n2".to_string()].into(),
            ..parts[0].clone()
        });
        let fields = [Field::Partition, Field::NodeList];
        let out = lines(&all[2..3], &two, &fields, Grouping::default());
        assert_eq!(shown(&out), [row("gpu", &["n3"]), row("debug", &[])]);
        let per_node = Grouping {
            per_node: true,
            any_partition: false,
        };
        let out = lines(&all[1..3], &two, &fields, per_node);
        assert_eq!(
            shown(&out),
            [
                row("gpu", &["n2"]),
                row("debug", &["n2"]),
                row("gpu", &["n3"])
            ]
        );
        // Without a partition field, a node in two partitions is counted once.
        let out = lines(&all, &two, &[Field::Nodes], Grouping::default());
        assert_eq!(shown(&out), [row("gpu", &["n1", "n2", "n3", "n4"])]);
    }

    #[test]
    fn names_compare_their_numbers() {
        let mut names = vec![
            "n10",
            "n9",
            "m2",
            "n1a",
            "n1",
            "n01",
            "rack2-n3",
            "rack10-n1",
        ];
        names.sort_by(|a, b| name_order(a, b));
        assert_eq!(
            names,
            [
                "m2",
                "n01",
                "n1",
                "n1a",
                "n9",
                "n10",
                "rack2-n3",
                "rack10-n1"
            ]
        );
    }
}
