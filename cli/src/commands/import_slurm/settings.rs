//! slurm.conf's settings (the lines that are not NodeName, PartitionName...
//! records) into corral.toml's cluster name, `[priority]`, `[scheduling]`,
//! `[limits]` and `[leader]`. Where slurm.conf leaves a key out and Slurm's
//! default would run jobs differently from corral's, Slurm's is written:
//! priority weights (0), KillWait (30 s), PreemptExemptTime (0) and no
//! association enforcement.

use corral_controller::config::{LeaderSection, LimitsSection, PrioritySection, SchedulingSection};
use corral_state::slurm::duration::{TimeLimit, format_time_limit};

use super::location::ImportError;
use super::notes::{Kind, Notes};
use super::origins::Origins;
use super::parse::Pair;
use super::preemption::Preemption;
use super::reasons;
use super::values::{duration_seconds, is_valid_name, list, number, number_u32};

/// Slurm's KillWait default, seconds.
const SLURM_KILL_WAIT_SECONDS: u64 = 30;

/// corral's longest kill wait, seconds.
const MAX_KILL_WAIT_SECONDS: u64 = 3600;

/// What the settings give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// ClusterName, lower case.
    pub cluster_name: String,
    /// `[priority]`.
    pub priority: PrioritySection,
    /// `[scheduling]` (preempt_grace is the partitions' to set).
    pub scheduling: SchedulingSection,
    /// `[limits]`.
    pub limits: LimitsSection,
    /// `[leader]`.
    pub leader: LeaderSection,
    /// PreemptType and PreemptMode.
    pub preemption: Preemption,
    /// TopologyPlugin, where set.
    pub topology_plugin: Option<Pair>,
}

