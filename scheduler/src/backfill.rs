//! Backfill: blocked jobs at the head of the queue get a hold on the nodes where
//! they are expected to start (computed from running jobs' time limits); a later
//! job may use a held node only if its own time limit ends before the hold starts,
//! so it can never delay the held job.

use corral_state::job::{Job, JobState};
use corral_state::slurm::duration::TimeLimit;
use corral_state::{ClusterState, Timestamp};

use crate::place::{Constraints, place};
use crate::view::View;

/// Holds on nodes for blocked jobs: per node, the earliest hold start.
#[derive(Debug, Clone)]
pub struct Holds {
    earliest: Vec<Option<Timestamp>>,
}

impl Holds {
    /// No holds on `nodes` nodes.
    pub fn new(nodes: usize) -> Self {
        Holds {
            earliest: vec![None; nodes],
        }
    }

    /// True when a job starting `now` with `limit` may use `node` without
    /// delaying any hold on it.
    pub fn allows(&self, node: usize, now: Timestamp, limit: TimeLimit) -> bool {
        match (self.earliest[node], limit) {
            (None, _) => true,
            (Some(start), TimeLimit::Seconds(secs)) => now.plus_secs(secs) <= start,
            (Some(_), TimeLimit::Unlimited) => false,
        }
    }

    /// True when some blocked job holds `node`.
    pub fn is_held(&self, node: usize) -> bool {
        self.earliest[node].is_some()
    }

    /// Holds `nodes` from `start`.
    pub fn hold(&mut self, nodes: &[usize], start: Timestamp) {
        for &n in nodes {
            let slot = &mut self.earliest[n];
            *slot = Some(slot.map_or(start, |s| s.min(start)));
        }
    }
}

/// Resources that running attempts will give back, and when.
#[derive(Debug, Clone)]
pub struct Release {
    /// When: now for a completing attempt, start plus time limit for a running one.
    pub at: Timestamp,
    /// The node.
    pub node: usize,
    /// GPUs given back.
    pub gpus: Vec<u32>,
    /// CPUs given back.
    pub cpus: u32,
    /// Memory given back, MiB.
    pub memory_mb: u64,
    /// The attempt held the node exclusively.
    pub exclusive: bool,
}

/// The release timeline, sorted by time then node.
#[derive(Debug, Clone, Default)]
pub struct Releases {
    events: Vec<Release>,
}

impl Releases {
    /// Releases of every live attempt. Attempts without a time limit never release.
    pub fn from_state(state: &ClusterState, view: &View<'_>) -> Self {
        let mut releases = Releases::default();
        for job in state.active_jobs() {
            let Some(attempt) = job.live_attempt() else {
                continue;
            };
            let at = match (job.state, job.time_limit) {
                (JobState::Completing, _) => view.now(),
                (_, TimeLimit::Seconds(secs)) => attempt.started_at.plus_secs(secs).max(view.now()),
                (_, TimeLimit::Unlimited) => continue,
            };
            let held = |node: &str| {
                attempt
                    .ending
                    .as_ref()
                    .is_none_or(|e| e.unreleased.contains(node))
            };
            for part in attempt.allocation.iter().filter(|p| held(&p.node)) {
                let Some(node) = view.index(&part.node) else {
                    continue;
                };
                releases.events.push(Release {
                    at,
                    node,
                    gpus: part.gpus.clone(),
                    cpus: part.cpus,
                    memory_mb: part.memory_mb,
                    exclusive: job.resources.exclusive,
                });
            }
        }
        releases.sort();
        releases
    }

    /// Adds the releases of an allocation planned this pass.
    pub fn add_planned(
        &mut self,
        view: &View<'_>,
        job: &Job,
        nodes: &[corral_state::job::NodeAllocation],
    ) {
        let TimeLimit::Seconds(secs) = job.time_limit else {
            return;
        };
        for part in nodes {
            let Some(node) = view.index(&part.node) else {
                continue;
            };
            self.events.push(Release {
                at: view.now().plus_secs(secs),
                node,
                gpus: part.gpus.clone(),
                cpus: part.cpus,
                memory_mb: part.memory_mb,
                exclusive: job.resources.exclusive,
            });
        }
        self.sort();
    }

    fn sort(&mut self) {
        self.events.sort_by_key(|e| (e.at, e.node));
    }

    /// The releases, in time order.
    pub fn events(&self) -> &[Release] {
        &self.events
    }
}

/// The earliest time and nodes at which `job` could start if running jobs end at
/// their time limits, on nodes `allowed` (the caller excludes nodes held for
/// higher-priority jobs and reserved ones). `None` when it cannot start before
/// every known release (e.g. the cluster is full of jobs without time limits).
pub fn earliest_start(
    view: &View<'_>,
    releases: &Releases,
    job: &Job,
    allowed: &dyn Fn(usize) -> bool,
) -> Option<(Timestamp, Vec<usize>)> {
    let member = view.layout.partition_member.get(job.partition.as_str())?;
    let demand = job.resources.total_gpus();
    let counts = |i: usize| member[i] && allowed(i) && view.nodes[i].accepts_work;
    let mut free_gpus: u64 = (0..view.nodes.len())
        .filter(|i| counts(*i))
        .map(|i| u64::from(view.nodes[i].free_gpu_count()))
        .sum();
    let mut future = view.simulation();
    let constraints = Constraints {
        allowed,
        enforce_switches: false,
    };
    let events = releases.events();
    let mut next = 0;
    while next < events.len() {
        let at = events[next].at;
        while next < events.len() && events[next].at == at {
            let e = &events[next];
            // Nodes the job may not use need not be simulated at all.
            if counts(e.node) {
                future.give_back(e.node, &e.gpus, e.cpus, e.memory_mb, e.exclusive);
                free_gpus += e.gpus.len() as u64;
            }
            next += 1;
        }
        if free_gpus < demand {
            continue;
        }
        if let Ok(nodes) = place(&future, job, &constraints) {
            let indices = nodes.iter().filter_map(|n| view.index(&n.node)).collect();
            return Some((at, indices));
        }
    }
    None
}
