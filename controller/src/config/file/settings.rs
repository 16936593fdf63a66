//! The cluster-wide settings of `corral.toml` as written (`[priority]`,
//! `[scheduling]`, `[limits]`): they become `corral_state::config::ClusterConfig`.
//! Durations are Slurm time specs (`D-HH:MM:SS`, `HH:MM:SS`, `MM:SS`, `MM`);
//! every default is `ClusterConfig::default()`'s.

use corral_state::config::ClusterConfig;
use corral_state::slurm::duration::{TimeLimit, format_time_limit};
use corral_state::slurm::memory::format_memory_mb;
use serde::{Deserialize, Serialize};

/// Prints seconds as a Slurm time spec (`00:00:00` for zero).
fn format_seconds(seconds: u64) -> String {
    format_time_limit(TimeLimit::Seconds(seconds))
}

/// Multifactor priority (`[priority]`), as Slurm's `PriorityWeight*` settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrioritySection {
    /// Weight of queue age (PriorityWeightAge).
    pub weight_age: u32,
    /// Weight of fair-share (PriorityWeightFairshare).
    pub weight_fairshare: u32,
    /// Weight of job size (PriorityWeightJobSize).
    pub weight_job_size: u32,
    /// Weight of the partition's priority tier (PriorityWeightPartition).
    pub weight_partition: u32,
    /// Weight of the QOS priority (PriorityWeightQOS).
    pub weight_qos: u32,
    /// Queue age at which the age factor reaches 1 (PriorityMaxAge).
    pub max_age: String,
    /// Half-life of fair-share usage decay (PriorityDecayHalfLife).
    pub fairshare_half_life: String,
}

impl Default for PrioritySection {
    fn default() -> Self {
        let config = ClusterConfig::default();
        let weights = config.priority;
        PrioritySection {
            weight_age: weights.age,
            weight_fairshare: weights.fairshare,
            weight_job_size: weights.job_size,
            weight_partition: weights.partition,
            weight_qos: weights.qos,
            max_age: format_seconds(weights.max_age_seconds),
            fairshare_half_life: format_seconds(config.fairshare_half_life_seconds),
        }
    }
}

/// Scheduling policy (`[scheduling]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulingSection {
    /// Blocked jobs, in priority order, that get a backfill reservation each pass.
    pub backfill_reservations: u32,
    /// Longest a job waits for a placement within its `--switches` count
    /// (max_switch_wait).
    pub max_switch_wait: String,
    /// Grace between the preemption signal and the kill.
    pub preempt_grace: String,
    /// An attempt younger than this is not preempted (PreemptExemptTime).
    pub preempt_exempt: String,
    /// A job requeued more often than this is held (MaxBatchRequeue).
    pub max_requeue: u32,
}

impl Default for SchedulingSection {
    fn default() -> Self {
        let config = ClusterConfig::default();
        SchedulingSection {
            backfill_reservations: config.backfill_reservations,
            max_switch_wait: format_seconds(config.max_switch_wait_seconds),
            preempt_grace: format_seconds(config.preempt_grace_seconds),
            preempt_exempt: format_seconds(config.preempt_exempt_seconds),
            max_requeue: config.max_requeue,
        }
    }
}

/// Bounds on the state and on who may submit (`[limits]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsSection {
    /// Most unfinished jobs (MaxJobCount).
    pub max_active_jobs: u64,
    /// Most tasks in one job array (MaxArraySize).
    pub max_array_tasks: u64,
    /// Largest batch (script, arguments and environment), a memory size such as `4M`.
    pub max_batch_size: String,
    /// When true a user must be listed in an account to charge it
    /// (AccountingStorageEnforce=associations); when false unknown users may
    /// submit and charge `root`.
    pub enforce_associations: bool,
}

impl Default for LimitsSection {
    fn default() -> Self {
        let config = ClusterConfig::default();
        LimitsSection {
            max_active_jobs: config.max_active_jobs as u64,
            max_array_tasks: config.max_array_tasks as u64,
            max_batch_size: format_memory_mb((config.max_batch_bytes / (1024 * 1024)) as u64),
            enforce_associations: config.enforce_associations,
        }
    }
}
