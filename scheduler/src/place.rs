//! Finding a gang: every node of a job at once, or none. Single-node jobs take the
//! best-fit node (fewest free GPUs that still fit) from an ordered index. Gangs go
//! under the lowest switch that can hold them, best fit among those (fewest
//! candidates left over), spanning as few leaf switches as possible; with blocks,
//! into the smallest block group that fits. `--switches=N` caps the leaf switches.

use corral_state::job::{Job, NodeAllocation};
use corral_state::node::MAX_GPUS_PER_NODE;

use crate::view::View;

/// Why no gang was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaceFailure {
    /// Not enough free resources on allowed nodes.
    Resources,
    /// A node the job requires (`--nodelist`) is down, drained, busy or reserved.
    RequiredNodes,
    /// Enough nodes, but not under `--switches` leaf switches.
    Topology,
}

/// How to place: which nodes the caller allows (reservations, backfill holds), and
/// whether `--switches` still binds (it stops binding after its max wait).
pub struct Constraints<'a> {
    /// False for nodes the job may not use this pass.
    pub allowed: &'a dyn Fn(usize) -> bool,
    /// Enforce the job's `--switches`.
    pub enforce_switches: bool,
}

/// Finds a placement for the job's next attempt, or says why there is none.
pub fn place(
    view: &View<'_>,
    job: &Job,
    constraints: &Constraints<'_>,
) -> Result<Vec<NodeAllocation>, PlaceFailure> {
    let want = &job.resources;
    let member = view
        .layout
        .partition_member
        .get(job.partition.as_str())
        .ok_or(PlaceFailure::Resources)?;
    let usable = |i: usize| {
        member[i]
            && (constraints.allowed)(i)
            && view.nodes[i].fits(want)
            && (want.excluded_nodes.is_empty() || !want.excluded_nodes.contains(view.name(i)))
    };
    let mut required = Vec::with_capacity(want.required_nodes.len());
    for name in &want.required_nodes {
        match view.index(name) {
            Some(i) if usable(i) => required.push(i),
            _ => return Err(PlaceFailure::RequiredNodes),
        }
    }
    let needed = want.nodes as usize - required.len();
    if (view.nodes_with_free_gpus(want.gpus_per_node) as usize) < needed {
        return Err(PlaceFailure::Resources);
    }
    let switches = want
        .switches
        .filter(|_| constraints.enforce_switches)
        .map(|s| s.count as usize);

    let chosen = if needed == 0 {
        required
    } else if want.nodes == 1 && switches.is_none() {
        let first = match view.best_fit_order(want.gpus_per_node) {
            Some(mut order) => order.find(|&i| usable(i)),
            // Simulation copies keep no index: the same best fit, found linearly.
            None => view.layout.partition_nodes[job.partition.as_str()]
                .iter()
                .copied()
                .filter(|&i| usable(i))
                .min_by_key(|&i| (view.nodes[i].free_gpu_count(), i)),
        };
        vec![first.ok_or(PlaceFailure::Resources)?]
    } else {
        let candidates: Vec<usize> = view.layout.partition_nodes[job.partition.as_str()]
            .iter()
            .copied()
            .filter(|&i| usable(i) && !required.contains(&i))
            .collect();
        if candidates.len() < needed {
            return Err(PlaceFailure::Resources);
        }
        let mut picked = if !required.is_empty() {
            best_fit(view, candidates, needed)
        } else if !view.layout.topology.block_groups.is_empty() {
            in_blocks(view, &candidates, needed)
        } else if view.layout.topology.has_tree() {
            in_tree(view, &candidates, needed, switches)?
        } else {
            best_fit(view, candidates, needed)
        };
        picked.extend(required);
        picked
    };
    Ok(allocations(view, job, chosen))
}

/// Fewest free GPUs first, then by index.
fn best_fit(view: &View<'_>, mut nodes: Vec<usize>, count: usize) -> Vec<usize> {
    nodes.sort_by_key(|&i| (view.nodes[i].free_gpu_count(), i));
    nodes.truncate(count);
    nodes
}

/// Candidates grouped by leaf switch (index = switch index), plus nodes that sit
/// under no switch.
fn by_leaf(view: &View<'_>, candidates: &[usize]) -> (Vec<Vec<usize>>, Vec<usize>) {
    let mut leaves = vec![Vec::new(); view.layout.topology.switches.len()];
    let mut outside = Vec::new();
    for &i in candidates {
        match view.layout.topology.leaf_of[i] {
            Some(leaf) => leaves[leaf].push(i),
            None => outside.push(i),
        }
    }
    (leaves, outside)
}

