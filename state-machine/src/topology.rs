//! Network topology: a tree of switches (Slurm's topology.conf, `topology/tree`)
//! and blocks (`topology/block`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// One switch: leaf switches list nodes, inner switches list child switches.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switch {
    /// Nodes directly under this switch (leaf switches).
    pub nodes: Vec<String>,
    /// Child switches (inner switches).
    pub children: Vec<String>,
}

/// A block of nodes with fast interconnect (e.g. an NVL72 rack).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// Name.
    pub name: String,
    /// Nodes in the block.
    pub nodes: Vec<String>,
}

/// The cluster's topology; empty means flat.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Switches by name.
    pub switches: BTreeMap<String, Switch>,
    /// Blocks, in configuration order.
    pub blocks: Vec<Block>,
    /// Allowed block aggregation sizes in nodes (Slurm's `BlockSizes`), ascending.
    pub block_sizes: Vec<u32>,
}

/// A node's place in the switch tree (see [`Topology::address_of`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologyAddress {
    /// `SLURM_TOPOLOGY_ADDR`: switch names from the root, then the node, joined by dots.
    pub address: String,
    /// `SLURM_TOPOLOGY_ADDR_PATTERN`: `switch` for each switch, then `node`.
    pub pattern: String,
}

/// Why a topology was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// A switch lists a child that is not defined.
    #[error("switch '{switch}' lists unknown child switch '{child}'; define it or remove it")]
    UnknownChild {
        /// The parent.
        switch: String,
        /// The missing child.
        child: String,
    },
    /// A switch is reachable from itself, or has two parents.
    #[error(
        "switch '{0}' has more than one parent or is part of a cycle; the switches must form a tree"
    )]
    NotATree(String),
    /// A node sits under two leaf switches or in two blocks.
    #[error(
        "node '{node}' appears under both '{first}' and '{second}'; a node belongs to one leaf switch and one block"
    )]
    NodeTwice {
        /// The node.
        node: String,
        /// First container.
        first: String,
        /// Second container.
        second: String,
    },
    /// A switch lists both nodes and child switches.
    #[error(
        "switch '{0}' lists both nodes and switches; a switch holds nodes (a leaf) or switches, not both"
    )]
    MixedSwitch(String),
    /// Block sizes are not ascending or include zero.
    #[error("block sizes must be ascending and positive, got {0:?}")]
    BadBlockSizes(Vec<u32>),
}

impl Topology {
    /// Checks that the switches form a forest and no node is listed twice.
    pub fn validate(&self) -> Result<(), TopologyError> {
        let mut parent_of: BTreeMap<&str, &str> = BTreeMap::new();
        if let Some((name, _)) = self
            .switches
            .iter()
            .find(|(_, s)| !s.nodes.is_empty() && !s.children.is_empty())
        {
            return Err(TopologyError::MixedSwitch(name.clone()));
        }
        for (name, switch) in &self.switches {
            for child in &switch.children {
                if !self.switches.contains_key(child) {
                    return Err(TopologyError::UnknownChild {
                        switch: name.clone(),
                        child: child.clone(),
                    });
                }
                if child == name || parent_of.insert(child, name).is_some() {
                    return Err(TopologyError::NotATree(child.clone()));
                }
            }
        }
        for start in self.switches.keys() {
            let mut seen = BTreeSet::new();
            let mut at = start.as_str();
            while let Some(parent) = parent_of.get(at) {
                if !seen.insert(at) {
                    return Err(TopologyError::NotATree(start.clone()));
                }
                at = parent;
            }
        }
        let leaves = self
            .switches
            .iter()
            .map(|(name, switch)| (name.as_str(), switch.nodes.as_slice()));
        check_nodes_once(leaves)?;
        check_nodes_once(
            self.blocks
                .iter()
                .map(|b| (b.name.as_str(), b.nodes.as_slice())),
        )?;
        let ascending = self.block_sizes.windows(2).all(|w| w[0] < w[1]);
        if !ascending || self.block_sizes.contains(&0) {
            return Err(TopologyError::BadBlockSizes(self.block_sizes.clone()));
        }
        Ok(())
    }

    /// Where `node` sits in the switch tree, as Slurm's `topology/tree` gives
    /// it to jobs (`SLURM_TOPOLOGY_ADDR=top.leaf.node`,
    /// `SLURM_TOPOLOGY_ADDR_PATTERN=switch.switch.node`): the switches from
    /// the root down, then the node. `None` when no leaf switch lists the node
    /// (a flat cluster), where Slurm's address is the node alone.
    pub fn address_of(&self, node: &str) -> Option<TopologyAddress> {
        let leaf = self
            .switches
            .iter()
            .find(|(_, switch)| switch.nodes.iter().any(|n| n == node))?
            .0;
        let mut path = vec![leaf.as_str()];
        // A validated tree has no cycle; the bound keeps a bad one finite.
        while path.len() <= self.switches.len() {
            let Some((parent, _)) = self
                .switches
                .iter()
                .find(|(_, s)| s.children.iter().any(|c| c == path[path.len() - 1]))
            else {
                break;
            };
            path.push(parent);
        }
        path.reverse();
        let pattern = vec!["switch"; path.len()];
        path.push(node);
        Some(TopologyAddress {
            address: path.join("."),
            pattern: format!("{}.node", pattern.join(".")),
        })
    }

    /// Every node named anywhere in the topology.
    pub fn nodes(&self) -> BTreeSet<&str> {
        let under_switches = self.switches.values().flat_map(|s| s.nodes.iter());
        let in_blocks = self.blocks.iter().flat_map(|b| b.nodes.iter());
        under_switches
            .chain(in_blocks)
            .map(String::as_str)
            .collect()
    }
}

fn check_nodes_once<'a>(
    groups: impl Iterator<Item = (&'a str, &'a [String])>,
) -> Result<(), TopologyError> {
    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    for (group, nodes) in groups {
        for node in nodes {
            if let Some(first) = owner.insert(node, group) {
                return Err(TopologyError::NodeTwice {
                    node: node.clone(),
                    first: first.to_string(),
                    second: group.to_string(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn switch(nodes: &[&str], children: &[&str]) -> Switch {
        Switch {
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            children: children.iter().map(|c| c.to_string()).collect(),
        }
    }

    #[test]
    fn a_node_is_addressed_from_the_root_switch_down() {
        let topology = Topology {
            switches: BTreeMap::from([
                ("top".to_string(), switch(&[], &["leaf1", "leaf2"])),
                ("leaf1".to_string(), switch(&["n1", "n2"], &[])),
                ("leaf2".to_string(), switch(&["n3"], &[])),
                ("lonely".to_string(), switch(&["n9"], &[])),
            ]),
            ..Topology::default()
        };
        let address = topology.address_of("n3").expect("n3 is in the tree");
        assert_eq!(address.address, "top.leaf2.n3");
        assert_eq!(address.pattern, "switch.switch.node");
        let address = topology.address_of("n9").expect("n9 is in the tree");
        assert_eq!(address.address, "lonely.n9");
        assert_eq!(address.pattern, "switch.node");
        assert_eq!(topology.address_of("n5"), None);
        assert_eq!(Topology::default().address_of("n1"), None);
    }
}
