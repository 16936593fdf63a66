//! Slurm's multifactor priority: a weighted sum of age, fair-share, job size,
//! partition tier and QOS factors, each normalised to [0, 1], minus nice.

use corral_state::job::Job;
use corral_state::{ClusterState, Timestamp};

use crate::fairshare::FairShare;

/// The normalised factors of one job.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Factors {
    /// Time eligible over the maximum age.
    pub age: f64,
    /// The account's fair-share factor.
    pub fairshare: f64,
    /// The job's GPUs over the cluster's (nodes over nodes for CPU-only jobs).
    pub job_size: f64,
    /// The partition's tier over the highest tier.
    pub partition: f64,
    /// The QOS priority over the highest QOS priority.
    pub qos: f64,
}

/// What priorities are normalised against, computed once per pass.
#[derive(Debug, Clone)]
pub struct PriorityContext {
    fairshare: FairShare,
    total_gpus: u64,
    total_nodes: u64,
    max_tier: u32,
    max_qos_priority: u32,
}

impl PriorityContext {
    /// Computes the normalisers and fair-share factors.
    pub fn new(state: &ClusterState) -> Self {
        PriorityContext {
            fairshare: FairShare::compute(state),
            total_gpus: state.nodes().values().map(|n| n.gpus.len() as u64).sum(),
            total_nodes: state.nodes().len() as u64,
            max_tier: state
                .partitions()
                .values()
                .map(|p| p.priority_tier)
                .max()
                .unwrap_or(0),
            max_qos_priority: state.qos().values().map(|q| q.priority).max().unwrap_or(0),
        }
    }

    /// The fair-share factors this context uses.
    pub fn fairshare(&self) -> &FairShare {
        &self.fairshare
    }

    /// The job's factors at `now`.
    pub fn factors(&self, state: &ClusterState, job: &Job, now: Timestamp) -> Factors {
        let weights = &state.config().priority;
        let ratio = |num: f64, den: f64| {
            if den > 0.0 {
                (num / den).clamp(0.0, 1.0)
            } else {
                0.0
            }
        };
        let waited = now.secs_since(eligible_since(job, now)) as f64;
        let job_size = if job.resources.gpus_per_node > 0 {
            ratio(job.resources.total_gpus() as f64, self.total_gpus as f64)
        } else {
            ratio(f64::from(job.resources.nodes), self.total_nodes as f64)
        };
        let tier = state
            .partitions()
            .get(&job.partition)
            .map_or(0, |p| p.priority_tier);
        let qos = job
            .qos
            .as_ref()
            .and_then(|q| state.qos().get(q))
            .map_or(0, |q| q.priority);
        Factors {
            age: ratio(waited, weights.max_age_seconds as f64),
            fairshare: self.fairshare.factor(&job.account),
            job_size,
            partition: ratio(f64::from(tier), f64::from(self.max_tier)),
            qos: ratio(f64::from(qos), f64::from(self.max_qos_priority)),
        }
    }

    /// The job's priority at `now`: the weighted sum of its factors minus nice.
    pub fn priority(&self, state: &ClusterState, job: &Job, now: Timestamp) -> i64 {
        let f = self.factors(state, job, now);
        let w = &state.config().priority;
        let sum = f64::from(w.age) * f.age
            + f64::from(w.fairshare) * f.fairshare
            + f64::from(w.job_size) * f.job_size
            + f64::from(w.partition) * f.partition
            + f64::from(w.qos) * f.qos;
        sum.round() as i64 - i64::from(job.spec.nice)
    }
}

/// When the job became eligible to run: its recorded time, or `now` when the
/// state still shows it waiting on a dependency (the plan that sees it satisfied
/// records the change, and the state machine then restarts its clock).
pub fn eligible_since(job: &Job, now: Timestamp) -> Timestamp {
    use corral_state::job::PendingReason::{BeginTime, Dependency, DependencyNeverSatisfied};
    if matches!(
        job.reason,
        Dependency | DependencyNeverSatisfied | BeginTime
    ) {
        now
    } else {
        job.eligible_time()
    }
}
