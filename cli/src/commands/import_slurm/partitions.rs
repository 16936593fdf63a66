//! PartitionName lines into `[[partitions]]`: nodes (hostlists, `ALL`,
//! NodeSet names), Default, MaxTime, DefaultTime, State, PriorityTier,
//! AllowAccounts (each account also defined under `[[accounts]]`, since
//! corrald refuses unknown ones) and PreemptMode; GraceTime becomes the
//! cluster-wide `[scheduling] preempt_grace`.

use std::collections::{BTreeMap, HashSet};

use corral_controller::config::{AccountSection, PartitionSection, PartitionStateName};
use corral_state::account::ROOT_ACCOUNT;
use corral_state::slurm::duration::{TimeLimit, format_time_limit};
use corral_state::slurm::hostlist;

use super::location::ImportError;
use super::nodes::Nodes;
use super::notes::{Kind, Notes};
use super::origins::Origins;
use super::parse::Pair;
use super::preemption::Preemption;
use super::reasons;
use super::records::Record;
use super::values::{is_valid_name, list, number, number_u32, time_limit, yes_no};

/// What the partitions give.
#[derive(Debug, Clone, Default)]
pub struct Partitions {
    /// The `[[partitions]]` tables.
    pub sections: Vec<PartitionSection>,
    /// Accounts AllowAccounts names.
    pub accounts: Vec<AccountSection>,
    /// `[scheduling] preempt_grace`, seconds.
    pub grace_seconds: u64,
}

/// What partitions are read against.
pub struct Context<'a> {
    /// The defined nodes.
    pub nodes: &'a Nodes,
    /// NodeSet records.
    pub node_sets: &'a [&'a Record],
    /// The cluster's preemption.
    pub preemption: &'a Preemption,
}

/// The keys a partition is read from.
const CARRIED: [&str; 9] = [
    "nodes",
    "default",
    "maxtime",
    "defaulttime",
    "state",
    "prioritytier",
    "allowaccounts",
    "preemptmode",
    "gracetime",
];

/// Reads every PartitionName record.
pub fn read(
    records: &[&Record],
    context: &Context<'_>,
    notes: &mut Notes,
    origins: &mut Origins,
) -> Result<Partitions, ImportError> {
    let sets = node_sets(context, notes)?;
    let mut out = Partitions::default();
    let mut seen = HashSet::new();
    let mut default_at: Option<(usize, Pair)> = None;
    let mut graces: Vec<(u64, Option<Pair>)> = Vec::new();
    for record in records {
        let head = &record.head;
        if !is_valid_name(head.value.trim()) {
            return Err(ImportError::at(
                &head.at,
                format!(
                    "PartitionName={} is not a name corral accepts; use 1-128 letters, digits, '-', '_' or '.'",
                    head.value
                ),
            ));
        }
        let name = head.value.trim().to_string();
        if !seen.insert(name.clone()) {
            notes.not_carried(
                "PartitionName",
                head,
                "a partition of this name is defined by an earlier line; Slurm ignores the repeat, and so does the import",
            );
            continue;
        }
        for pair in &record.fields {
            let key = pair.key.to_ascii_lowercase();
            if CARRIED.contains(&key.as_str()) {
                continue;
            }
            match reasons::partition_field(&key) {
                Some(reason) => notes.not_carried("PartitionName", pair, reason),
                None => notes.not_carried(
                    "PartitionName",
                    pair,
                    "not a PartitionName key of Slurm 22.05; nothing to carry",
                ),
            }
        }
        let Some(nodes) = members(record, context.nodes, &sets, notes)? else {
            continue;
        };
        let index = out.sections.len();
        origins.set(
            format!("partitions[{index}]"),
            format!("PartitionName={} ({})", head.value, head.at),
        );
        let mut section = PartitionSection {
            name,
            nodes,
            ..PartitionSection::default()
        };
        if let Some(pair) = record.get("Default")
            && yes_no(pair)?
        {
            if let Some((earlier, earlier_pair)) = default_at.take() {
                out.sections[earlier].default = false;
                notes.changed(
                    "PartitionName",
                    &earlier_pair,
                    "several partitions say Default=YES; as in Slurm the last one is the default",
                );
            }
            section.default = true;
            default_at = Some((index, pair.clone()));
        }
        times(record, &mut section, notes)?;
        if let Some(pair) = record.get("State") {
            section.state = Some(state(pair, notes)?);
        }
        if let Some(pair) = record.get("PriorityTier") {
            section.priority_tier = Some(number_u32(pair)?);
        }
        if let Some(pair) = record.get("AllowAccounts") {
            section.allowed_accounts = allowed_accounts(pair, &mut out.accounts, origins)?;
        }
        section.preempt_mode = context
            .preemption
            .partition_mode(record.get("PreemptMode"), notes)?;
        if section.preempt_mode.is_some() {
            let from = record.get("PreemptMode").or(context
                .preemption
                .cluster_mode
                .as_ref()
                .map(|(p, _)| p));
            if let Some(pair) = from {
                origins.came_from(format!("partitions[{index}].preempt_mode"), pair);
            }
            let grace = record.get("GraceTime");
            graces.push((grace.map(number).transpose()?.unwrap_or(0), grace.cloned()));
        }
        out.sections.push(section);
    }
    if !out.accounts.is_empty() {
        notes.general(
            Kind::Changed,
            "AllowAccounts",
            "corrald refuses accounts it does not know, so the accounts AllowAccounts names are defined under [[accounts]], directly below root; their place in the tree, shares and users are in slurmdbd (sacctmgr show assoc): set them",
        );
    }
    out.grace_seconds = grace(&graces, notes, origins);
    Ok(out)
}

