//! The pass's view of free capacity: every node's free GPUs (as a bitmask), CPUs
//! and memory, numbered densely, with a best-fit index for single-node jobs. The
//! pass takes from it as it plans, so later jobs see what earlier ones took.
//!
//! What does not change during a pass (names, partitions, topology) lives in a
//! shared [`Layout`], so a copy of the view for simulating the future (backfill,
//! preemption) copies only the capacity: a few dozen bytes per node.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use corral_state::job::{NodeAllocation, ResourceRequest};
use corral_state::node::Node;
use corral_state::{ClusterState, Timestamp};

use crate::topology::TopologyIndex;

/// The most GPUs per node the scheduler handles (the width of the free mask);
/// `DefineNodes` refuses nodes with more.
pub const MAX_GPUS_PER_NODE: usize = corral_state::node::MAX_GPUS_PER_NODE;

/// What does not change during a pass.
#[derive(Debug)]
pub struct Layout<'s> {
    /// The state the pass started from.
    pub state: &'s ClusterState,
    /// The leader's time for this pass.
    pub now: Timestamp,
    /// Node index by name.
    pub index_of: BTreeMap<&'s str, usize>,
    /// Node indices of each partition, ascending.
    pub partition_nodes: BTreeMap<&'s str, Vec<usize>>,
    /// Partition membership by node index.
    pub partition_member: BTreeMap<&'s str, Vec<bool>>,
    /// The topology over node indices.
    pub topology: TopologyIndex,
}

/// One node's free capacity during the pass.
#[derive(Debug, Clone, Copy)]
pub struct NodeSlot<'s> {
    /// The node in the state.
    pub node: &'s Node,
    /// Bit `i` set when GPU `i` is free, healthy and not drained.
    pub free_gpus: u64,
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

impl<'s> NodeSlot<'s> {
    /// Number of free GPUs of any type.
    pub fn free_gpu_count(&self) -> u32 {
        self.free_gpus.count_ones()
    }

    /// Free GPUs of `gpu_type` (any type when `None`), as a mask.
    pub fn free_mask_of(&self, gpu_type: Option<&str>) -> u64 {
        match gpu_type {
            None => self.free_gpus,
            Some(t) => {
                let of_type = self
                    .node
                    .gpus
                    .iter()
                    .filter(|g| g.gpu_type == t && (g.index as usize) < MAX_GPUS_PER_NODE)
                    .fold(0u64, |mask, g| mask | (1 << g.index));
                self.free_gpus & of_type
            }
        }
    }

    /// The first `count` free GPUs of `gpu_type`, ascending.
    pub fn pick_gpus(&self, gpu_type: Option<&str>, count: usize) -> Vec<u32> {
        let mut mask = self.free_mask_of(gpu_type);
        let mut picked = Vec::with_capacity(count);
        while picked.len() < count && mask != 0 {
            picked.push(mask.trailing_zeros());
            mask &= mask - 1;
        }
        picked
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
            && self.free_mask_of(want.gpu_type.as_deref()).count_ones() >= want.gpus_per_node
            && want.features.iter().all(|f| self.node.features.contains(f))
    }
}

/// Free capacity of the whole cluster during one pass.
#[derive(Debug, Clone)]
pub struct View<'s> {
    /// Names, partitions and topology.
    pub layout: Rc<Layout<'s>>,
    /// Nodes in name order.
    pub nodes: Vec<NodeSlot<'s>>,
    /// Best-fit index: (free GPUs, node index) for nodes that accept work; `None`
    /// in simulation copies, which search linearly instead.
    best_fit: Option<BTreeSet<(u32, usize)>>,
    /// Nodes that accept work, by number of free GPUs (an upper bound on what
    /// any placement can find, checked before searching).
    free_histogram: [u32; MAX_GPUS_PER_NODE + 1],
}

impl<'s> View<'s> {
    /// Builds the view from the state: O(nodes + GPUs).
    pub fn build(state: &'s ClusterState, now: Timestamp) -> Self {
        Self::build_avoiding(state, now, &BTreeSet::new())
    }

