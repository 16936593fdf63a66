//! NodeName lines into `[[nodes]]` tables: hostlists, CPUs (given, or boards
//! × sockets × cores × threads), RealMemory less MemSpecLimit, Features, and
//! GPUs (see `gres`). A line whose nodes differ in GPUs (gres.conf can say so
//! per node) becomes one table per run of alike nodes.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use corral_controller::config::NodeSection;
use corral_state::slurm::hostlist;
use corral_state::slurm::memory::format_memory_mb;

use super::gres::{GpuSources, GresConf, GresItem, NodeGpus, node_gpus, parse_node_gres};
use super::location::ImportError;
use super::notes::Notes;
use super::origins::Origins;
use super::parse::Pair;
use super::reasons;
use super::records::Record;
use super::values::{is_valid_name, list, number, number_u32};

/// The nodes defined, in order.
#[derive(Debug, Clone, Default)]
pub struct Nodes {
    /// The `[[nodes]]` tables.
    pub sections: Vec<NodeSection>,
    /// Every node, in definition order, with its features.
    pub defined: Vec<(String, Arc<[String]>)>,
    /// The same names, to look up.
    pub names: HashSet<String>,
}

/// A `[[nodes]]` table being built: the table, its nodes, and the lines it
/// came from.
struct Table {
    section: NodeSection,
    members: Vec<String>,
    from: Vec<String>,
}

/// Reads every NodeName record. Consecutive lines whose nodes are alike
/// (Slurm sites often write one line per node, for its NodeAddr) become one
/// table.
pub fn read(
    records: &[&Record],
    gres_conf: &GresConf,
    notes: &mut Notes,
    origins: &mut Origins,
) -> Result<Nodes, ImportError> {
    let mut nodes = Nodes::default();
    let mut tables: Vec<Table> = Vec::new();
    for record in records {
        for table in read_line(record, gres_conf, &mut nodes, notes)? {
            match tables.last_mut() {
                Some(last) if alike(&last.section, &table.section) => {
                    last.members.extend(table.members);
                    last.from.extend(table.from);
                }
                _ => tables.push(table),
            }
        }
    }
    for (index, mut table) in tables.into_iter().enumerate() {
        if table.from.len() > 1 {
            table.section.names = hostlist::compress(&table.members);
        }
        let origin = match table.from.as_slice() {
            [one] => one.clone(),
            [first, .., last] => format!("{first} ... {last}: {} lines", table.from.len()),
            [] => String::new(),
        };
        origins.set(format!("nodes[{index}]"), origin);
        nodes.sections.push(table.section);
    }
    Ok(nodes)
}

/// Same hardware: everything but the names.
fn alike(a: &NodeSection, b: &NodeSection) -> bool {
    a.cpus == b.cpus
        && a.memory == b.memory
        && a.gpus == b.gpus
        && a.gpu_type == b.gpu_type
        && a.features == b.features
}

/// What one line gives every one of its nodes.
struct LineHardware {
    cpus: u32,
    memory: String,
    features: Arc<[String]>,
    gres: Option<Pair>,
    items: Vec<GresItem>,
}

