//! Preemption: for a blocked job that outranks running ones, the victim set that
//! frees a fitting (topology-respecting) placement with the least lost work —
//! GPU-time since each victim's last committed checkpoint.

use std::collections::BTreeSet;

use corral_state::job::{Job, NodeAllocation};
use corral_state::{ClusterState, JobId, Timestamp, preemption};

use crate::place::{Constraints, place};
use crate::view::View;

/// Most placement searches one preemption attempt may run.
const MAX_PLACEMENT_TRIES: usize = 256;

/// A victim and what preempting it loses.
#[derive(Debug, Clone)]
struct Candidate<'s> {
    job: &'s Job,
    lost_gpu_ms: u64,
}

/// Victims to preempt and where the preemptor will then run.
#[derive(Debug, Clone)]
pub struct Choice {
    /// Victims, cheapest first.
    pub victims: Vec<JobId>,
    /// Node indices the preemptor is expected to use once they are gone.
    pub nodes: Vec<usize>,
}

/// GPU-milliseconds of work since the victim's last checkpoint in this attempt.
pub fn lost_work_ms(victim: &Job, now: Timestamp) -> u64 {
    let Some(attempt) = victim.live_attempt() else {
        return 0;
    };
    let since = attempt
        .checkpoint
        .as_ref()
        .map_or(attempt.started_at, |c| c.at.max(attempt.started_at));
    attempt.gpu_count().saturating_mul(now.ms_since(since))
}

/// Finds victims for `job`, skipping jobs in `taken` (already chosen this pass).
/// Only nodes `allowed` count (reservations, holds for higher-priority jobs).
///
/// Two greedy searches run and the cheaper result wins: victims in order of
/// least lost work, and nodes in order of the cheapest victims that free each
/// one. Both end by dropping victims the placement does not need.
pub fn find(
    state: &ClusterState,
    view: &View<'_>,
    job: &Job,
    taken: &BTreeSet<JobId>,
    allowed: &dyn Fn(usize) -> bool,
    enforce_switches: bool,
) -> Option<Choice> {
    let now = view.now();
    let member = view.layout.partition_member.get(job.partition.as_str())?;
    let mut candidates: Vec<Candidate<'_>> = state
        .active_jobs()
        .filter(|v| !taken.contains(&v.id) && preemption::may_preempt(state, job, v, now))
        .filter(|v| {
            v.live_attempt().is_some_and(|a| {
                a.allocation
                    .iter()
                    .any(|p| view.index(&p.node).is_some_and(|i| member[i]))
            })
        })
        .map(|v| Candidate {
            job: v,
            lost_gpu_ms: lost_work_ms(v, now),
        })
        .collect();
    if candidates.is_empty() {
        return None;
    }
    candidates.sort_by_key(|c| (c.lost_gpu_ms, c.job.id));
    let search = Search {
        view,
        job,
        counts: &|i: usize| member[i] && allowed(i) && view.nodes[i].accepts_work,
        constraints: Constraints {
            allowed,
            enforce_switches,
        },
        tries: std::cell::Cell::new(0),
    };
    // Attempts already ending give their resources back within the kill
    // wait: a job that fits once they have needs no victim, only patience.
    if search.fits_once_endings_release(state) {
        return None;
    }
    let orders = [search.by_victim(&candidates), search.by_node(&candidates)];
    let best = orders
        .into_iter()
        .flatten()
        .map(|victims| search.finish(victims))
        .min_by_key(|choice| (choice.0, choice.1.victims.clone()))?;
    Some(best.1)
}

/// One preemption search: the job, where it may go, and a bound on the
/// placement attempts it may spend.
struct Search<'a, 'v> {
    view: &'a View<'v>,
    job: &'a Job,
    counts: &'a dyn Fn(usize) -> bool,
    constraints: Constraints<'a>,
    tries: std::cell::Cell<usize>,
}

