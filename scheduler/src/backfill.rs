//! Backfill: blocked jobs at the head of the queue get a hold on the nodes where
//! they are expected to start (computed from running jobs' time limits); a later
//! job may use a held node only if its own time limit ends before the hold starts,
//! so it can never delay the held job.

use corral_state::job::{Job, JobState, NodeAllocation};
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

/// The release timeline. Events are appended as the pass plans and sorted by
/// time (then node) only when read.
#[derive(Debug, Clone, Default)]
pub struct Releases {
    events: Vec<Release>,
    sorted: bool,
}

impl Releases {
    /// Releases of every live attempt: a completing one now, one being preempted
    /// at its grace deadline, others at their time limit. Attempts without a time
    /// limit (and not being preempted) never release.
    pub fn from_state(state: &ClusterState, view: &View<'_>) -> Self {
        let mut releases = Releases::default();
        for job in state.active_jobs() {
            let Some(attempt) = job.live_attempt() else {
                continue;
            };
            let by_limit = match job.time_limit {
                TimeLimit::Seconds(secs) => Some(attempt.started_at.plus_secs(secs)),
                TimeLimit::Unlimited => None,
            };
            let by_preemption = attempt.preemption.as_ref().map(|p| p.deadline);
            let at = match (job.state, by_limit, by_preemption) {
                (JobState::Completing, _, _) => view.now(),
                (_, Some(a), Some(b)) => a.min(b),
                (_, Some(a), None) | (_, None, Some(a)) => a,
                (_, None, None) => continue,
            };
            let held = |node: &str| {
                attempt
                    .ending
                    .as_ref()
                    .is_none_or(|e| e.unreleased.contains(node))
            };
            for part in attempt.allocation.iter().filter(|p| held(&p.node)) {
                releases.push(view, job, part, at.max(view.now()));
            }
        }
        releases
    }

    fn push(&mut self, view: &View<'_>, job: &Job, part: &NodeAllocation, at: Timestamp) {
        let Some(node) = view.index(&part.node) else {
            return;
        };
        self.events.push(Release {
            at,
            node,
            gpus: part.gpus.clone(),
            cpus: part.cpus,
            memory_mb: part.memory_mb,
            exclusive: job.resources.exclusive,
        });
        self.sorted = false;
    }

    /// Adds the releases of an allocation planned this pass (at its time limit).
    pub fn add_planned(&mut self, view: &View<'_>, job: &Job, nodes: &[NodeAllocation]) {
        let TimeLimit::Seconds(secs) = job.time_limit else {
            return;
        };
        for part in nodes {
            self.push(view, job, part, view.now().plus_secs(secs));
        }
    }

    /// The releases, in time order.
    pub fn events(&mut self) -> &[Release] {
        if !self.sorted {
            self.events.sort_by_key(|e| (e.at, e.node));
            self.sorted = true;
        }
        &self.events
    }
}

/// Where a blocked job may go at a given future start time.
pub struct Search<'a> {
    /// True when the job may use node `i` if it starts at the given time (holds,
    /// reservations over its run).
    pub allowed_at: &'a dyn Fn(usize, Timestamp) -> bool,
    /// Times worth trying besides releases (e.g. when reservations end).
    pub extra_times: &'a [Timestamp],
    /// Whether `--switches` binds.
    pub enforce_switches: bool,
}

/// The earliest time and nodes at which `job` could start if running jobs end at
/// their time limits (or preemption deadlines). `None` when it cannot start before
/// every known release (e.g. the cluster is full of jobs without time limits).
pub fn earliest_start(
    view: &View<'_>,
    releases: &mut Releases,
    job: &Job,
    search: &Search<'_>,
) -> Option<(Timestamp, Vec<usize>)> {
    let member = view.layout.partition_member.get(job.partition.as_str())?;
    let demand = job.resources.total_gpus();
    // A time-independent upper bound for the quick capacity check.
    let counts = |i: usize| member[i] && view.nodes[i].accepts_work;
    let mut free_gpus: u64 = (0..view.nodes.len())
        .filter(|i| counts(*i))
        .map(|i| u64::from(view.nodes[i].free_gpu_count()))
        .sum();
    let mut future = view.simulation();
    let events = releases.events();
    let mut extra: Vec<Timestamp> = search
        .extra_times
        .iter()
        .copied()
        .filter(|t| *t > view.now())
        .collect();
    extra.sort_unstable();
    let (mut next, mut next_extra) = (0, 0);
    loop {
        let at = match (events.get(next).map(|e| e.at), extra.get(next_extra)) {
            (Some(a), Some(b)) => a.min(*b),
            (Some(a), None) => a,
            (None, Some(b)) => *b,
            (None, None) => return None,
        };
        while next < events.len() && events[next].at == at {
            let e = &events[next];
            // Nodes the job may never use need not be simulated at all.
            if counts(e.node) {
                future.give_back(e.node, &e.gpus, e.cpus, e.memory_mb, e.exclusive);
                free_gpus += e.gpus.len() as u64;
            }
            next += 1;
        }
        while next_extra < extra.len() && extra[next_extra] == at {
            next_extra += 1;
        }
        if free_gpus < demand {
            continue;
        }
        let allowed = |i: usize| (search.allowed_at)(i, at);
        let constraints = Constraints {
            allowed: &allowed,
            enforce_switches: search.enforce_switches,
        };
        if let Ok(nodes) = place(&future, job, &constraints) {
            return Some((
                at,
                nodes.iter().filter_map(|n| view.index(&n.node)).collect(),
            ));
        }
    }
}
