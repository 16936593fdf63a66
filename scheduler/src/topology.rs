//! The switch tree and blocks as index arrays over the pass's node numbering, so
//! placement can count free nodes per switch without touching strings.

use std::collections::BTreeMap;

use corral_state::topology::Topology;

/// One switch: its level (0 for leaf switches) and what is below it.
#[derive(Debug, Clone)]
pub struct SwitchIndex {
    /// Name, for messages.
    pub name: String,
    /// 0 for a leaf switch, 1 + the highest child level otherwise.
    pub level: u32,
    /// Leaf switches at or below this switch (indices into `TopologyIndex::switches`).
    pub leaves: Vec<usize>,
    /// Nodes directly under this switch (leaf switches only).
    pub nodes: Vec<usize>,
}

/// The topology over node indices.
#[derive(Debug, Clone, Default)]
pub struct TopologyIndex {
    /// Every switch, leaves first then by level, then by name.
    pub switches: Vec<SwitchIndex>,
    /// The leaf switch of each node, by node index.
    pub leaf_of: Vec<Option<usize>>,
    /// Groups of blocks for each block size level, smallest first: each group is a
    /// list of node indices.
    pub block_groups: Vec<Vec<Vec<usize>>>,
}

impl TopologyIndex {
    /// Builds the index; `node_index` maps node names to the pass's numbering.
    pub fn build(
        topology: &Topology,
        node_index: &BTreeMap<&str, usize>,
        node_count: usize,
    ) -> Self {
        let mut index = TopologyIndex {
            leaf_of: vec![None; node_count],
            ..Default::default()
        };
        let levels = switch_levels(topology);
        let mut order: Vec<(&String, u32)> = levels.iter().map(|(n, l)| (*n, *l)).collect();
        order.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0)));
        let position: BTreeMap<&str, usize> = order
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.as_str(), i))
            .collect();
        for (name, level) in &order {
            let switch = &topology.switches[*name];
            let nodes: Vec<usize> = switch
                .nodes
                .iter()
                .filter_map(|n| node_index.get(n.as_str()).copied())
                .collect();
            let mut leaves = Vec::new();
            if *level == 0 {
                leaves.push(position[name.as_str()]);
            }
            for child in &switch.children {
                if let Some(&c) = position.get(child.as_str()) {
                    leaves.extend(index.switches[c].leaves.iter().copied());
                }
            }
            leaves.sort_unstable();
            leaves.dedup();
            index.switches.push(SwitchIndex {
                name: (*name).clone(),
                level: *level,
                leaves,
                nodes,
            });
        }
        for (i, switch) in index.switches.iter().enumerate() {
            for &node in &switch.nodes {
                index.leaf_of[node] = Some(i);
            }
        }
        index.block_groups = block_groups(topology, node_index);
        index
    }

    /// True when there is a switch tree.
    pub fn has_tree(&self) -> bool {
        !self.switches.is_empty()
    }
}

/// Level of every switch: leaves (no children) are 0.
fn switch_levels(topology: &Topology) -> BTreeMap<&String, u32> {
    let mut levels = BTreeMap::new();
    // The topology is validated as a forest, so this terminates within
    // `switches.len()` rounds; the bound guards against a malformed one anyway.
    for _ in 0..=topology.switches.len() {
        let mut changed = false;
        for (name, switch) in &topology.switches {
            let child_levels: Option<Vec<u32>> = switch
                .children
                .iter()
                .map(|c| levels.get(c).copied())
                .collect();
            let level = match child_levels {
                Some(ls) if switch.children.is_empty() => ls.into_iter().max().unwrap_or(0),
                Some(ls) => ls.into_iter().max().unwrap_or(0) + 1,
                None => continue,
            };
            if levels.insert(name, level) != Some(level) {
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    levels
}

/// For each block size (ascending), consecutive blocks grouped so each group
/// holds that many nodes' worth of blocks.
fn block_groups(topology: &Topology, node_index: &BTreeMap<&str, usize>) -> Vec<Vec<Vec<usize>>> {
    let blocks: Vec<Vec<usize>> = topology
        .blocks
        .iter()
        .map(|b| {
            b.nodes
                .iter()
                .filter_map(|n| node_index.get(n.as_str()).copied())
                .collect()
        })
        .collect();
    if blocks.is_empty() {
        return Vec::new();
    }
    let base = topology.blocks.first().map_or(1, |b| b.nodes.len().max(1));
    let sizes: Vec<usize> = if topology.block_sizes.is_empty() {
        vec![base]
    } else {
        topology.block_sizes.iter().map(|s| *s as usize).collect()
    };
    sizes
        .into_iter()
        .map(|size| {
            let per_group = (size / base).max(1);
            blocks
                .chunks(per_group)
                .map(|chunk| chunk.concat())
                .collect()
        })
        .collect()
}
