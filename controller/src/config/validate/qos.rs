//! `[[qos]]` into QOS: names unique, `preempts` naming defined QOS without
//! cycles, MaxWall parsed; ordered so each QOS follows those it preempts, as
//! `SetQos` requires.

use std::collections::BTreeMap;

use corral_state::qos::Qos;
use corral_state::slurm::duration::TimeLimit;

use super::order::dependency_order;
use super::partitions::preempt_mode;
use super::values::{Checked, name, time_limit};
use crate::config::error::Refusal;
use crate::config::file::QosSection;

/// Builds the QOS, preempted ones first.
pub(crate) fn check(sections: &[QosSection]) -> Checked<Vec<Qos>> {
    let mut index_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, section) in sections.iter().enumerate() {
        let key = format!("qos[{i}].name");
        name(&key, "QOS", &section.name)?;
        if let Some(first) = index_of.insert(&section.name, i) {
            return Err(Refusal::new(
                key,
                format!(
                    "QOS '{}' is defined twice (also qos[{first}])",
                    section.name
                ),
            ));
        }
    }
    let mut deps = Vec::with_capacity(sections.len());
    let mut built = Vec::with_capacity(sections.len());
    for (i, section) in sections.iter().enumerate() {
        let key = |field: &str| format!("qos[{i}].{field}");
        let mut needs = Vec::new();
        for victim in &section.preempts {
            match index_of.get(victim.as_str()) {
                Some(&j) if j == i => {
                    return Err(Refusal::new(
                        key("preempts"),
                        format!("QOS '{victim}' cannot preempt itself"),
                    ));
                }
                Some(&j) => needs.push(j),
                None => {
                    return Err(Refusal::new(
                        key("preempts"),
                        format!("QOS '{victim}' is not defined; define it under [[qos]]"),
                    ));
                }
            }
        }
        deps.push(needs);
        let max_wall_seconds = match &section.max_wall {
            Some(written) => match time_limit(&key("max_wall"), written)? {
                TimeLimit::Seconds(s) => Some(s),
                TimeLimit::Unlimited => None,
            },
            None => None,
        };
        built.push(Qos {
            name: section.name.clone(),
            priority: section.priority,
            preempts: section.preempts.iter().cloned().collect(),
            preempt_mode: section.preempt_mode.map(preempt_mode),
            grp_gpus_per_account: section.grp_gpus_per_account,
            grp_gpu_minutes_per_account: section.grp_gpu_minutes_per_account,
            max_wall_seconds,
            max_gpus_per_user: section.max_gpus_per_user,
            max_jobs_per_user: section.max_jobs_per_user,
        });
    }
    let order = dependency_order(&deps).map_err(|i| {
        Refusal::new(
            format!("qos[{i}].preempts"),
            format!(
                "QOS '{}' is part of a preemption cycle; QOS may not preempt each other both ways",
                sections[i].name
            ),
        )
    })?;
    let mut slots: Vec<Option<Qos>> = built.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
}