/// The nodes of each NodeSet: its Nodes= and the defined nodes with its
/// Feature=.
fn node_sets(
    context: &Context<'_>,
    notes: &mut Notes,
) -> Result<BTreeMap<String, Vec<String>>, ImportError> {
    let mut sets = BTreeMap::new();
    for record in context.node_sets {
        let mut members = Vec::new();
        if let Some(pair) = record.get("Nodes") {
            members
                .extend(hostlist::expand(&pair.value).map_err(|e| {
                    ImportError::at(&pair.at, format!("Nodes={}: {e}", pair.value))
                })?);
        }
        if let Some(pair) = record.get("Feature") {
            let feature = pair.value.trim();
            members.extend(
                context
                    .nodes
                    .defined
                    .iter()
                    .filter(|(_, features)| features.iter().any(|f| f == feature))
                    .map(|(name, _)| name.clone()),
            );
        }
        for pair in record
            .fields
            .iter()
            .filter(|p| !p.is("Nodes") && !p.is("Feature"))
        {
            notes.not_carried(
                "NodeSet",
                pair,
                "not a NodeSet key of Slurm 22.05; nothing to carry",
            );
        }
        sets.insert(record.name().trim().to_string(), members);
    }
    Ok(sets)
}

/// The partition's nodes as a hostlist, or `None` (noted) when it has none.
fn members(
    record: &Record,
    nodes: &Nodes,
    sets: &BTreeMap<String, Vec<String>>,
    notes: &mut Notes,
) -> Result<Option<String>, ImportError> {
    let Some(pair) = record.get("Nodes").filter(|p| !p.value.trim().is_empty()) else {
        notes.not_carried(
            "PartitionName",
            &record.head,
            "the partition has no nodes, and corral needs at least one: it is left out; define it once it has nodes",
        );
        return Ok(None);
    };
    let written = pair.value.trim();
    let mut names: Vec<String> = Vec::new();
    let mut rewritten = false;
    for entry in top_level_entries(written) {
        if entry.eq_ignore_ascii_case("ALL") {
            names.extend(nodes.defined.iter().map(|(name, _)| name.clone()));
            rewritten = true;
        } else if let Some(set) = sets.get(entry) {
            names.extend(set.iter().cloned());
            rewritten = true;
        } else {
            names.extend(
                hostlist::expand(entry)
                    .map_err(|e| ImportError::at(&pair.at, format!("Nodes={written}: {e}")))?,
            );
        }
    }
    let mut unknown = Vec::new();
    names.retain(|n| {
        let known = nodes.names.contains(n);
        if !known {
            unknown.push(n.clone());
        }
        known
    });
    if !unknown.is_empty() {
        notes.not_carried(
            "PartitionName",
            pair,
            format!(
                "{} {} not defined by any NodeName line, so {} left out of the partition",
                hostlist::compress(&unknown),
                if unknown.len() == 1 { "is" } else { "are" },
                if unknown.len() == 1 {
                    "it is"
                } else {
                    "they are"
                },
            ),
        );
        rewritten = true;
    }
    if names.is_empty() {
        notes.not_carried(
            "PartitionName",
            &record.head,
            "none of the partition's nodes is defined, and corral needs at least one: it is left out",
        );
        return Ok(None);
    }
    let mut once = HashSet::new();
    names.retain(|n| once.insert(n.clone()));
    Ok(Some(if rewritten {
        hostlist::compress(&names)
    } else {
        written.to_string()
    }))
}