impl<'a, 'v> Search<'a, 'v> {
    /// Places the job with `victims`' resources given back, within the budget.
    fn place_without(&self, victims: &[&Job]) -> Option<Vec<NodeAllocation>> {
        if self.tries.get() >= MAX_PLACEMENT_TRIES {
            return None;
        }
        self.tries.set(self.tries.get() + 1);
        let mut future = self.view.simulation();
        for victim in victims {
            let Some(attempt) = victim.live_attempt() else {
                continue;
            };
            for part in &attempt.allocation {
                if let Some(node) = self.view.index(&part.node).filter(|n| (self.counts)(*n)) {
                    future.give_back(
                        node,
                        &part.gpus,
                        part.cpus,
                        part.memory_mb,
                        victim.resources.exclusive,
                    );
                }
            }
        }
        place(&future, self.job, &self.constraints).ok()
    }

    /// Whether the job places once every attempt that is already ending (its
    /// script exited, it was cancelled, its grace ran out) has released the
    /// nodes it still holds.
    fn fits_once_endings_release(&self, state: &ClusterState) -> bool {
        let mut future = self.view.simulation();
        let mut any = false;
        for job in state.active_jobs() {
            let Some(attempt) = job.live_attempt() else {
                continue;
            };
            let Some(ending) = &attempt.ending else {
                continue;
            };
            for part in attempt
                .allocation
                .iter()
                .filter(|p| ending.unreleased.contains(&p.node))
            {
                if let Some(node) = self.view.index(&part.node).filter(|n| (self.counts)(*n)) {
                    any = true;
                    future.give_back(
                        node,
                        &part.gpus,
                        part.cpus,
                        part.memory_mb,
                        job.resources.exclusive,
                    );
                }
            }
        }
        any && place(&future, self.job, &self.constraints).is_ok()
    }

    /// Victims cheapest first until the job fits.
    fn by_victim<'c>(&self, candidates: &'c [Candidate<'c>]) -> Option<Vec<&'c Candidate<'c>>> {
        let demand = self.job.resources.total_gpus();
        let mut free: u64 = (0..self.view.nodes.len())
            .filter(|i| (self.counts)(*i))
            .map(|i| u64::from(self.view.nodes[i].free_gpu_count()))
            .sum();
        let mut chosen: Vec<&Candidate<'_>> = Vec::new();
        for candidate in candidates {
            chosen.push(candidate);
            free += self.freed_gpus(candidate.job);
            if free < demand {
                continue;
            }
            match self.fits(&chosen) {
                Some(true) => return Some(chosen),
                Some(false) => {}
                None => return None,
            }
        }
        None
    }

