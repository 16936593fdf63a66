//! Quality of service: a priority boost, who it may preempt, and group limits.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::partition::PreemptMode;

/// A QOS, as in Slurm's `sacctmgr add qos`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Qos {
    /// Name, e.g. `high`.
    pub name: String,
    /// Priority factor input; normalised against the largest QOS priority.
    pub priority: u32,
    /// QOS whose jobs this one may preempt.
    pub preempts: BTreeSet<String>,
    /// Overrides the partition's preemption mode for victims of this QOS.
    pub preempt_mode: Option<PreemptMode>,
    /// Most GPUs all running jobs of one account in this QOS may hold (GrpTRES=gres/gpu).
    pub grp_gpus_per_account: Option<u32>,
    /// Most GPU-minutes one account may have used in this QOS (GrpTRESMins), decayed.
    pub grp_gpu_minutes_per_account: Option<u64>,
    /// Longest time limit a job in this QOS may have, seconds (MaxWall).
    pub max_wall_seconds: Option<u64>,
    /// Most GPUs one user's running jobs in this QOS may hold (MaxTRESPerUser).
    pub max_gpus_per_user: Option<u32>,
    /// Most running jobs per user in this QOS (MaxJobsPerUser).
    pub max_jobs_per_user: Option<u32>,
}
