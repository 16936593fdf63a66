//! `[topology]` into the switch tree and blocks: names unique, each switch a
//! leaf (nodes) or inner (switches), every reference defined, and the tree
//! checks of `corral_state::topology::Topology::validate`.

use std::collections::{BTreeMap, BTreeSet};

use corral_state::topology::{Block, Switch, Topology, TopologyError};

use super::nodes::all_defined;
use super::values::{Checked, hostlist, name};
use crate::config::error::Refusal;
use crate::config::file::TopologySection;

/// Builds the topology; `defined` are the defined nodes.
pub(crate) fn check(section: &TopologySection, defined: &BTreeSet<&str>) -> Checked<Topology> {
    let mut index_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, switch) in section.switches.iter().enumerate() {
        let key = format!("topology.switches[{i}].name");
        name(&key, "switch", &switch.name)?;
        if let Some(first) = index_of.insert(&switch.name, i) {
            return Err(Refusal::new(
                key,
                format!(
                    "switch '{}' is defined twice (also topology.switches[{first}])",
                    switch.name
                ),
            ));
        }
    }
    let mut switches = BTreeMap::new();
    for (i, written) in section.switches.iter().enumerate() {
        let key = |field: &str| format!("topology.switches[{i}].{field}");
        let switch = match (&written.nodes, &written.switches) {
            (Some(nodes), None) => {
                let nodes = hostlist(&key("nodes"), nodes)?;
                all_defined(&key("nodes"), &nodes, defined)?;
                Switch {
                    nodes,
                    children: Vec::new(),
                }
            }
            (None, Some(children)) => {
                let children = hostlist(&key("switches"), children)?;
                if let Some(unknown) = children.iter().find(|c| !index_of.contains_key(c.as_str()))
                {
                    return Err(Refusal::new(
                        key("switches"),
                        format!(
                            "switch '{unknown}' is not defined; define it under [[topology.switches]]"
                        ),
                    ));
                }
                Switch {
                    nodes: Vec::new(),
                    children,
                }
            }
            (Some(_), Some(_)) => {
                return Err(Refusal::new(
                    key("switches"),
                    "a switch lists nodes (a leaf) or switches (an inner switch), not both",
                ));
            }
            (None, None) => {
                return Err(Refusal::new(
                    key("nodes"),
                    "missing; a switch lists nodes (a leaf) or switches (an inner switch)",
                ));
            }
        };
        switches.insert(written.name.clone(), switch);
    }
    let mut block_names = BTreeSet::new();
    let mut blocks = Vec::new();
    for (i, written) in section.blocks.iter().enumerate() {
        let key = |field: &str| format!("topology.blocks[{i}].{field}");
        name(&key("name"), "block", &written.name)?;
        if !block_names.insert(written.name.as_str()) {
            return Err(Refusal::new(
                key("name"),
                format!("block '{}' is defined twice", written.name),
            ));
        }
        let nodes = hostlist(&key("nodes"), &written.nodes)?;
        all_defined(&key("nodes"), &nodes, defined)?;
        blocks.push(Block {
            name: written.name.clone(),
            nodes,
        });
    }
    let topology = Topology {
        switches,
        blocks,
        block_sizes: section.block_sizes.clone(),
    };
    topology.validate().map_err(|e| {
        let key = match &e {
            TopologyError::BadBlockSizes(_) => "topology.block_sizes",
            TopologyError::NodeTwice { first, .. } if block_names.contains(first.as_str()) => {
                "topology.blocks"
            }
            _ => "topology.switches",
        };
        Refusal::new(key, e.to_string())
    })?;
    Ok(topology)
}