    /// Builds the view with the nodes of `avoid` taking no new work this pass
    /// (the leader has not heard from their agents lately).
    pub fn build_avoiding(
        state: &'s ClusterState,
        now: Timestamp,
        avoid: &BTreeSet<String>,
    ) -> Self {
        let nodes: Vec<NodeSlot<'s>> = state
            .nodes()
            .values()
            .map(|node| {
                let mut slot = slot_of(node);
                slot.accepts_work &= !avoid.contains(&node.name);
                slot
            })
            .collect();
        let index_of: BTreeMap<&str, usize> = state
            .nodes()
            .keys()
            .enumerate()
            .map(|(i, name)| (name.as_str(), i))
            .collect();
        let partition_nodes: BTreeMap<&str, Vec<usize>> = state
            .partitions()
            .values()
            .map(|p| {
                let mut members: Vec<usize> = p
                    .nodes
                    .iter()
                    .filter_map(|n| index_of.get(n.as_str()).copied())
                    .collect();
                members.sort_unstable();
                (p.name.as_str(), members)
            })
            .collect();
        let partition_member = partition_nodes
            .iter()
            .map(|(name, members)| {
                let mut bits = vec![false; nodes.len()];
                for &i in members {
                    bits[i] = true;
                }
                (*name, bits)
            })
            .collect();
        let topology = TopologyIndex::build(state.topology(), &index_of, nodes.len());
        let best_fit = nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.accepts_work && !n.exclusive_held)
            .map(|(i, n)| (n.free_gpu_count(), i))
            .collect();
        let layout = Layout {
            state,
            now,
            index_of,
            partition_nodes,
            partition_member,
            topology,
        };
        let mut view = View {
            layout: Rc::new(layout),
            nodes,
            best_fit: Some(best_fit),
            free_histogram: [0; MAX_GPUS_PER_NODE + 1],
        };
        for i in 0..view.nodes.len() {
            view.count(i, 1);
        }
        view
    }

    /// Adds `delta` (+1 or -1) for node `i` in the free histogram.
    fn count(&mut self, i: usize, delta: i32) {
        let slot = self.nodes[i];
        if slot.accepts_work && !slot.exclusive_held {
            let bucket = &mut self.free_histogram[slot.free_gpu_count() as usize];
            *bucket = bucket.saturating_add_signed(delta);
        }
    }

    /// How many nodes (of any partition) accept work with at least `gpus` free GPUs.
    pub fn nodes_with_free_gpus(&self, gpus: u32) -> u32 {
        self.free_histogram[(gpus as usize).min(MAX_GPUS_PER_NODE)..]
            .iter()
            .sum()
    }

    /// A copy for simulating releases: capacity only, no best-fit index.
    pub fn simulation(&self) -> Self {
        View {
            layout: Rc::clone(&self.layout),
            nodes: self.nodes.clone(),
            best_fit: None,
            free_histogram: self.free_histogram,
        }
    }

    /// The pass's time.
    pub fn now(&self) -> Timestamp {
        self.layout.now
    }

    /// Node index by name.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.layout.index_of.get(name).copied()
    }

    /// Node indices with at least `min_free_gpus` free GPUs, fewest free first
    /// (best fit), then by index; `None` in simulation copies.
    pub fn best_fit_order(&self, min_free_gpus: u32) -> Option<impl Iterator<Item = usize> + '_> {
        self.best_fit
            .as_ref()
            .map(|index| index.range((min_free_gpus, 0)..).map(|(_, i)| *i))
    }

    fn unindex(&mut self, i: usize) {
        self.count(i, -1);
        let key = (self.nodes[i].free_gpu_count(), i);
        if let Some(index) = self.best_fit.as_mut() {
            index.remove(&key);
        }
    }

    fn reindex(&mut self, i: usize) {
        self.count(i, 1);
        let slot = self.nodes[i];
        if let Some(index) = self.best_fit.as_mut()
            && slot.accepts_work
            && !slot.exclusive_held
        {
            index.insert((slot.free_gpu_count(), i));
        }
    }

    /// Takes an allocation out of the free capacity.
    pub fn take(&mut self, allocation: &[NodeAllocation], exclusive: bool) {
        for part in allocation {
            let Some(i) = self.index(&part.node) else {
                continue;
            };
            self.unindex(i);
            let slot = &mut self.nodes[i];
            slot.free_gpus &= !mask_of(&part.gpus);
            slot.free_cpus = slot.free_cpus.saturating_sub(part.cpus);
            slot.free_memory_mb = slot.free_memory_mb.saturating_sub(part.memory_mb);
            slot.busy = true;
            slot.exclusive_held |= exclusive;
            self.reindex(i);
        }
    }

    /// Gives resources back (simulating releases for backfill and preemption).
    /// GPUs that are drained or unhealthy stay unavailable.
    pub fn give_back(
        &mut self,
        node: usize,
        gpus: &[u32],
        cpus: u32,
        memory_mb: u64,
        exclusive: bool,
    ) {
        self.unindex(node);
        let slot = &mut self.nodes[node];
        slot.free_gpus |= mask_of(gpus) & usable_mask(slot.node);
        slot.free_cpus = (slot.free_cpus + cpus).min(slot.node.cpus);
        slot.free_memory_mb = (slot.free_memory_mb + memory_mb).min(slot.node.memory_mb);
        if exclusive {
            slot.exclusive_held = false;
        }
        if slot.free_cpus == slot.node.cpus && slot.free_memory_mb == slot.node.memory_mb {
            slot.busy = false;
        }
        self.reindex(node);
    }

    /// The node's name.
    pub fn name(&self, node: usize) -> &'s str {
        self.nodes[node].node.name.as_str()
    }
}

/// A mask with the bits of `gpus` set (indices past the mask width are ignored).
pub fn mask_of(gpus: &[u32]) -> u64 {
    gpus.iter()
        .filter(|g| (**g as usize) < MAX_GPUS_PER_NODE)
        .fold(0, |mask, g| mask | (1 << g))
}

/// GPUs that are healthy and not drained, whatever holds them.
fn usable_mask(node: &Node) -> u64 {
    node.gpus
        .iter()
        .filter(|g| g.drain.is_none() && g.health == corral_state::node::GpuHealth::Healthy)
        .fold(0, |mask, g| {
            if (g.index as usize) < MAX_GPUS_PER_NODE {
                mask | (1 << g.index)
            } else {
                mask
            }
        })
}

fn slot_of(node: &Node) -> NodeSlot<'_> {
    let free: Vec<u32> = node
        .gpus
        .iter()
        .filter(|g| g.is_free_and_usable())
        .map(|g| g.index)
        .collect();
    NodeSlot {
        node,
        free_gpus: mask_of(&free),
        free_cpus: node.free_cpus(),
        free_memory_mb: node.free_memory_mb(),
        accepts_work: node.accepts_work(),
        busy: !node.allocations.is_empty(),
        exclusive_held: node.is_held_exclusively(),
    }
}