/// Reads the settings; every key not carried is noted with its reason.
pub fn read(
    settings: &[Pair],
    notes: &mut Notes,
    origins: &mut Origins,
) -> Result<Settings, ImportError> {
    let last = |key: &str| settings.iter().rev().find(|p| p.is(key));
    let cluster_name = cluster_name(last("ClusterName"), notes, origins)?;
    let priority = priority(settings, notes, origins)?;
    let preemption = Preemption::read(last("PreemptType"), last("PreemptMode"), notes)?;
    let mut scheduling = SchedulingSection::default();
    let mut limits = LimitsSection {
        enforce_associations: false,
        ..LimitsSection::default()
    };
    origins.set(
        "limits.enforce_associations",
        "Slurm's default: no AccountingStorageEnforce",
    );
    let mut leader = LeaderSection {
        kill_wait: format_seconds(SLURM_KILL_WAIT_SECONDS),
        ..LeaderSection::default()
    };
    origins.set("leader.kill_wait", "Slurm's default KillWait=30");
    scheduling.preempt_exempt = format_seconds(0);
    origins.set(
        "scheduling.preempt_exempt",
        "Slurm's default PreemptExemptTime=0",
    );
    let mut topology_plugin = None;
    for (i, pair) in settings.iter().enumerate() {
        if settings[i + 1..].iter().any(|later| later.is(&pair.key)) && !pair.is("SlurmctldHost") {
            continue; // a later line sets it again, and wins
        }
        let key = pair.key.to_ascii_lowercase();
        match key.as_str() {
            "clustername" | "prioritytype" | "preempttype" | "preemptmode" => {}
            k if k.starts_with("priorityweight") && is_carried_weight(k) => {}
            "prioritymaxage" | "prioritydecayhalflife" | "priorityfavorsmall" => {}
            "killwait" => {
                let seconds = number(pair)?;
                let kept = seconds.min(MAX_KILL_WAIT_SECONDS);
                if kept < seconds {
                    notes.changed(
                        "",
                        pair,
                        "corral waits at most one hour between SIGTERM and SIGKILL; written as 01:00:00",
                    );
                }
                leader.kill_wait = format_seconds(kept);
                origins.came_from("leader.kill_wait", pair);
            }
            "mailprog" if pair.value.trim().starts_with('/') => {
                leader.mail_program = Some(pair.value.trim().to_string());
                origins.came_from("leader.mail_program", pair);
            }
            "mailprog" => notes.not_carried(
                "",
                pair,
                "corral runs the mail program by absolute path; set [leader] mail_program to one",
            ),
            "slurmctldparameters" => {
                let (carried, others): (Vec<String>, Vec<String>) = list(&pair.value)
                    .into_iter()
                    .partition(|w| w.eq_ignore_ascii_case("preempt_send_user_signal"));
                if !carried.is_empty() {
                    leader.preempt_send_user_signal = true;
                    origins.came_from("leader.preempt_send_user_signal", pair);
                }
                if !others.is_empty() {
                    notes.not_carried(
                        "",
                        pair,
                        format!(
                            "corral carries only preempt_send_user_signal ([leader] preempt_send_user_signal); not {}",
                            others.join(",")
                        ),
                    );
                }
            }
            "preemptexempttime" => {
                let seconds = if pair.value.trim() == "-1" {
                    0
                } else {
                    duration_seconds(pair)?.unwrap_or(0)
                };
                scheduling.preempt_exempt = format_seconds(seconds);
                origins.came_from("scheduling.preempt_exempt", pair);
            }
            "maxjobcount" => match number(pair)? {
                0 => notes.not_carried("", pair, "corral needs a positive job limit"),
                n => {
                    limits.max_active_jobs = n;
                    origins.came_from("limits.max_active_jobs", pair);
                    notes.changed(
                        "",
                        pair,
                        "corral counts unfinished jobs only (finished ones are kept in accounting, not held against the limit)",
                    );
                }
            },
            "maxarraysize" => match number(pair)? {
                0 => notes.not_carried(
                    "",
                    pair,
                    "MaxArraySize=0 turns job arrays off, which corral cannot; limits.max_array_tasks keeps corral's default",
                ),
                n => {
                    limits.max_array_tasks = n;
                    origins.came_from("limits.max_array_tasks", pair);
                    notes.changed(
                        "",
                        pair,
                        "corral bounds the number of tasks in an array, not the highest index",
                    );
                }
            },
            "accountingstorageenforce" => {
                let enforced = list(&pair.value).iter().any(|w| {
                    matches!(
                        w.to_ascii_lowercase().as_str(),
                        "associations" | "limits" | "qos" | "safe" | "wckeys" | "all"
                    )
                });
                limits.enforce_associations = enforced;
                origins.came_from("limits.enforce_associations", pair);
                if enforced {
                    notes.changed(
                        "",
                        pair,
                        "users may then charge only accounts they are listed in, and slurm.conf holds no accounts or users (they are in slurmdbd): add them under [[accounts]] and [[users]], or with `corral sacctmgr` once the cluster runs, or nobody can submit",
                    );
                }
            }
            "schedulerparameters" => {
                scheduler_parameters(pair, &mut scheduling, notes, origins)?;
            }
            "schedulertype" => {
                let reason = match pair.value.trim().to_ascii_lowercase().as_str() {
                    "sched/backfill" => {
                        "corral always schedules by priority with backfill, as sched/backfill does ([scheduling] backfill_reservations)"
                    }
                    _ => {
                        "corral always backfills: a lower-priority job may start when it ends before the top jobs' reserved start; there is no FIFO-only scheduler"
                    }
                };
                notes.not_carried("", pair, reason);
            }
            "selecttype" => {
                let reason = match pair.value.trim().to_ascii_lowercase().as_str() {
                    "select/cons_tres" => {
                        "nothing to carry: corral always schedules GPUs, CPUs and memory as select/cons_tres does"
                    }
                    _ => {
                        "corral always allocates GPUs, CPUs and memory per job as select/cons_tres does; a job gets whole nodes only with --exclusive"
                    }
                };
                notes.not_carried("", pair, reason);
            }
            "topologyplugin" => {
                let value = pair.value.trim().to_ascii_lowercase();
                match value.as_str() {
                    "topology/tree" | "topology/none" | "topology/default" => {}
                    _ => notes.not_carried(
                        "",
                        pair,
                        "corral knows switch trees (topology/tree) and blocks only; the network is taken as flat",
                    ),
                }
                topology_plugin = Some(pair.clone());
            }
            "grestypes" => {
                let others: Vec<String> = list(&pair.value)
                    .into_iter()
                    .filter(|t| !t.eq_ignore_ascii_case("gpu"))
                    .collect();
                if !others.is_empty() {
                    notes.not_carried(
                        "",
                        pair,
                        format!(
                            "corral schedules GPUs only; {} cannot be requested",
                            others.join(", ")
                        ),
                    );
                }
            }
            _ => match reasons::setting(&key) {
                Some(reason) => notes.not_carried("", pair, reason),
                None => notes.not_carried("", pair, UNKNOWN_SETTING),
            },
        }
    }
    Ok(Settings {
        cluster_name,
        priority,
        scheduling,
        limits,
        leader,
        preemption,
        topology_plugin,
    })
}

