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
pub fn find(
    state: &ClusterState,
    view: &View<'_>,
    job: &Job,
    taken: &BTreeSet<JobId>,
    allowed: &dyn Fn(usize) -> bool,
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

    let demand = job.resources.total_gpus();
    let counts = |i: usize| member[i] && allowed(i) && view.nodes[i].accepts_work;
    let mut free: u64 = (0..view.nodes.len())
        .filter(|i| counts(*i))
        .map(|i| u64::from(view.nodes[i].free_gpu_count()))
        .sum();
    let mut future = view.simulation();
    let constraints = Constraints {
        allowed,
        enforce_switches: true,
    };
    let mut tries = 0;
    for (used, candidate) in candidates.iter().enumerate() {
        let Some(attempt) = candidate.job.live_attempt() else {
            continue;
        };
        for part in &attempt.allocation {
            let Some(node) = view.index(&part.node) else {
                continue;
            };
            if counts(node) {
                future.give_back(
                    node,
                    &part.gpus,
                    part.cpus,
                    part.memory_mb,
                    candidate.job.resources.exclusive,
                );
                free += part.gpus.len() as u64;
            }
        }
        if free < demand {
            continue;
        }
        tries += 1;
        if tries > MAX_PLACEMENT_TRIES {
            return None;
        }
        if let Ok(placed) = place(&future, job, &constraints) {
            let mut victims: Vec<&Candidate<'_>> = candidates[..=used].iter().collect();
            let placement = prune(
                view,
                job,
                &constraints,
                &counts,
                &mut victims,
                placed,
                &mut tries,
            );
            let nodes: BTreeSet<&str> = placement.iter().map(|p| p.node.as_str()).collect();
            // Victims not on the placement's nodes free nothing it uses.
            victims.retain(|c| touches(c.job, &nodes));
            victims.sort_by_key(|c| (c.lost_gpu_ms, c.job.id));
            return Some(Choice {
                victims: victims.iter().map(|c| c.job.id).collect(),
                nodes: nodes.iter().filter_map(|n| view.index(n)).collect(),
            });
        }
    }
    None
}

/// True when the victim's live attempt holds any of `nodes`.
fn touches(victim: &Job, nodes: &BTreeSet<&str>) -> bool {
    victim
        .live_attempt()
        .is_some_and(|a| a.allocation.iter().any(|p| nodes.contains(p.node.as_str())))
}

/// Drops victims that are not needed, most expensive first: each is left out if
/// the job still places without it. Returns the final placement.
fn prune(
    view: &View<'_>,
    job: &Job,
    constraints: &Constraints<'_>,
    counts: &dyn Fn(usize) -> bool,
    victims: &mut Vec<&Candidate<'_>>,
    mut placement: Vec<NodeAllocation>,
    tries: &mut usize,
) -> Vec<NodeAllocation> {
    victims.sort_by_key(|c| std::cmp::Reverse((c.lost_gpu_ms, c.job.id)));
    let mut i = 0;
    while i < victims.len() && *tries < MAX_PLACEMENT_TRIES {
        *tries += 1;
        let without: Vec<&Job> = victims
            .iter()
            .enumerate()
            .filter(|(k, _)| *k != i)
            .map(|(_, c)| c.job)
            .collect();
        match place_with(view, job, constraints, counts, &without) {
            Some(p) => {
                victims.remove(i);
                placement = p;
            }
            None => i += 1,
        }
    }
    placement
}

/// Places `job` on the view with `victims`' resources given back.
fn place_with(
    view: &View<'_>,
    job: &Job,
    constraints: &Constraints<'_>,
    counts: &dyn Fn(usize) -> bool,
    victims: &[&Job],
) -> Option<Vec<NodeAllocation>> {
    let mut future = view.simulation();
    for victim in victims {
        let Some(attempt) = victim.live_attempt() else {
            continue;
        };
        for part in &attempt.allocation {
            if let Some(node) = view.index(&part.node).filter(|n| counts(*n)) {
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
    place(&future, job, constraints).ok()
}
