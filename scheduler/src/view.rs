//! The pass's view of free capacity: every node's free GPUs, CPUs and memory,
//! numbered densely, with a best-fit index for single-node jobs. The pass takes
//! from it as it plans, so later jobs see what earlier ones took.

use std::collections::{BTreeMap, BTreeSet};

use corral_state::job::{NodeAllocation, ResourceRequest};
use corral_state::node::Node;
use corral_state::{ClusterState, Timestamp};

use crate::topology::TopologyIndex;

/// One node's free capacity during the pass.
#[derive(Debug, Clone)]
pub struct NodeSlot<'s> {
    /// The node in the state.
    pub node: &'s Node,
    /// Indices of GPUs that are free, healthy and not drained, ascending.
    pub free_gpus: Vec<u32>,
    /// Free CPUs.
    pub free_cpus: u32,
    /// Free memory, MiB.
    pub free_memory_mb: u64,
    /// Up and not drained.
    pub accepts_work: bool,
    /// Something runs or is planned here.
    pub busy: bool,
    /// Held exclusively by a running or planned job.
    pub exclusive_held: bool,
}

impl NodeSlot<'_> {
    /// Free GPUs of `gpu_type` (any type when `None`).
    pub fn free_gpus_of(&self, gpu_type: Option<&str>) -> impl Iterator<Item = u32> + '_ {
        self.free_gpus.iter().copied().filter(move |i| {
            gpu_type.is_none_or(|t| self.node.gpus.get(*i as usize).is_some_and(|g| g.gpu_type == t))
        })
    }

    /// True when this node can take one node's share of `want` right now, ignoring
    /// partitions, reservations and the job's node lists.
    pub fn fits(&self, want: &ResourceRequest) -> bool {
        if !self.accepts_work || self.exclusive_held || (want.exclusive && self.busy) {
            return false;
        }
        let memory_ok = if want.whole_node_memory {
            self.free_memory_mb == self.node.memory_mb && !self.busy
        } else {
            self.free_memory_mb >= want.memory_per_node_mb
        };
        memory_ok
            && self.free_cpus >= want.cpus_per_node
            && self.free_gpus_of(want.gpu_type.as_deref()).take(want.gpus_per_node as usize).count()
                == want.gpus_per_node as usize
            && want.features.iter().all(|f| self.node.features.contains(f))
    }
}

/// Free capacity of the whole cluster during one pass.
#[derive(Debug, Clone)]
pub struct View<'s> {
    /// The state the pass started from.
    pub state: &'s ClusterState,
    /// The leader's time for this pass.
    pub now: Timestamp,
    /// Nodes in name order.
    pub nodes: Vec<NodeSlot<'s>>,
    /// Node index by name.
    pub index_of: BTreeMap<&'s str, usize>,
        /// Node indices of each partition, ascending.
    pub partition_nodes: BTreeMap<&'s str, Vec<usize>>,
    /// Partition membership by node index.
    pub partition_member: BTreeMap<&'s str, Vec<bool>>,
    /// The topology over node indices.
    pub topology: TopologyIndex,
    /// Best-fit index: (free GPUs, node index) for nodes that accept work.
    by_free_gpus: BTreeSet<(usize, usize)>,
}

impl<'s> View<'s> {
    /// Builds the view from the state: O(nodes + GPUs).
    pub fn build(state: &'s ClusterState, now: Timestamp) -> Self {
        let nodes: Vec<NodeSlot<'s>> = state.nodes().values().map(slot_of).collect();
        let index_of: BTreeMap<&str, usize> =
            state.nodes().keys().enumerate().map(|(i, name)| (name.as_str(), i)).collect();
                let partition_nodes: BTreeMap<&str, Vec<usize>> = state
            .partitions()
            .values()
            .map(|p| {
                let mut members: Vec<usize> = p.nodes.iter().filter_map(|n| index_of.get(n.as_str()).copied()).collect();
                members.sort_unstable();
                (p.name.as_str(), members)
            })
            .collect();
                let partition_member = partition_nodes
            .iter()
            .map(|(name, members): (&&str, &Vec<usize>)| {
                let mut bits = vec![false; nodes.len()];
                for &i in members {
                    bits[i] = true;
                }
                (*name, bits)
            })
            .collect();
        let topology = TopologyIndex::build(state.topology(), &index_of, nodes.len());
        let by_free_gpus = nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.accepts_work && !n.exclusive_held)
            .map(|(i, n)| (n.free_gpus.len(), i))
            .collect();
                View { state, now, nodes, index_of, partition_nodes, partition_member, topology, by_free_gpus }
    }

    /// Node indices with at least `min_free_gpus` free GPUs, fewest free first
    /// (best fit), then by index.
    pub fn best_fit_order(&self, min_free_gpus: usize) -> impl Iterator<Item = usize> + '_ {
        self.by_free_gpus.range((min_free_gpus, 0)..).map(|(_, i)| *i)
    }

    /// Takes an allocation out of the free capacity.
    pub fn take(&mut self, allocation: &[NodeAllocation], exclusive: bool) {
        for part in allocation {
            let Some(&i) = self.index_of.get(part.node.as_str()) else {
                continue;
            };
            let slot = &mut self.nodes[i];
            self.by_free_gpus.remove(&(slot.free_gpus.len(), i));
            slot.free_gpus.retain(|g| !part.gpus.contains(g));
            slot.free_cpus = slot.free_cpus.saturating_sub(part.cpus);
            slot.free_memory_mb = slot.free_memory_mb.saturating_sub(part.memory_mb);
            slot.busy = true;
            slot.exclusive_held |= exclusive;
            if slot.accepts_work && !slot.exclusive_held {
                self.by_free_gpus.insert((slot.free_gpus.len(), i));
            }
        }
    }

    /// Gives resources back (used when simulating releases for backfill and
    /// preemption on a copy of the view).
    pub fn give_back(&mut self, node: usize, gpus: &[u32], cpus: u32, memory_mb: u64, exclusive: bool) {
        let slot = &mut self.nodes[node];
        self.by_free_gpus.remove(&(slot.free_gpus.len(), node));
        for g in gpus {
            let usable = slot.node.gpus.get(*g as usize).is_some_and(|gpu| gpu.drain.is_none() && gpu.health == corral_state::node::GpuHealth::Healthy);
            if usable && !slot.free_gpus.contains(g) {
                slot.free_gpus.push(*g);
            }
        }
        slot.free_gpus.sort_unstable();
        slot.free_cpus = (slot.free_cpus + cpus).min(slot.node.cpus);
        slot.free_memory_mb = (slot.free_memory_mb + memory_mb).min(slot.node.memory_mb);
        if exclusive {
            slot.exclusive_held = false;
        }
        if slot.free_cpus == slot.node.cpus && slot.free_memory_mb == slot.node.memory_mb {
            slot.busy = false;
        }
        if slot.accepts_work && !slot.exclusive_held {
            self.by_free_gpus.insert((slot.free_gpus.len(), node));
        }
    }

    /// The node's name.
    pub fn name(&self, node: usize) -> &'s str {
        self.nodes[node].node.name.as_str()
    }
}

fn slot_of(node: &Node) -> NodeSlot<'_> {
    NodeSlot {
        node,
        free_gpus: node.gpus.iter().filter(|g| g.is_free_and_usable()).map(|g| g.index).collect(),
        free_cpus: node.free_cpus(),
        free_memory_mb: node.free_memory_mb(),
        accepts_work: node.accepts_work(),
        busy: !node.allocations.is_empty(),
        exclusive_held: node.is_held_exclusively(),
    }
}