/// Why an unknown key is not carried.
pub const UNKNOWN_SETTING: &str =
    "not a slurm.conf key of Slurm 22.05 (misspelt, or from another version); nothing to carry";

/// Seconds as corral writes durations (`D-HH:MM:SS`).
fn format_seconds(seconds: u64) -> String {
    format_time_limit(TimeLimit::Seconds(seconds))
}

/// ClusterName, lower case as Slurm stores it.
fn cluster_name(
    pair: Option<&Pair>,
    notes: &mut Notes,
    origins: &mut Origins,
) -> Result<String, ImportError> {
    let Some(pair) = pair else {
        notes.general(
            Kind::Changed,
            "ClusterName",
            "slurm.conf sets no ClusterName (Slurm requires one); cluster_name is written as \"cluster\": change it",
        );
        return Ok("cluster".to_string());
    };
    let name = pair.value.trim().to_ascii_lowercase();
    if !is_valid_name(&name) {
        return Err(ImportError::at(
            &pair.at,
            format!(
                "ClusterName={} is not a name corral accepts; use 1-128 letters, digits, '-', '_' or '.'",
                pair.value
            ),
        ));
    }
    origins.came_from("cluster_name", pair);
    Ok(name)
}

/// The weights corral has, by slurm.conf key (lower case) and corral key.
const WEIGHTS: [(&str, &str); 5] = [
    ("priorityweightage", "weight_age"),
    ("priorityweightfairshare", "weight_fairshare"),
    ("priorityweightjobsize", "weight_job_size"),
    ("priorityweightpartition", "weight_partition"),
    ("priorityweightqos", "weight_qos"),
];

fn is_carried_weight(key: &str) -> bool {
    WEIGHTS.iter().any(|(k, _)| *k == key)
}

