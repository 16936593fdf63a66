//! Nodes and network topology as written in `corral.toml`: `[[nodes]]` lines
//! (hostlist, CPUs, memory, GPUs, features) and `[topology]` (switches as in
//! Slurm's topology.conf, and blocks).

use serde::{Deserialize, Serialize};

/// A line of identical nodes (`[[nodes]]`), as Slurm's `NodeName=` lines.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    /// The nodes, as a hostlist expression: `gpu[01-16]`.
    pub names: String,
    /// Schedulable CPUs per node.
    pub cpus: u32,
    /// Schedulable memory per node: `512G`, `2T`, or MiB without a suffix.
    pub memory: String,
    /// GPUs per node.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gpus: u32,
    /// The GPUs' type, named by typed requests (`--gpus=h100:8`); required with GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_type: Option<String>,
    /// GPUs split into MIG instances, as `GPUS:PROFILES` entries (`4-7:3g.20gb*2`):
    /// each instance is a GPU slot of its own, typed as Slurm names it
    /// (`a100_3g.20gb`). See [`corral_state::mig`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mig: Vec<String>,
    /// Features for `--constraint`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The network topology (`[topology]`); absent means flat.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySection {
    /// Allowed block aggregation sizes in nodes, ascending (Slurm's `BlockSizes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_sizes: Vec<u32>,
    /// Switches (`[[topology.switches]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switches: Vec<SwitchSection>,
    /// Blocks (`[[topology.blocks]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<BlockSection>,
}

impl TopologySection {
    /// True when no switch or block is defined.
    pub fn is_empty(&self) -> bool {
        self.switches.is_empty() && self.blocks.is_empty() && self.block_sizes.is_empty()
    }
}

/// One switch, as Slurm's `SwitchName=s0 Nodes=tux[0-3]` or
/// `SwitchName=spine Switches=s[0-1]`: a leaf lists nodes, an inner switch lists
/// child switches.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSection {
    /// The switch's name.
    pub name: String,
    /// Nodes under this leaf switch, as a hostlist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<String>,
    /// Child switches of this inner switch, as a hostlist of switch names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switches: Option<String>,
}

/// A block of nodes with a fast interconnect, e.g. an NVL72 rack (Slurm's
/// `BlockName=b1 Nodes=...`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockSection {
    /// The block's name.
    pub name: String,
    /// Its nodes, as a hostlist.
    pub nodes: String,
}