fn read_line(
    record: &Record,
    gres_conf: &GresConf,
    nodes: &mut Nodes,
    notes: &mut Notes,
) -> Result<Vec<Table>, ImportError> {
    let head = &record.head;
    if head.value.eq_ignore_ascii_case("ALL") {
        return Err(ImportError::at(
            &head.at,
            "NodeName=ALL is reserved (Slurm refuses it too); name the nodes",
        ));
    }
    let names = hostlist::expand(&head.value)
        .map_err(|e| ImportError::at(&head.at, format!("NodeName={}: {e}", head.value)))?;
    let hardware = hardware(record, notes)?;
    let mut runs: Vec<(NodeGpus, Vec<String>)> = Vec::new();
    let mut decided: BTreeMap<Vec<usize>, NodeGpus> = BTreeMap::new();
    for name in names {
        if !is_valid_name(&name) {
            return Err(ImportError::at(
                &head.at,
                format!(
                    "node name '{name}' is not a name corral accepts; use 1-128 letters, digits, '-', '_' or '.'"
                ),
            ));
        }
        if nodes.names.contains(&name) {
            notes.not_carried(
                "NodeName",
                head,
                format!(
                    "node {name} is defined by an earlier line; Slurm ignores the repeat, and so does the import"
                ),
            );
            continue;
        }
        let matching = gres_conf.matching(&name);
        let gpus = match decided.get(&matching) {
            Some(gpus) => gpus.clone(),
            None => {
                let sources = GpuSources {
                    gres: hardware.gres.as_ref(),
                    items: &hardware.items,
                    gres_conf,
                    matching: &matching,
                    features: &hardware.features,
                };
                let gpus = node_gpus(&sources, notes)?;
                decided.insert(matching, gpus.clone());
                gpus
            }
        };
        match runs.last_mut() {
            Some((last, members)) if *last == gpus => members.push(name.clone()),
            _ => runs.push((gpus, vec![name.clone()])),
        }
        nodes.names.insert(name.clone());
        nodes.defined.push((name, Arc::clone(&hardware.features)));
    }
    let split = runs.len() > 1;
    let mut tables = Vec::new();
    for (gpus, members) in runs {
        let written = head.value.trim().to_string();
        let names = if !split && hostlist::expand(&written).ok().as_ref() == Some(&members) {
            written
        } else {
            hostlist::compress(&members)
        };
        let from = format!(
            "{}NodeName={} ({})",
            if split { "part of " } else { "" },
            head.value,
            head.at
        );
        tables.push(Table {
            section: NodeSection {
                names,
                cpus: hardware.cpus,
                memory: hardware.memory.clone(),
                gpus: gpus.count,
                gpu_type: gpus.gpu_type,
                mig: gpus.mig,
                features: hardware.features.to_vec(),
            },
            members,
            from: vec![from],
        });
    }
    Ok(tables)
}

/// The keys a NodeName line's value is read from.
const CARRIED: [&str; 13] = [
    "cpus",
    "procs",
    "boards",
    "sockets",
    "socketsperboard",
    "corespersocket",
    "threadspercore",
    "realmemory",
    "memspeclimit",
    "features",
    "feature",
    "gres",
    "state",
];

/// CPUs, memory, features and GRES of a line, noting its other keys.
fn hardware(record: &Record, notes: &mut Notes) -> Result<LineHardware, ImportError> {
    for pair in &record.fields {
        let key = pair.key.to_ascii_lowercase();
        if CARRIED.contains(&key.as_str()) {
            continue;
        }
        match reasons::node_field(&key) {
            Some(reason) => notes.not_carried("NodeName", pair, reason),
            None => notes.not_carried(
                "NodeName",
                pair,
                "not a NodeName key of Slurm 22.05; nothing to carry",
            ),
        }
    }
    if let Some(state) = record.get("State") {
        node_state(state, notes);
    }
    let cpus = cpus(record)?;
    let memory = memory(record, notes)?;
    let mut features = Vec::new();
    if let Some(pair) = record.get("Features").or_else(|| record.get("Feature")) {
        for feature in list(&pair.value) {
            if is_valid_name(&feature) {
                if !features.contains(&feature) {
                    features.push(feature);
                }
            } else {
                notes.not_carried(
                    "NodeName",
                    pair,
                    format!(
                        "feature '{feature}' is not a name corral accepts (letters, digits, '-', '_', '.'); it is left out"
                    ),
                );
            }
        }
    }
    let gres = record.get("Gres").cloned();
    let items = match &gres {
        Some(pair) => parse_node_gres(pair)?,
        None => Vec::new(),
    };
    Ok(LineHardware {
        cpus,
        memory,
        features: features.into(),
        gres,
        items,
    })
}

/// CPUs as given, else the product of the topology fields (each default 1).
fn cpus(record: &Record) -> Result<u32, ImportError> {
    if let Some(pair) = record.get("CPUs").or_else(|| record.get("Procs")) {
        let cpus = number_u32(pair)?;
        if cpus == 0 {
            return Err(ImportError::at(
                &pair.at,
                format!("{}=0: a node needs at least one CPU", pair.key),
            ));
        }
        return Ok(cpus);
    }
    let field = |key: &str| -> Result<u64, ImportError> {
        match record.get(key) {
            Some(pair) => number(pair),
            None => Ok(1),
        }
    };
    let sockets = match record.get("SocketsPerBoard") {
        Some(pair) => number(pair)?,
        None => field("Sockets")?,
    };
    let product = field("Boards")?
        .saturating_mul(sockets)
        .saturating_mul(field("CoresPerSocket")?)
        .saturating_mul(field("ThreadsPerCore")?);
    u32::try_from(product.max(1)).map_err(|_| {
        ImportError::at(
            &record.head.at,
            format!("NodeName={}: {product} CPUs is too many", record.head.value),
        )
    })
}