/// `[priority]`: PriorityType, the weights, PriorityMaxAge and
/// PriorityDecayHalfLife.
fn priority(
    settings: &[Pair],
    notes: &mut Notes,
    origins: &mut Origins,
) -> Result<PrioritySection, ImportError> {
    let last = |key: &str| settings.iter().rev().find(|p| p.is(key));
    let multifactor = match last("PriorityType") {
        Some(pair) => match pair.value.trim().to_ascii_lowercase().as_str() {
            "priority/multifactor" => true,
            "priority/basic" => false,
            _ => {
                return Err(ImportError::at(
                    &pair.at,
                    format!(
                        "PriorityType={} is not priority/basic or priority/multifactor",
                        pair.value
                    ),
                ));
            }
        },
        None => false,
    };
    let mut section = PrioritySection::default();
    let zero_all = |section: &mut PrioritySection| {
        section.weight_age = 0;
        section.weight_fairshare = 0;
        section.weight_job_size = 0;
        section.weight_partition = 0;
        section.weight_qos = 0;
    };
    zero_all(&mut section);
    if !multifactor {
        let text = "Slurm's priority/basic orders jobs by submission; every [priority] weight is written as 0, so corral orders jobs by partition tier, then submission, as priority/basic does";
        match last("PriorityType") {
            Some(pair) => notes.changed("", pair, text),
            None => notes.general(Kind::Changed, "PriorityType", text),
        }
        for (_, path) in WEIGHTS {
            origins.set(format!("priority.{path}"), "priority/basic");
        }
        for pair in settings.iter().filter(|p| {
            let k = p.key.to_ascii_lowercase();
            is_carried_weight(&k)
                || k == "prioritymaxage"
                || k == "prioritydecayhalflife"
                || k == "priorityfavorsmall"
        }) {
            notes.not_carried(
                "",
                pair,
                "Slurm uses it only with PriorityType=priority/multifactor",
            );
        }
        return Ok(section);
    }
    for (key, path) in WEIGHTS {
        let path = format!("priority.{path}");
        let value = match last(key) {
            Some(pair) => {
                origins.came_from(&path, pair);
                number_u32(pair)?
            }
            None => {
                origins.set(&path, "Slurm's default weight 0");
                0
            }
        };
        match path.as_str() {
            "priority.weight_age" => section.weight_age = value,
            "priority.weight_fairshare" => section.weight_fairshare = value,
            "priority.weight_job_size" => section.weight_job_size = value,
            "priority.weight_partition" => section.weight_partition = value,
            _ => section.weight_qos = value,
        }
    }
    if let Some(pair) = last("PriorityWeightPartition") {
        notes.changed(
            "",
            pair,
            "corral's partition factor is the job's partition's PriorityTier over the highest tier (Slurm's is PriorityJobFactor)",
        );
    }
    if let Some(pair) = last("PriorityMaxAge") {
        match duration_seconds(pair)? {
            Some(seconds) => {
                section.max_age = format_seconds(seconds);
                origins.came_from("priority.max_age", pair);
            }
            None => notes.not_carried(
                "",
                pair,
                "corral needs a positive age for the full age factor; max_age keeps corral's default, 7 days (Slurm's too)",
            ),
        }
    }
    if let Some(pair) = last("PriorityDecayHalfLife") {
        match duration_seconds(pair)? {
            Some(seconds) => {
                section.fairshare_half_life = format_seconds(seconds);
                origins.came_from("priority.fairshare_half_life", pair);
            }
            None => notes.not_carried(
                "",
                pair,
                "corral always decays usage; fairshare_half_life keeps corral's default, 7 days (Slurm's too)",
            ),
        }
    }
    if let Some(pair) = last("PriorityFavorSmall")
        && !pair.value.trim().eq_ignore_ascii_case("no")
    {
        notes.not_carried(
            "",
            pair,
            "corral's job-size factor always favours larger jobs (the job's GPUs over the cluster's)",
        );
    }
    Ok(section)
}

