//! Cluster-wide settings replicated through Raft: priority weights, fair-share
//! half-life, requeue and preemption policy, and the limits that bound the state.

use serde::{Deserialize, Serialize};

/// Weights of Slurm's multifactor priority; each factor is normalised to [0, 1].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityWeights {
    /// Weight of queue age.
    pub age: u32,
    /// Weight of the fair-share factor.
    pub fairshare: u32,
    /// Weight of job size.
    pub job_size: u32,
    /// Weight of the partition tier.
    pub partition: u32,
    /// Weight of the QOS priority.
    pub qos: u32,
    /// Age at which the age factor reaches 1, seconds (Slurm's PriorityMaxAge).
    pub max_age_seconds: u64,
}

impl Default for PriorityWeights {
    fn default() -> Self {
        PriorityWeights {
            age: 1_000,
            fairshare: 10_000,
            // Slurm's default too: favouring size lets large jobs overtake older
            // ones, a choice a site should make deliberately.
            job_size: 0,
            partition: 10_000,
            qos: 10_000,
            max_age_seconds: 7 * 24 * 3600,
        }
    }
}

/// Cluster-wide settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterConfig {
    /// `SLURM_CLUSTER_NAME`.
    pub cluster_name: String,
    /// Priority weights.
    pub priority: PriorityWeights,
    /// Half-life of fair-share usage decay, seconds (Slurm's PriorityDecayHalfLife).
    pub fairshare_half_life_seconds: u64,
    /// A job requeued more often than this goes to REQUEUE_HOLD (MaxBatchRequeue).
    pub max_requeue: u32,
    /// Grace between the preemption signal and the kill, seconds.
    pub preempt_grace_seconds: u64,
    /// An attempt younger than this is not preempted, seconds (Slurm's
    /// PreemptExemptTime); a requeued job's new attempt is exempt again, so this
    /// also keeps a job from being preempted over and over.
    pub preempt_exempt_seconds: u64,
    /// How many blocked jobs, in priority order, get a backfill reservation each
    /// pass; lower-priority jobs may start only where they cannot delay those.
    pub backfill_reservations: u32,
    /// Longest a job may wait for a placement within its `--switches` count,
    /// seconds; also the wait when the job names none (Slurm's max_switch_wait).
    pub max_switch_wait_seconds: u64,
    /// Most jobs in the system that are not finished (MaxJobCount).
    pub max_active_jobs: usize,
    /// Most tasks in one job array (MaxArraySize).
    pub max_array_tasks: usize,
    /// Largest batch accepted: script, arguments and environment together, bytes.
    pub max_batch_bytes: usize,
    /// When true, a user must be listed in an account to charge it (Slurm's
    /// AccountingStorageEnforce=associations). When false, unknown users may submit
    /// and charge `root` (useful for a demo).
    pub enforce_associations: bool,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            cluster_name: "corral".into(),
            priority: PriorityWeights::default(),
            fairshare_half_life_seconds: 7 * 24 * 3600,
            max_requeue: 5,
            preempt_grace_seconds: 120,
            preempt_exempt_seconds: 300,
            max_active_jobs: 1_000_000,
            max_array_tasks: 10_001,
            max_batch_bytes: 4 * 1024 * 1024,
            enforce_associations: true,
            backfill_reservations: 16,
            max_switch_wait_seconds: 300,
        }
    }
}