fn in_tree(
    view: &View<'_>,
    candidates: &[usize],
    needed: usize,
    max_leaves: Option<usize>,
) -> Result<Vec<usize>, PlaceFailure> {
    let (leaves, outside) = by_leaf(view, candidates);
    let switches = &view.layout.topology.switches;
    let count = |s: usize| {
        switches[s]
            .leaves
            .iter()
            .map(|l| leaves[*l].len())
            .sum::<usize>()
    };
    // The lowest level holding a switch that fits; best fit among that level's.
    let mut best: Option<(u32, usize, usize)> = None; // (level, count, switch)
    for (s, switch) in switches.iter().enumerate() {
        if best.is_some_and(|(level, _, _)| switch.level > level) {
            break; // switches are ordered by level
        }
        let c = count(s);
        if c >= needed && best.is_none_or(|(_, bc, _)| c < bc) {
            best = Some((switch.level, c, s));
        }
    }
    let pool: Vec<usize> = match best {
        Some((_, _, s)) => switches[s].leaves.clone(),
        None => (0..switches.len())
            .filter(|l| switches[*l].level == 0)
            .collect(),
    };
    let mut picked = fill_from_leaves(view, &leaves, &pool, needed, max_leaves);
    if picked.len() < needed && max_leaves.is_some() {
        // Any N leaves anywhere will do for --switches; try the fullest ones.
        let all: Vec<usize> = (0..switches.len())
            .filter(|l| switches[*l].level == 0)
            .collect();
        picked = fill_from_leaves(view, &leaves, &all, needed, max_leaves);
        if picked.len() < needed {
            return Err(PlaceFailure::Topology);
        }
    }
    if picked.len() < needed {
        // Nodes outside the tree make up the rest.
        let missing = needed - picked.len();
        picked.extend(best_fit(view, outside, missing));
    }
    if picked.len() < needed {
        return Err(PlaceFailure::Resources);
    }
    Ok(picked)
}

/// Takes nodes leaf by leaf: a leaf that can finish the gang alone is chosen best
/// fit (the smallest such leaf); otherwise the fullest leaf is taken whole. This
/// spans few leaves and leaves large leaves intact for large gangs.
fn fill_from_leaves(
    view: &View<'_>,
    leaves: &[Vec<usize>],
    pool: &[usize],
    needed: usize,
    max_leaves: Option<usize>,
) -> Vec<usize> {
    let mut remaining: Vec<usize> = pool
        .iter()
        .copied()
        .filter(|l| !leaves[*l].is_empty())
        .collect();
    let mut picked = Vec::with_capacity(needed);
    let mut used = 0usize;
    while picked.len() < needed && !remaining.is_empty() && max_leaves.is_none_or(|m| used < m) {
        let left = needed - picked.len();
        let finishing = remaining
            .iter()
            .copied()
            .filter(|l| leaves[*l].len() >= left)
            .min_by_key(|l| (leaves[*l].len(), *l));
        let leaf = finishing.unwrap_or_else(|| {
            remaining
                .iter()
                .copied()
                .max_by_key(|l| (leaves[*l].len(), std::cmp::Reverse(*l)))
                .unwrap_or(remaining[0])
        });
        remaining.retain(|l| *l != leaf);
        picked.extend(best_fit(view, leaves[leaf].clone(), left));
        used += 1;
    }
    picked
}

fn in_blocks(view: &View<'_>, candidates: &[usize], needed: usize) -> Vec<usize> {
    let mut is_candidate = vec![false; view.nodes.len()];
    for &i in candidates {
        is_candidate[i] = true;
    }
    for groups in &view.layout.topology.block_groups {
        let fitting = groups
            .iter()
            .map(|g| {
                g.iter()
                    .copied()
                    .filter(|i| is_candidate[*i])
                    .collect::<Vec<usize>>()
            })
            .filter(|free| free.len() >= needed)
            .min_by_key(Vec::len);
        if let Some(free) = fitting {
            return best_fit(view, free, needed);
        }
    }
    best_fit(view, candidates.to_vec(), needed)
}

/// GPUs, CPUs and memory on each chosen node, batch host (lowest name) first.
fn allocations(view: &View<'_>, job: &Job, mut chosen: Vec<usize>) -> Vec<NodeAllocation> {
    let want = &job.resources;
    chosen.sort_unstable();
    chosen
        .into_iter()
        .map(|i| {
            let slot = &view.nodes[i];
            let whole = want.exclusive || want.whole_node_memory;
            NodeAllocation {
                node: slot.node.name.clone(),
                // An exclusive job gets every GPU of its nodes, as in Slurm.
                gpus: if want.exclusive {
                    slot.pick_gpus(None, MAX_GPUS_PER_NODE)
                } else {
                    slot.pick_gpus(want.gpu_type.as_deref(), want.gpus_per_node as usize)
                },
                cpus: if want.exclusive {
                    slot.free_cpus
                } else {
                    want.cpus_per_node
                },
                memory_mb: if whole {
                    slot.free_memory_mb
                } else {
                    want.memory_per_node_mb
                },
            }
        })
        .collect()
}