/// SchedulerParameters: only max_switch_wait has a place.
fn scheduler_parameters(
    pair: &Pair,
    scheduling: &mut SchedulingSection,
    notes: &mut Notes,
    origins: &mut Origins,
) -> Result<(), ImportError> {
    let mut others = Vec::new();
    for option in list(&pair.value) {
        match option.split_once('=') {
            Some((name, value)) if name.eq_ignore_ascii_case("max_switch_wait") => {
                let seconds: u64 = value.trim().parse().map_err(|_| {
                    ImportError::at(
                        &pair.at,
                        format!(
                            "SchedulerParameters max_switch_wait={value} is not a whole number of seconds"
                        ),
                    )
                })?;
                scheduling.max_switch_wait = format_seconds(seconds);
                origins.set(
                    "scheduling.max_switch_wait",
                    format!("SchedulerParameters max_switch_wait={value} ({})", pair.at),
                );
            }
            _ => others.push(option),
        }
    }
    if !others.is_empty() {
        let shown = Pair {
            value: others.join(","),
            ..pair.clone()
        };
        notes.not_carried(
            "",
            &shown,
            "corral's scheduler has no such options (of SchedulerParameters it carries only max_switch_wait); it always backfills, holding [scheduling] backfill_reservations",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::parse::{Item, parse};
    use super::*;

    fn read_text(text: &str) -> (Settings, Notes, Origins) {
        let pairs: Vec<Pair> = parse(&Arc::from("slurm.conf"), text)
            .unwrap()
            .into_iter()
            .flat_map(|item| match item {
                Item::Pairs(p) => p,
                Item::Include { .. } => Vec::new(),
            })
            .collect();
        let mut notes = Notes::default();
        let mut origins = Origins::default();
        let settings = read(&pairs, &mut notes, &mut origins).unwrap();
        (settings, notes, origins)
    }

    #[test]
    fn multifactor_weights_are_carried_and_missing_ones_are_slurms_zero() {
        let (s, notes, origins) = read_text(
            "ClusterName=Tux\nPriorityType=priority/multifactor\nPriorityWeightAge=1000\nPriorityWeightFairshare=100000\nPriorityDecayHalfLife=14-0\nPriorityMaxAge=1-0\n",
        );
        assert_eq!(s.cluster_name, "tux");
        assert_eq!(s.priority.weight_age, 1000);
        assert_eq!(s.priority.weight_fairshare, 100_000);
        assert_eq!(s.priority.weight_qos, 0);
        assert_eq!(s.priority.fairshare_half_life, "14-00:00:00");
        assert_eq!(s.priority.max_age, "1-00:00:00");
        assert_eq!(
            origins.get("priority.weight_age"),
            Some("PriorityWeightAge=1000 (slurm.conf:3)")
        );
        assert_eq!(notes.count(Kind::NotCarried), 0);
    }

    #[test]
    fn basic_priority_zeroes_the_weights_and_ignores_multifactor_keys() {
        let (s, notes, _) = read_text("ClusterName=c\nPriorityWeightAge=5\n");
        assert_eq!(s.priority.weight_age, 0);
        assert_eq!(s.priority.weight_partition, 0);
        assert_eq!(notes.count(Kind::NotCarried), 1);
        assert_eq!(notes.count(Kind::Changed), 1);
    }

    #[test]
    fn slurms_defaults_are_written_where_corrals_differ() {
        let (s, _, _) = read_text("ClusterName=c\n");
        assert_eq!(s.leader.kill_wait, "00:00:30");
        assert_eq!(s.scheduling.preempt_exempt, "00:00:00");
        assert!(!s.limits.enforce_associations);
    }

    #[test]
    fn carried_limits_and_times() {
        let (s, notes, _) = read_text(
            "ClusterName=c\nKillWait=45\nMaxJobCount=50000\nMaxArraySize=2001\nPreemptExemptTime=00:10:00\nAccountingStorageEnforce=associations,limits\nSchedulerParameters=bf_continue,max_switch_wait=600,defer\n",
        );
        assert_eq!(s.leader.kill_wait, "00:00:45");
        assert_eq!(s.limits.max_active_jobs, 50_000);
        assert_eq!(s.limits.max_array_tasks, 2001);
        assert_eq!(s.scheduling.preempt_exempt, "00:10:00");
        assert_eq!(s.scheduling.max_switch_wait, "00:10:00");
        assert!(s.limits.enforce_associations);
        let lines = notes.render(Kind::NotCarried, 400);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("- SchedulerParameters=bf_continue,defer"),
            "{lines:?}"
        );
    }

    #[test]
    fn every_other_key_is_named_with_a_reason_and_unknown_keys_too() {
        let (_, notes, _) = read_text(
            "ClusterName=c\nSlurmctldHost=ctl1(10.0.0.1)\nSlurmctldHost=ctl2\nSelectType=select/cons_tres\nFrobnicate=yes\n",
        );
        let lines = notes.render(Kind::NotCarried, 1000).join("\n");
        assert!(lines.contains("SlurmctldHost=ctl1(10.0.0.1), ctl2 (slurm.conf:2-3): corral's controllers are the replicas under [[replicas]]"), "{lines}");
        assert!(
            lines.contains("SelectType=select/cons_tres (slurm.conf:4): nothing to carry"),
            "{lines}"
        );
        assert!(
            lines.contains("Frobnicate=yes (slurm.conf:5): not a slurm.conf key"),
            "{lines}"
        );
    }

    #[test]
    fn a_later_setting_wins() {
        let (s, _, _) = read_text("ClusterName=c\nKillWait=10\nKillWait=20\n");
        assert_eq!(s.leader.kill_wait, "00:00:20");
    }
}