    /// Whether the job places with `chosen` preempted; `None` once the search has
    /// spent its placement budget.
    fn fits(&self, chosen: &[&Candidate<'_>]) -> Option<bool> {
        let jobs: Vec<&Job> = chosen.iter().map(|c| c.job).collect();
        if self.place_without(&jobs).is_some() {
            return Some(true);
        }
        (self.tries.get() < MAX_PLACEMENT_TRIES).then_some(false)
    }

    /// Nodes in order of what freeing them costs (the cheapest victims on the
    /// node that free enough GPUs for one node's share), until the job fits.
    fn by_node<'c>(&self, candidates: &'c [Candidate<'c>]) -> Option<Vec<&'c Candidate<'c>>> {
        let want = self.job.resources.gpus_per_node;
        let gpu_type = self.job.resources.gpu_type.as_deref();
        let mut on_node: std::collections::BTreeMap<usize, Vec<&Candidate<'_>>> =
            std::collections::BTreeMap::new();
        for candidate in candidates {
            for part in candidate
                .job
                .live_attempt()
                .map(|a| a.allocation.as_slice())
                .unwrap_or(&[])
            {
                if let Some(node) = self.view.index(&part.node).filter(|n| (self.counts)(*n)) {
                    on_node.entry(node).or_default().push(candidate);
                }
            }
        }
        let mut priced: Vec<(u64, usize, Vec<&Candidate<'_>>)> = Vec::new();
        for (&node, victims) in &on_node {
            let mut free = self.view.nodes[node].free_mask_of(gpu_type).count_ones();
            let mut cost = 0u64;
            let mut needed = Vec::new();
            for victim in victims {
                if free >= want {
                    break;
                }
                free += self.gpus_on(victim.job, node);
                cost = cost.saturating_add(victim.lost_gpu_ms);
                needed.push(*victim);
            }
            if free >= want && !needed.is_empty() {
                priced.push((cost, node, needed));
            }
        }
        priced.sort_by_key(|(cost, node, _)| (*cost, *node));
        let mut chosen: Vec<&Candidate<'_>> = Vec::new();
        for (_, _, needed) in priced {
            for victim in needed {
                if !chosen.iter().any(|c| c.job.id == victim.job.id) {
                    chosen.push(victim);
                }
            }
            match self.fits(&chosen) {
                Some(true) => return Some(chosen),
                Some(false) => {}
                None => return None,
            }
        }
        None
    }

    /// GPUs a victim frees on allowed nodes.
    fn freed_gpus(&self, victim: &Job) -> u64 {
        let parts = victim
            .live_attempt()
            .map(|a| a.allocation.as_slice())
            .unwrap_or(&[]);
        parts
            .iter()
            .filter(|p| self.view.index(&p.node).is_some_and(|n| (self.counts)(n)))
            .map(|p| p.gpus.len() as u64)
            .sum()
    }

    /// GPUs of the job's type a victim frees on one node.
    fn gpus_on(&self, victim: &Job, node: usize) -> u32 {
        let name = self.view.name(node);
        let slot = &self.view.nodes[node];
        let of_type = |g: &u32| {
            self.job.resources.gpu_type.as_deref().is_none_or(|t| {
                slot.node
                    .gpus
                    .get(*g as usize)
                    .is_some_and(|gpu| gpu.gpu_type == t)
            })
        };
        let parts = victim
            .live_attempt()
            .map(|a| a.allocation.as_slice())
            .unwrap_or(&[]);
        parts
            .iter()
            .filter(|p| p.node == name)
            .map(|p| p.gpus.iter().filter(|g| of_type(g)).count() as u32)
            .sum()
    }

    /// Drops victims the job does not need, most expensive first, and returns the
    /// total lost work with the choice.
    fn finish(&self, mut victims: Vec<&Candidate<'_>>) -> (u64, Choice) {
        victims.sort_by_key(|c| std::cmp::Reverse((c.lost_gpu_ms, c.job.id)));
        let all: Vec<&Job> = victims.iter().map(|c| c.job).collect();
        let mut placement = self.place_without(&all).unwrap_or_default();
        let mut i = 0;
        while i < victims.len() {
            let without: Vec<&Job> = victims
                .iter()
                .enumerate()
                .filter(|(k, _)| *k != i)
                .map(|(_, c)| c.job)
                .collect();
            match self.place_without(&without) {
                Some(p) => {
                    victims.remove(i);
                    placement = p;
                }
                None => i += 1,
            }
        }
        let nodes: BTreeSet<&str> = placement.iter().map(|p| p.node.as_str()).collect();
        // Victims not on the placement's nodes free nothing it uses.
        victims.retain(|c| touches(c.job, &nodes));
        victims.sort_by_key(|c| (c.lost_gpu_ms, c.job.id));
        let cost = victims
            .iter()
            .map(|c| c.lost_gpu_ms)
            .fold(0u64, u64::saturating_add);
        let choice = Choice {
            victims: victims.iter().map(|c| c.job.id).collect(),
            nodes: nodes.iter().filter_map(|n| self.view.index(n)).collect(),
        };
        (cost, choice)
    }
}

/// True when the victim's live attempt holds any of `nodes`.
fn touches(victim: &Job, nodes: &BTreeSet<&str>) -> bool {
    victim
        .live_attempt()
        .is_some_and(|a| a.allocation.iter().any(|p| nodes.contains(p.node.as_str())))
}