/// RealMemory (MB; Slurm's default 1) less MemSpecLimit, as corral writes it.
fn memory(record: &Record, notes: &mut Notes) -> Result<String, ImportError> {
    let real = match record.get("RealMemory") {
        Some(pair) => number(pair)?,
        None => {
            notes.changed(
                "NodeName",
                &record.head,
                "no RealMemory: Slurm takes 1 MB, and so memory is written as 1M; give the nodes' schedulable memory, or jobs that ask for memory never fit",
            );
            1
        }
    };
    let reserved = match record.get("MemSpecLimit") {
        Some(pair) => {
            let reserved = number(pair)?;
            if reserved >= real {
                return Err(ImportError::at(
                    &pair.at,
                    format!(
                        "MemSpecLimit={reserved} leaves no memory of RealMemory={real} for jobs; lower it"
                    ),
                ));
            }
            notes.changed(
                "NodeName",
                pair,
                "corral's memory is what jobs may use, so MemSpecLimit is taken off RealMemory",
            );
            reserved
        }
        None => 0,
    };
    if real == 0 {
        return Err(ImportError::at(
            &record.head.at,
            format!(
                "NodeName={}: RealMemory=0; a node needs memory",
                record.head.value
            ),
        ));
    }
    Ok(format_memory_mb(real - reserved))
}

/// A node State other than UNKNOWN (or IDLE) has no place in corral.toml.
fn node_state(pair: &Pair, notes: &mut Notes) {
    let reason = match pair.value.trim().to_ascii_lowercase().as_str() {
        "unknown" | "idle" => return,
        "future" => {
            "FUTURE nodes are defined like the others in corral; until their agents register they are not responding, and no job goes there"
        }
        "cloud" => {
            "corral does not power cloud nodes up or down; the nodes are defined like the others and take jobs once their agents register"
        }
        _ => {
            "a node's state comes from its agent in corral: the nodes are defined, and take jobs once their agents register; drain them with `corral node drain` (or scontrol update) after the cluster starts"
        }
    };
    notes.not_carried("NodeName", pair, reason);
}

#[cfg(test)]
mod tests {
    use super::super::notes::Kind;
    use super::super::parse::{Item, parse};
    use super::super::records::sort;
    use super::*;

    fn import(text: &str, gres: &str) -> (Nodes, Notes, Origins) {
        let lines = |file: &str, text: &str| -> Vec<Vec<Pair>> {
            parse(&Arc::from(file), text)
                .unwrap()
                .into_iter()
                .filter_map(|i| match i {
                    Item::Pairs(p) => Some(p),
                    Item::Include { .. } => None,
                })
                .collect()
        };
        let sorted = sort(lines("slurm.conf", text), &["NodeName"], &["NodeName"]);
        let mut notes = Notes::default();
        let mut origins = Origins::default();
        let conf = GresConf::read(&lines("gres.conf", gres), &mut notes).unwrap();
        let records: Vec<&Record> = sorted.of("NodeName").collect();
        let nodes = read(&records, &conf, &mut notes, &mut origins).unwrap();
        (nodes, notes, origins)
    }

    #[test]
    fn cpus_come_from_the_topology_when_not_given() {
        let (nodes, _, _) = import(
            "NodeName=a Boards=1 SocketsPerBoard=2 CoresPerSocket=32 ThreadsPerCore=2 RealMemory=512000\nNodeName=b Sockets=2 CoresPerSocket=8 RealMemory=1024\nNodeName=c CPUs=12 Sockets=2 CoresPerSocket=8 RealMemory=1024\nNodeName=d Procs=3 RealMemory=1024\n",
            "",
        );
        let cpus: Vec<u32> = nodes.sections.iter().map(|s| s.cpus).collect();
        assert_eq!(cpus, [128, 16, 12, 3]);
        assert_eq!(nodes.sections[0].memory, "500G");
        assert_eq!(nodes.sections[1].memory, "1G");
    }

