//! Where a job's nodes and tasks are, in Slurm's order: nodes as
//! `SLURM_JOB_NODELIST` lists them (hostlist-sorted), and tasks as Slurm's
//! default block distribution places them.
//!
//! The block distribution is Slurm's (`_task_layout_block` without
//! `pack_nodes`): each node can hold `cpus / cpus_per_task` tasks (at least one);
//! tasks are counted out one per node per round while nodes have room, then
//! round-robin over all nodes once every node is full, and each node's tasks get
//! consecutive ranks. So 5 tasks on two 3-CPU nodes are `3,2`, and 2 tasks on
//! two 1-CPU nodes are `1(x2)`.

use corral_proto::step::{StepLayout, TaskDistribution};
use corral_state::job::{Attempt, Job, NodeAllocation};
use corral_state::slurm::hostlist;

use super::TaskPlacement;

/// The nodes of an attempt in `SLURM_JOB_NODELIST` order.
#[derive(Debug, Clone)]
pub struct NodeLayout<'a> {
    nodes: Vec<&'a NodeAllocation>,
    nodelist: String,
}

impl<'a> NodeLayout<'a> {
    /// The attempt's nodes, ordered as their compressed hostlist expands.
    pub fn of(attempt: &'a Attempt) -> NodeLayout<'a> {
        let names: Vec<&str> = attempt.allocation.iter().map(|a| a.node.as_str()).collect();
        let nodelist = hostlist::compress(&names);
        // The order `compress` prints is the order its expansion gives back; an
        // expansion that fails (a name with `[` or `,`) keeps allocation order.
        let order = hostlist::expand(&nodelist)
            .unwrap_or_else(|_| names.iter().map(|n| n.to_string()).collect());
        let mut nodes: Vec<&NodeAllocation> = order
            .iter()
            .filter_map(|name| attempt.allocation.iter().find(|a| &a.node == name))
            .collect();
        if nodes.len() != attempt.allocation.len() {
            nodes = attempt.allocation.iter().collect();
        }
        NodeLayout { nodes, nodelist }
    }

    /// `SLURM_JOB_NODELIST`: the nodes as a compressed hostlist (`gpu[01-02]`).
    pub fn nodelist(&self) -> &str {
        &self.nodelist
    }

    /// The nodes, in nodelist order.
    pub fn nodes(&self) -> &[&'a NodeAllocation] {
        &self.nodes
    }

    /// How many nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True for an attempt without nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// `node`'s index in the nodelist (`SLURM_NODEID`), if it is one of the nodes.
    pub fn index_of(&self, node: &str) -> Option<usize> {
        self.nodes.iter().position(|a| a.node == node)
    }

    /// `node`'s allocation, if it is one of the nodes.
    pub fn allocation(&self, node: &str) -> Option<&'a NodeAllocation> {
        self.nodes.iter().copied().find(|a| a.node == node)
    }

    /// CPUs allocated on each node, in nodelist order.
    pub fn cpus(&self) -> Vec<u32> {
        self.nodes.iter().map(|a| a.cpus).collect()
    }

    /// How many tasks of `cpus_per_task` CPUs each node holds (see
    /// [`tasks_that_fit`]).
    pub fn task_capacity(&self, cpus_per_task: u32) -> Vec<u32> {
        self.nodes
            .iter()
            .map(|a| tasks_that_fit(a, cpus_per_task))
            .collect()
    }
}

/// How many tasks of `cpus_per_task` CPUs `allocation` holds: at least one, as
/// Slurm counts a node with fewer CPUs than a task as holding one.
pub fn tasks_that_fit(allocation: &NodeAllocation, cpus_per_task: u32) -> u32 {
    (allocation.cpus / cpus_per_task.max(1)).max(1)
}

/// Tasks per node when `ntasks` tasks are placed on nodes holding `capacity`
/// tasks each, by Slurm's block distribution.
pub fn block_distribution(ntasks: u32, capacity: &[u32]) -> Vec<u32> {
    let mut counts = vec![0u32; capacity.len()];
    if capacity.is_empty() {
        return counts;
    }
    let total: u64 = capacity.iter().map(|&c| u64::from(c)).sum();
    let mut left = ntasks;
    if u64::from(ntasks) >= total {
        // Every node fills up, then the rest go round-robin from the first node.
        counts.copy_from_slice(capacity);
        left = u32::try_from(u64::from(ntasks) - total).unwrap_or(u32::MAX);
        let n = u32::try_from(counts.len()).unwrap_or(u32::MAX);
        let (each, extra) = (left / n, left % n);
        for (i, count) in counts.iter_mut().enumerate() {
            let bonus = u32::from((i as u64) < u64::from(extra));
            *count = count.saturating_add(each).saturating_add(bonus);
        }
        return counts;
    }
    // Fewer tasks than room: one task per node with room, round after round.
    // Each round places at least one task, so this ends within `ntasks` rounds.
    let mut round = 0u32;
    while left > 0 {
        for (count, &cap) in counts.iter_mut().zip(capacity) {
            if left == 0 {
                break;
            }
            if cap > round {
                *count += 1;
                left -= 1;
            }
        }
        round += 1;
    }
    counts
}

/// Step `step` of `ntasks` tasks placed by Slurm's block distribution over all
/// of the attempt's nodes (the nodes that get no task are left out).
pub fn block_layout(job: &Job, attempt: &Attempt, ntasks: u32, step: u32) -> StepLayout {
    let layout = NodeLayout::of(attempt);
    let counts = block_distribution(ntasks, &layout.task_capacity(job.spec.cpus_per_task));
    let (nodes, tasks) = layout
        .nodes()
        .iter()
        .zip(counts)
        .filter(|(_, count)| *count > 0)
        .map(|(allocation, count)| (allocation.node.clone(), count))
        .unzip();
    StepLayout {
        step,
        nodes,
        tasks,
        distribution: TaskDistribution::Block,
        gpus_per_task: None,
    }
}

/// The tasks of `step` that run on `node`, in local-rank order, their ranks
/// dealt as the step's distribution says. Empty when `node` gets no task.
pub fn placements(step: &StepLayout, node: &str) -> Vec<TaskPlacement> {
    let Some((ranks, nodeid)) = step.ranks_on(node) else {
        return Vec::new();
    };
    let ntasks = step.ntasks();
    (0u32..)
        .zip(ranks)
        .map(|(localid, procid)| TaskPlacement {
            procid,
            localid,
            nodeid,
            ntasks,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_nodes_round_by_round() {
        assert_eq!(block_distribution(5, &[3, 3]), vec![3, 2]);
        assert_eq!(block_distribution(2, &[1, 1]), vec![1, 1]);
        assert_eq!(block_distribution(1, &[4, 4]), vec![1, 0]);
        assert_eq!(block_distribution(5, &[4, 4]), vec![3, 2]);
        assert_eq!(block_distribution(6, &[4, 2, 4]), vec![2, 2, 2]);
        assert_eq!(block_distribution(8, &[4, 2, 4]), vec![3, 2, 3]);
    }

    #[test]
    fn oversubscribes_evenly_once_full() {
        assert_eq!(block_distribution(7, &[2, 2]), vec![4, 3]);
        assert_eq!(block_distribution(4, &[1, 1, 1]), vec![2, 1, 1]);
    }

    #[test]
    fn no_nodes_no_tasks() {
        assert!(block_distribution(3, &[]).is_empty());
        assert_eq!(block_distribution(0, &[2, 2]), vec![0, 0]);
    }
}