/// Splits a Nodes= value at commas outside brackets.
fn top_level_entries(value: &str) -> Vec<&str> {
    let mut entries = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in value.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                entries.push(value[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    entries.push(value[start..].trim());
    entries.into_iter().filter(|e| !e.is_empty()).collect()
}

/// MaxTime and DefaultTime; a DefaultTime above MaxTime is left out.
fn times(
    record: &Record,
    section: &mut PartitionSection,
    notes: &mut Notes,
) -> Result<(), ImportError> {
    let max = match record.get("MaxTime") {
        Some(pair) => {
            let limit = time_limit(pair)?;
            section.max_time = Some(format_time_limit(limit));
            limit
        }
        None => TimeLimit::Unlimited,
    };
    if let Some(pair) = record.get("DefaultTime") {
        let limit = time_limit(pair)?;
        if limit > max {
            notes.not_carried(
                "PartitionName",
                pair,
                "longer than the partition's MaxTime, which corral refuses; jobs that ask for no time get MaxTime",
            );
        } else {
            section.default_time = Some(format_time_limit(limit));
        }
    }
    Ok(())
}

/// State=UP, DOWN, DRAIN or INACTIVE.
fn state(pair: &Pair, notes: &mut Notes) -> Result<PartitionStateName, ImportError> {
    match pair.value.trim().to_ascii_lowercase().as_str() {
        "up" => Ok(PartitionStateName::Up),
        "down" => Ok(PartitionStateName::Down),
        "drain" => {
            notes.changed(
                "PartitionName",
                pair,
                "corral has no draining partitions (no new jobs, queued ones run); written as up",
            );
            Ok(PartitionStateName::Up)
        }
        "inactive" => {
            notes.changed(
                "PartitionName",
                pair,
                "corral has no inactive partitions (no new jobs, none run); written as down, which accepts jobs but starts none",
            );
            Ok(PartitionStateName::Down)
        }
        _ => Err(ImportError::at(
            &pair.at,
            format!("State={} is not UP, DOWN, DRAIN or INACTIVE", pair.value),
        )),
    }
}

/// AllowAccounts: `ALL` allows every account; named accounts are also
/// defined.
fn allowed_accounts(
    pair: &Pair,
    accounts: &mut Vec<AccountSection>,
    origins: &mut Origins,
) -> Result<Option<Vec<String>>, ImportError> {
    let names = list(&pair.value);
    if names.is_empty() || names.iter().any(|n| n.eq_ignore_ascii_case("ALL")) {
        return Ok(None);
    }
    for name in &names {
        if !is_valid_name(name) {
            return Err(ImportError::at(
                &pair.at,
                format!(
                    "AllowAccounts names '{name}', which is not a name corral accepts; use letters, digits, '-', '_' or '.'"
                ),
            ));
        }
        if name != ROOT_ACCOUNT && !accounts.iter().any(|a| a.name == *name) {
            origins.set(
                format!("accounts[{}]", accounts.len()),
                format!("named by AllowAccounts ({})", pair.at),
            );
            accounts.push(AccountSection {
                name: name.clone(),
                ..AccountSection::default()
            });
        }
    }
    Ok(Some(names))
}

/// One grace for every preemptable partition: theirs when they agree, else the
/// longest.
fn grace(graces: &[(u64, Option<Pair>)], notes: &mut Notes, origins: &mut Origins) -> u64 {
    let longest = graces.iter().map(|(s, _)| *s).max().unwrap_or(0);
    if graces.iter().any(|(s, _)| *s != longest) {
        for (_, pair) in graces {
            if let Some(pair) = pair {
                notes.changed(
                    "PartitionName",
                    pair,
                    format!(
                        "corral has one preemption grace for the whole cluster; the longest GraceTime of the preemptable partitions, {longest} s, is [scheduling] preempt_grace"
                    ),
                );
            }
        }
    }
    match graces
        .iter()
        .find_map(|(s, p)| p.as_ref().filter(|_| *s == longest))
    {
        Some(pair) => origins.came_from("scheduling.preempt_grace", pair),
        None => origins.set("scheduling.preempt_grace", "Slurm's default GraceTime=0"),
    }
    longest
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use corral_controller::config::PreemptModeName;

    use super::super::gres::GresConf;
    use super::super::nodes;
    use super::super::parse::{Item, parse};
    use super::super::records::sort;
    use super::*;

    fn import(text: &str) -> Result<(Partitions, Notes), ImportError> {
        let lines: Vec<Vec<Pair>> = parse(&Arc::from("slurm.conf"), text)
            .unwrap()
            .into_iter()
            .filter_map(|i| match i {
                Item::Pairs(p) => Some(p),
                Item::Include { .. } => None,
            })
            .collect();
        let sorted = sort(
            lines,
            &["NodeName", "PartitionName", "NodeSet"],
            &["NodeName", "PartitionName"],
        );
        let mut notes = Notes::default();
        let mut origins = Origins::default();
        let get = |key: &str| sorted.settings.iter().rev().find(|p| p.is(key));
        let preemption =
            Preemption::read(get("PreemptType"), get("PreemptMode"), &mut notes).unwrap();
        let node_records: Vec<&Record> = sorted.of("NodeName").collect();
        let nodes = nodes::read(
            &node_records,
            &GresConf::default(),
            &mut notes,
            &mut origins,
        )?;
        let sets: Vec<&Record> = sorted.of("NodeSet").collect();
        let records: Vec<&Record> = sorted.of("PartitionName").collect();
        let context = Context {
            nodes: &nodes,
            node_sets: &sets,
            preemption: &preemption,
        };
        let partitions = read(&records, &context, &mut notes, &mut origins)?;
        Ok((partitions, notes))
    }

    const NODES: &str = "NodeName=dev[0-25] CPUs=2 RealMemory=2000 Features=fast\nNodeName=big[1-2] CPUs=8 RealMemory=9000\n";

    #[test]
    fn the_man_pages_partitions() {
        let text = format!(
            "{NODES}PartitionName=DEFAULT MaxTime=30 MaxNodes=10 State=UP\nPartitionName=debug Nodes=dev[0-8,18-25] Default=YES\nPartitionName=batch Nodes=dev[9-17]  MinNodes=4\nPartitionName=long Nodes=dev[9-17] MaxTime=120 AllowGroups=admin\n"
        );
        let (p, notes) = import(&text).unwrap();
        let names: Vec<&str> = p.sections.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["debug", "batch", "long"]);
        assert_eq!(p.sections[0].nodes, "dev[0-8,18-25]");
        assert!(p.sections[0].default);
        assert_eq!(p.sections[0].max_time.as_deref(), Some("00:30:00"));
        assert_eq!(p.sections[2].max_time.as_deref(), Some("02:00:00"));
        assert_eq!(p.sections[1].state, Some(PartitionStateName::Up));
        let text = notes.render(Kind::NotCarried, 1000).join("\n");
        assert!(
            text.contains("MaxNodes=10 on PartitionName lines (slurm.conf:3)"),
            "{text}"
        );
        assert!(text.contains("MinNodes=4"), "{text}");
        assert!(text.contains("AllowGroups=admin"), "{text}");
    }

    #[test]
    fn all_node_sets_and_unknown_nodes() {
        let text = format!(
            "{NODES}NodeSet=fastones Feature=fast\nPartitionName=all Nodes=ALL\nPartitionName=set Nodes=fastones,big1\nPartitionName=ghost Nodes=dev[24-30]\nPartitionName=empty Nodes=\n"
        );
        let (p, notes) = import(&text).unwrap();
        assert_eq!(p.sections[0].nodes, "big[1-2],dev[0-25]");
        assert_eq!(p.sections[1].nodes, "big1,dev[0-25]");
        assert_eq!(p.sections[2].nodes, "dev[24-25]");
        assert_eq!(p.sections.len(), 3);
        let text = notes.render(Kind::NotCarried, 1000).join("\n");
        assert!(text.contains("dev[26-30] are not defined"), "{text}");
        assert!(text.contains("has no nodes"), "{text}");
    }

    #[test]
    fn tiers_accounts_states_times_and_preemption() {
        let text = format!(
            "PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\n{NODES}PartitionName=low Nodes=dev[0-9] PriorityTier=1 GraceTime=60 DefaultTime=1-0 MaxTime=2-00:00:00 State=DRAIN\nPartitionName=high Nodes=dev[0-9] PriorityTier=10 PreemptMode=OFF AllowAccounts=nlp,prod State=INACTIVE Default=YES\nPartitionName=mid Nodes=big[1-2] PriorityTier=5 PreemptMode=CANCEL GraceTime=120 DefaultTime=3-0 MaxTime=1-0\n"
        );
        let (p, notes) = import(&text).unwrap();
        let low = &p.sections[0];
        assert_eq!(low.preempt_mode, Some(PreemptModeName::Requeue));
        assert_eq!(low.priority_tier, Some(1));
        assert_eq!(low.default_time.as_deref(), Some("1-00:00:00"));
        assert_eq!(low.state, Some(PartitionStateName::Up));
        let high = &p.sections[1];
        assert_eq!(high.preempt_mode, None);
        assert_eq!(
            high.allowed_accounts.as_deref(),
            Some(&["nlp".to_string(), "prod".to_string()][..])
        );
        assert_eq!(high.state, Some(PartitionStateName::Down));
        let mid = &p.sections[2];
        assert_eq!(mid.preempt_mode, Some(PreemptModeName::Cancel));
        assert_eq!(mid.default_time, None);
        let accounts: Vec<&str> = p.accounts.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(accounts, ["nlp", "prod"]);
        assert_eq!(p.grace_seconds, 120);
        let changed = notes.render(Kind::Changed, 1000).join("\n");
        assert!(changed.contains("GraceTime=60, 120"), "{changed}");
        assert!(changed.contains("State=DRAIN"), "{changed}");
    }

    #[test]
    fn the_last_default_wins() {
        let text = format!(
            "{NODES}PartitionName=a Nodes=big1 Default=YES\nPartitionName=b Nodes=big2 Default=YES\n"
        );
        let (p, _) = import(&text).unwrap();
        assert!(!p.sections[0].default);
        assert!(p.sections[1].default);
    }

    #[test]
    fn bad_values_are_refused_with_their_line() {
        let text = format!("{NODES}PartitionName=p Nodes=big1 MaxTime=1-25\n");
        let err = import(&text).unwrap_err();
        assert!(
            err.to_string().starts_with("slurm.conf:3: MaxTime=1-25"),
            "{err}"
        );
        let text = format!("{NODES}PartitionName=p Nodes=big1 State=SIDEWAYS\n");
        assert!(import(&text).is_err());
    }
}
