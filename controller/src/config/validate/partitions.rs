//! `[[partitions]]` into partitions: names unique, nodes and accounts defined,
//! time limits parsed (DefaultTime within MaxTime), exactly one default.

use std::collections::BTreeSet;

use corral_state::partition::{Partition, PreemptMode};
use corral_state::slurm::duration::TimeLimit;

use super::nodes::all_defined;
use super::values::{Checked, hostlist, name, time_limit};
use crate::config::error::Refusal;
use crate::config::file::{PartitionSection, PartitionStateName, PreemptModeName};

/// Slurm's default PriorityTier.
const DEFAULT_PRIORITY_TIER: u32 = 1;

/// Builds the partitions; when none is marked default, the first one is.
pub(crate) fn check(
    sections: &[PartitionSection],
    nodes: &BTreeSet<&str>,
    accounts: &BTreeSet<&str>,
) -> Checked<Vec<Partition>> {
    let mut names = BTreeSet::new();
    let mut default: Option<usize> = None;
    let mut partitions = Vec::with_capacity(sections.len());
    for (i, section) in sections.iter().enumerate() {
        let key = |field: &str| format!("partitions[{i}].{field}");
        name(&key("name"), "partition", &section.name)?;
        if !names.insert(section.name.as_str()) {
            return Err(Refusal::new(
                key("name"),
                format!("partition '{}' is defined twice", section.name),
            ));
        }
        let members = hostlist(&key("nodes"), &section.nodes)?;
        all_defined(&key("nodes"), &members, nodes)?;
        let max_time = match &section.max_time {
            Some(written) => time_limit(&key("max_time"), written)?,
            None => TimeLimit::Unlimited,
        };
        let default_time = match &section.default_time {
            Some(written) => Some(time_limit(&key("default_time"), written)?),
            None => None,
        };
        if default_time.is_some_and(|d| d > max_time) {
            return Err(Refusal::new(
                key("default_time"),
                "longer than max_time; a job's default limit must be allowed in its partition",
            ));
        }
        let allowed_accounts = match &section.allowed_accounts {
            Some(list) => Some(allowed(&key("allowed_accounts"), list, accounts)?),
            None => None,
        };
        if section.default {
            if let Some(first) = default {
                return Err(Refusal::new(
                    key("default"),
                    format!(
                        "partitions[{first}] is the default already; only one partition may be"
                    ),
                ));
            }
            default = Some(i);
        }
        partitions.push(Partition {
            name: section.name.clone(),
            hostlist: section.nodes.trim().to_string(),
            nodes: members.into_iter().collect(),
            max_time,
            default_time,
            priority_tier: section.priority_tier.unwrap_or(DEFAULT_PRIORITY_TIER),
            allowed_accounts,
            preempt_mode: section.preempt_mode.map_or(PreemptMode::Off, preempt_mode),
            is_default: section.default,
            up: section.state != Some(PartitionStateName::Down),
        });
    }
    if default.is_none()
        && let Some(first) = partitions.first_mut()
    {
        first.is_default = true;
    }
    Ok(partitions)
}

/// The allowed accounts: a non-empty list of defined accounts.
fn allowed(key: &str, list: &[String], accounts: &BTreeSet<&str>) -> Checked<BTreeSet<String>> {
    if list.is_empty() {
        return Err(Refusal::new(
            key,
            "lists no account, so nobody could submit; leave the key out to allow every account",
        ));
    }
    if let Some(unknown) = list.iter().find(|a| !accounts.contains(a.as_str())) {
        return Err(Refusal::new(
            key,
            format!("account '{unknown}' is not defined; define it under [[accounts]]"),
        ));
    }
    Ok(list.iter().cloned().collect())
}

/// The domain's preemption mode.
pub(crate) fn preempt_mode(written: PreemptModeName) -> PreemptMode {
    match written {
        PreemptModeName::Off => PreemptMode::Off,
        PreemptModeName::Requeue => PreemptMode::Requeue,
        PreemptModeName::Cancel => PreemptMode::Cancel,
    }
}