    #[test]
    fn mem_spec_limit_is_taken_off() {
        let (nodes, notes, _) = import("NodeName=a CPUs=4 RealMemory=4096 MemSpecLimit=1024\n", "");
        assert_eq!(nodes.sections[0].memory, "3G");
        assert_eq!(notes.count(Kind::Changed), 1);
    }

    #[test]
    fn a_line_splits_where_gres_conf_gives_its_nodes_different_types() {
        let (nodes, _, origins) = import(
            "NodeName=tux[0-15] CPUs=32 RealMemory=64000 Gres=gpu:4 Features=ib\n",
            "NodeName=tux[0-7] Name=gpu Type=a100 Count=4\nNodeName=tux[8-15] Name=gpu Type=v100 Count=4\n",
        );
        assert_eq!(nodes.sections.len(), 2);
        assert_eq!(nodes.sections[0].names, "tux[0-7]");
        assert_eq!(nodes.sections[0].gpu_type.as_deref(), Some("a100"));
        assert_eq!(nodes.sections[1].names, "tux[8-15]");
        assert_eq!(nodes.sections[1].gpu_type.as_deref(), Some("v100"));
        assert_eq!(nodes.sections[1].features, ["ib"]);
        assert_eq!(
            origins.get("nodes[1]"),
            Some("part of NodeName=tux[0-15] (slurm.conf:1)")
        );
        assert_eq!(nodes.defined.len(), 16);
    }

    #[test]
    fn consecutive_alike_lines_become_one_table() {
        let (nodes, _, origins) = import(
            "NodeName=n1 NodeAddr=10.0.0.1 CPUs=8 RealMemory=4096 Gres=gpu:a100:8\nNodeName=n2 NodeAddr=10.0.0.2 CPUs=8 RealMemory=4096 Gres=gpu:a100:8\nNodeName=n3 CPUs=8 RealMemory=4096 Gres=gpu:a100:8\nNodeName=big CPUs=64 RealMemory=4096\nNodeName=n4 CPUs=8 RealMemory=4096 Gres=gpu:a100:8\n",
            "",
        );
        let names: Vec<&str> = nodes.sections.iter().map(|s| s.names.as_str()).collect();
        assert_eq!(names, ["n[1-3]", "big", "n4"]);
        assert_eq!(
            origins.get("nodes[0]"),
            Some("NodeName=n1 (slurm.conf:1) ... NodeName=n3 (slurm.conf:3): 3 lines")
        );
    }

    #[test]
    fn repeats_states_and_other_keys_are_noted() {
        let (nodes, notes, _) = import(
            "NodeName=a,b CPUs=2 RealMemory=10 State=DRAIN Weight=5 NodeAddr=x,y Frob=1\nNodeName=b CPUs=4 RealMemory=10\n",
            "",
        );
        assert_eq!(nodes.sections.len(), 1);
        assert_eq!(nodes.sections[0].names, "a,b");
        let text = notes.render(Kind::NotCarried, 1000).join("\n");
        for key in [
            "State=DRAIN",
            "Weight=5",
            "NodeAddr=x,y",
            "Frob=1",
            "node b is defined by an earlier line",
        ] {
            assert!(text.contains(key), "{key} missing in {text}");
        }
    }

    #[test]
    fn bad_lines_are_refused_with_their_line() {
        let lines = |t: &str| -> Vec<Vec<Pair>> {
            parse(&Arc::from("slurm.conf"), t)
                .unwrap()
                .into_iter()
                .filter_map(|i| match i {
                    Item::Pairs(p) => Some(p),
                    Item::Include { .. } => None,
                })
                .collect()
        };
        for (text, expected) in [
            ("NodeName=ALL CPUs=1\n", "reserved"),
            ("NodeName=n[1- CPUs=1\n", "NodeName=n[1-"),
            ("NodeName=a CPUs=x\n", "CPUs=x is not a whole number"),
            (
                "NodeName=a RealMemory=10 MemSpecLimit=10\n",
                "leaves no memory",
            ),
        ] {
            let sorted = sort(lines(text), &["NodeName"], &["NodeName"]);
            let records: Vec<&Record> = sorted.of("NodeName").collect();
            let err = read(
                &records,
                &GresConf::default(),
                &mut Notes::default(),
                &mut Origins::default(),
            )
            .unwrap_err();
            assert!(err.to_string().contains(expected), "{err}");
            assert!(err.to_string().starts_with("slurm.conf:1: "), "{err}");
        }
    }
}
