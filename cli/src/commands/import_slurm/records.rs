//! A file's lines sorted into settings and records. A record is a line that
//! starts with one of the record keys (`NodeName=`, `PartitionName=`,
//! `SwitchName=`...); the rest of its line is its fields. A record named
//! `DEFAULT` sets fields for the later records of its kind (each DEFAULT line
//! adds to or replaces earlier defaults), as in Slurm.

use super::parse::Pair;

/// One record: its head (`NodeName=gpu[01-04]`) and its fields, defaults
/// included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The key that starts the record, and the record's name.
    pub head: Pair,
    /// Each field once, in order: inherited defaults, then the line's own.
    pub fields: Vec<Pair>,
}

impl Record {
    /// The record's name (the head's value).
    pub fn name(&self) -> &str {
        &self.head.value
    }

    /// The field `key` (case-insensitive).
    pub fn get(&self, key: &str) -> Option<&Pair> {
        self.fields.iter().find(|p| p.is(key))
    }
}

/// A file's settings and records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sorted {
    /// Pairs outside any record, in order.
    pub settings: Vec<Pair>,
    /// Records (DEFAULT records applied and left out), in order.
    pub records: Vec<Record>,
}

impl Sorted {
    /// The records whose head is `key`.
    pub fn of<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a Record> + 'a {
        self.records.iter().filter(move |r| r.head.is(key))
    }
}

/// Sorts `lines` by the record keys `record_keys`; `with_defaults` are those
/// whose `DEFAULT` records set defaults.
pub fn sort(lines: Vec<Vec<Pair>>, record_keys: &[&str], with_defaults: &[&str]) -> Sorted {
    let mut sorted = Sorted::default();
    let mut defaults: Vec<(String, Vec<Pair>)> = Vec::new();
    for line in lines {
        let mut pairs = line.into_iter();
        let mut head = None;
        for pair in pairs.by_ref() {
            if record_keys.iter().any(|k| pair.is(k)) {
                head = Some(pair);
                break;
            }
            sorted.settings.push(pair);
        }
        let Some(head) = head else { continue };
        let own: Vec<Pair> = pairs.collect();
        let kind = head.key.to_ascii_lowercase();
        let is_default_kind = with_defaults.iter().any(|k| head.is(k));
        if is_default_kind && head.value.eq_ignore_ascii_case("DEFAULT") {
            let slot = match defaults.iter().position(|(k, _)| *k == kind) {
                Some(i) => &mut defaults[i].1,
                None => {
                    defaults.push((kind, Vec::new()));
                    let last = defaults.len() - 1;
                    &mut defaults[last].1
                }
            };
            merge(slot, own);
            continue;
        }
        let mut fields = defaults
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, d)| d.clone())
            .unwrap_or_default();
        merge(&mut fields, own);
        sorted.records.push(Record { head, fields });
    }
    sorted
}

/// Adds `own` to `fields`, each replacing a field of the same key.
fn merge(fields: &mut Vec<Pair>, own: Vec<Pair>) {
    for pair in own {
        match fields
            .iter_mut()
            .find(|f| f.key.eq_ignore_ascii_case(&pair.key))
        {
            Some(existing) => *existing = pair,
            None => fields.push(pair),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::parse::{Item, parse};
    use super::*;

    fn lines(text: &str) -> Vec<Vec<Pair>> {
        parse(&Arc::from("slurm.conf"), text)
            .unwrap()
            .into_iter()
            .filter_map(|item| match item {
                Item::Pairs(p) => Some(p),
                Item::Include { .. } => None,
            })
            .collect()
    }

    fn fields(record: &Record) -> Vec<String> {
        record
            .fields
            .iter()
            .map(|p| format!("{}={}:{}", p.key, p.value, p.at.line))
            .collect()
    }

    #[test]
    fn default_lines_add_to_and_replace_earlier_defaults_for_later_lines_only() {
        let text = "\
NodeName=early CPUs=1
NodeName=DEFAULT CPUs=2 RealMemory=2000 TmpDisk=64000
NodeName=DEFAULT State=UNKNOWN
NodeName=dev[0-25] NodeAddr=edev[0-25] Weight=16
NodeName=DEFAULT cpus=4
NodeName=big RealMemory=9000
";
        let sorted = sort(lines(text), &["NodeName", "PartitionName"], &["NodeName"]);
        let nodes: Vec<&Record> = sorted.of("NodeName").collect();
        assert_eq!(nodes.len(), 3);
        assert_eq!(fields(nodes[0]), ["CPUs=1:1"]);
        assert_eq!(
            fields(nodes[1]),
            [
                "CPUs=2:2",
                "RealMemory=2000:2",
                "TmpDisk=64000:2",
                "State=UNKNOWN:3",
                "NodeAddr=edev[0-25]:4",
                "Weight=16:4"
            ]
        );
        assert_eq!(
            fields(nodes[2]),
            [
                "cpus=4:5",
                "RealMemory=9000:6",
                "TmpDisk=64000:2",
                "State=UNKNOWN:3"
            ]
        );
    }

    #[test]
    fn settings_before_a_record_key_stay_settings() {
        let sorted = sort(
            lines("ClusterName=c SlurmdPort=7003\nKillWait=30 PartitionName=p Nodes=a\n"),
            &["NodeName", "PartitionName"],
            &["PartitionName"],
        );
        let keys: Vec<&str> = sorted.settings.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["ClusterName", "SlurmdPort", "KillWait"]);
        let partition = sorted.of("partitionname").next().unwrap();
        assert_eq!(partition.name(), "p");
        assert_eq!(partition.get("NODES").unwrap().value, "a");
    }
}
