//! Cluster-wide settings (`[priority]`, `[scheduling]`, `[limits]` and the
//! cluster name) into `ClusterConfig`, refusing what `SetConfig` would refuse.

use corral_state::config::{ClusterConfig, PriorityWeights};

use super::values::{Checked, Zero, duration_seconds, memory_mb, name, positive};
use crate::config::error::Refusal;
use crate::config::file::{LimitsSection, PrioritySection, SchedulingSection};

/// Builds the settings.
pub(crate) fn check(
    cluster_name: &str,
    priority: &PrioritySection,
    scheduling: &SchedulingSection,
    limits: &LimitsSection,
) -> Checked<ClusterConfig> {
    name("cluster_name", "cluster", cluster_name)?;
    let weights = PriorityWeights {
        age: priority.weight_age,
        fairshare: priority.weight_fairshare,
        job_size: priority.weight_job_size,
        partition: priority.weight_partition,
        qos: priority.weight_qos,
        max_age_seconds: duration_seconds("priority.max_age", &priority.max_age, Zero::Refused)?,
    };
    let batch_mb = memory_mb("limits.max_batch_size", &limits.max_batch_size)?;
    let max_batch_bytes = positive("limits.max_batch_size", batch_mb)?
        .checked_mul(1024 * 1024)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| Refusal::new("limits.max_batch_size", "too large"))?;
    Ok(ClusterConfig {
        cluster_name: cluster_name.to_string(),
        priority: weights,
        fairshare_half_life_seconds: duration_seconds(
            "priority.fairshare_half_life",
            &priority.fairshare_half_life,
            Zero::Refused,
        )?,
        max_requeue: scheduling.max_requeue,
        preempt_grace_seconds: duration_seconds(
            "scheduling.preempt_grace",
            &scheduling.preempt_grace,
            Zero::Allowed,
        )?,
        preempt_exempt_seconds: duration_seconds(
            "scheduling.preempt_exempt",
            &scheduling.preempt_exempt,
            Zero::Allowed,
        )?,
        backfill_reservations: scheduling.backfill_reservations,
        max_switch_wait_seconds: duration_seconds(
            "scheduling.max_switch_wait",
            &scheduling.max_switch_wait,
            Zero::Allowed,
        )?,
        max_active_jobs: count("limits.max_active_jobs", limits.max_active_jobs)?,
        max_array_tasks: count("limits.max_array_tasks", limits.max_array_tasks)?,
        max_batch_bytes,
        enforce_associations: limits.enforce_associations,
    })
}

/// A positive count that fits this machine's `usize`.
fn count(key: &str, value: u64) -> Checked<usize> {
    usize::try_from(positive(key, value)?).map_err(|_| Refusal::new(key, "too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_give_the_state_machines_defaults() {
        let config = check(
            "corral",
            &PrioritySection::default(),
            &SchedulingSection::default(),
            &LimitsSection::default(),
        )
        .unwrap();
        assert_eq!(config, ClusterConfig::default());
    }

    #[test]
    fn a_zero_half_life_is_refused() {
        let priority = PrioritySection {
            fairshare_half_life: "0".into(),
            ..PrioritySection::default()
        };
        let err = check(
            "c",
            &priority,
            &SchedulingSection::default(),
            &LimitsSection::default(),
        )
        .unwrap_err();
        assert_eq!(err.key, "priority.fairshare_half_life");
    }
}
