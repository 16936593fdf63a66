//! `[[nodes]]` lines into node definitions: hostlists expanded, every node
//! defined once, hardware checked as `DefineNodes` would; and the check that
//! other sections name only defined nodes.

use std::collections::{BTreeMap, BTreeSet};

use corral_state::mig::MigLayout;
use corral_state::node::{GpuDefinition, MAX_GPUS_PER_NODE, NodeDefinition};

use super::values::{Checked, hostlist, memory_mb, name};
use crate::config::error::Refusal;
use crate::config::file::NodeSection;

/// Expands and checks every node line.
pub(crate) fn check(sections: &[NodeSection]) -> Checked<Vec<NodeDefinition>> {
    let mut line_of: BTreeMap<String, usize> = BTreeMap::new();
    let mut defs = Vec::new();
    for (i, section) in sections.iter().enumerate() {
        let key = |field: &str| format!("nodes[{i}].{field}");
        let names = hostlist(&key("names"), &section.names)?;
        if section.cpus == 0 {
            return Err(Refusal::new(key("cpus"), "a node needs at least one CPU"));
        }
        let memory_mb = memory_mb(&key("memory"), &section.memory)?;
        if memory_mb == 0 {
            return Err(Refusal::new(
                key("memory"),
                "a node needs memory; give its schedulable memory, e.g. 512G",
            ));
        }
        let gpus = gpus(i, section)?;
        let mut features = BTreeSet::new();
        for (f, feature) in section.features.iter().enumerate() {
            name(&format!("nodes[{i}].features[{f}]"), "feature", feature)?;
            features.insert(feature.clone());
        }
        for node in names {
            name(&key("names"), "node", &node)?;
            if let Some(first) = line_of.insert(node.clone(), i) {
                let reason = if first == i {
                    format!("node '{node}' is listed twice")
                } else {
                    format!(
                        "node '{node}' is already defined by nodes[{first}]; define each node once"
                    )
                };
                return Err(Refusal::new(key("names"), reason));
            }
            defs.push(NodeDefinition {
                name: node,
                cpus: section.cpus,
                memory_mb,
                gpus: gpus.clone(),
                features: features.clone(),
            });
        }
    }
    Ok(defs)
}

/// The GPU slots of one line: `gpus` of `gpu_type`, those named by `mig` split
/// into their instances, indexed from 0 in enumeration order.
fn gpus(i: usize, section: &NodeSection) -> Checked<Vec<GpuDefinition>> {
    let key = |field: &str| format!("nodes[{i}].{field}");
    if section.gpus as usize > MAX_GPUS_PER_NODE {
        return Err(Refusal::new(
            key("gpus"),
            format!(
                "{} GPUs per node; corral supports at most {MAX_GPUS_PER_NODE}",
                section.gpus
            ),
        ));
    }
    if section.gpus == 0 && !section.mig.is_empty() {
        return Err(Refusal::new(
            key("mig"),
            "set without gpus; give the number of GPUs per node and their gpu_type too",
        ));
    }
    let gpu_type = match (&section.gpu_type, section.gpus) {
        (None, 0) => return Ok(Vec::new()),
        (Some(_), 0) => {
            return Err(Refusal::new(
                key("gpu_type"),
                "set without gpus; give the number of GPUs per node too, or leave gpu_type out",
            ));
        }
        (None, _) => {
            return Err(Refusal::new(
                key("gpu_type"),
                "missing; name the GPUs' type (e.g. h100), which typed requests such as --gpus=h100:8 use",
            ));
        }
        (Some(gpu_type), _) => gpu_type,
    };
    name(&key("gpu_type"), "GPU type", gpu_type)?;
    let slots = MigLayout::parse_entries(&section.mig)
        .and_then(|layout| layout.slots(section.gpus, gpu_type))
        .map_err(|e| Refusal::new(key("mig"), e.to_string()))?;
    Ok(slots
        .into_iter()
        .zip(0..)
        .map(|(slot, index)| GpuDefinition {
            index,
            gpu_type: slot.gpu_type,
        })
        .collect())
}

/// Refuses the first of `names` that is not a defined node.
pub(crate) fn all_defined(key: &str, names: &[String], defined: &BTreeSet<&str>) -> Checked<()> {
    match names.iter().find(|n| !defined.contains(n.as_str())) {
        Some(unknown) => Err(Refusal::new(
            key,
            format!("node '{unknown}' is not defined; define it under [[nodes]]"),
        )),
        None => Ok(()),
    }
}
