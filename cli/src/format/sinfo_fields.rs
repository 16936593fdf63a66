//! sinfo's fields (Slurm 22.05): each field's `-o` letter, `-O` names and
//! header, what it shows for a line of nodes, and which of its values keep
//! nodes (or partitions) on separate lines. Two fields are corral's own
//! (`GPUS(total/free)`, `GPU_HEALTH`): they have no letter, and only `corral
//! nodes` (not the `sinfo` link) accepts their names.
//!
//! Where corral has no such datum, a field shows what Slurm shows for a node
//! that does not report it (`FREE_MEM`, `CPU_LOAD` and `CLUSTER` are `N/A`),
//! or the value of a default Slurm node or partition: one socket and one
//! thread per core (so `S:C:T` is `1:CPUS:1`), no temporary disk, weight 1,
//! `ROOT` no, `OVERSUBSCRIBE` NO, `GROUPS` and `ALLOCNODES` all, `JOB_SIZE`
//! 1-infinite. `NODE_ADDR` is the host of the agent's step address (the node
//! name before it registers), `PORT` its port, `VERSION` the agent's version.
//! `USER` is the name recorded with the drain or down reason; `%U` adds the
//! uid this machine knows for that name, when it knows one.

use std::collections::BTreeMap;

use corral_state::node::{Availability, GpuHealth, Node, StateReason};
use corral_state::partition::{Partition, PreemptMode};
use corral_state::slurm::duration::{TimeLimit, format_elapsed};
use corral_state::slurm::hostlist;

use super::datetime::format_timestamp;
use super::node_state::{BaseState, SlurmState, free_gpus, slurm_state};

/// A field sinfo can print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Field {
    AllocMem,
    AllocNodes,
    Available,
    Cluster,
    Comment,
    Cpus,
    CpuLoad,
    CpusState,
    Cores,
    DefaultTime,
    Disk,
    Extra,
    Features,
    FeaturesAct,
    FreeMem,
    Groups,
    Gres,
    GresUsed,
    MaxCpusPerNode,
    Memory,
    NodeAddr,
    NodeAi,
    NodeAiot,
    NodeHost,
    NodeList,
    Nodes,
    Oversubscribe,
    Partition,
    PartitionName,
    Port,
    PreemptMode,
    PriorityJobFactor,
    PriorityTier,
    Reason,
    Root,
    Size,
    SocketCoreThread,
    Sockets,
    StateCompact,
    StateComplete,
    StateLong,
    Threads,
    Time,
    Timestamp,
    User,
    UserLong,
    Version,
    Weight,
    /// corral's: GPUs in all and GPUs free, `16/7`.
    Gpus,
    /// corral's: each GPU out of service, `5:xid79`, or `ok`.
    GpuHealth,
}

/// One row of the field table.
struct Def {
    field: Field,
    letter: Option<char>,
    names: &'static [&'static str],
    header: &'static str,
    slurm: bool,
}

const fn def(
    field: Field,
    letter: Option<char>,
    names: &'static [&'static str],
    header: &'static str,
) -> Def {
    Def {
        field,
        letter,
        names,
        header,
        slurm: true,
    }
}

use Field as F;

/// Every field: letter, `-O` names (lowercase), header.
const FIELDS: [Def; 50] = [
    def(F::AllocMem, None, &["allocmem"], "ALLOCMEM"),
    def(F::AllocNodes, Some('S'), &["allocnodes"], "ALLOCNODES"),
    def(F::Available, Some('a'), &["available"], "AVAIL"),
    def(F::Cluster, Some('V'), &["cluster"], "CLUSTER"),
    def(F::Comment, None, &["comment"], "COMMENT"),
    def(F::Cpus, Some('c'), &["cpus"], "CPUS"),
    def(F::CpuLoad, Some('O'), &["cpusload"], "CPU_LOAD"),
    def(F::CpusState, Some('C'), &["cpusstate"], "CPUS(A/I/O/T)"),
    def(F::Cores, Some('Y'), &["cores"], "CORES"),
    def(F::DefaultTime, Some('L'), &["defaulttime"], "DEFAULTTIME"),
    def(F::Disk, Some('d'), &["disk"], "TMP_DISK"),
    def(F::Extra, None, &["extra"], "EXTRA"),
    def(F::Features, Some('f'), &["features"], "AVAIL_FEATURES"),
    def(
        F::FeaturesAct,
        Some('b'),
        &["features_act"],
        "ACTIVE_FEATURES",
    ),
    def(F::FreeMem, Some('e'), &["freemem"], "FREE_MEM"),
    def(F::Groups, Some('g'), &["groups"], "GROUPS"),
    def(F::Gres, Some('G'), &["gres"], "GRES"),
    def(F::GresUsed, None, &["gresused"], "GRES_USED"),
    def(
        F::MaxCpusPerNode,
        Some('B'),
        &["maxcpuspernode"],
        "MAX_CPUS_PER_NODE",
    ),
    def(F::Memory, Some('m'), &["memory"], "MEMORY"),
    def(F::NodeAddr, Some('o'), &["nodeaddr"], "NODE_ADDR"),
    def(F::NodeAi, Some('A'), &["nodeai"], "NODES(A/I)"),
    def(F::NodeAiot, Some('F'), &["nodeaiot"], "NODES(A/I/O/T)"),
    def(F::NodeHost, Some('n'), &["nodehost"], "HOSTNAMES"),
    def(F::NodeList, Some('N'), &["nodelist"], "NODELIST"),
    def(F::Nodes, Some('D'), &["nodes"], "NODES"),
    def(
        F::Oversubscribe,
        Some('h'),
        &["oversubscribe", "share"],
        "OVERSUBSCRIBE",
    ),
    def(F::Partition, Some('P'), &["partition"], "PARTITION"),
    def(F::PartitionName, Some('R'), &["partitionname"], "PARTITION"),
    def(F::Port, None, &["port"], "PORT"),
    def(F::PreemptMode, Some('M'), &["preemptmode"], "PREEMPT_MODE"),
    def(
        F::PriorityJobFactor,
        Some('I'),
        &["priorityjobfactor"],
        "PRIO_JOB_FACTOR",
    ),
    def(F::PriorityTier, Some('p'), &["prioritytier"], "PRIO_TIER"),
    def(F::Reason, Some('E'), &["reason"], "REASON"),
    def(F::Root, Some('r'), &["root"], "ROOT"),
    def(F::Size, Some('s'), &["size"], "JOB_SIZE"),
    def(
        F::SocketCoreThread,
        Some('z'),
        &["socketcorethread"],
        "S:C:T",
    ),
    def(F::Sockets, Some('X'), &["sockets"], "SOCKETS"),
    def(F::StateCompact, Some('t'), &["statecompact"], "STATE"),
    def(F::StateComplete, None, &["statecomplete"], "STATECOMPLETE"),
    def(F::StateLong, Some('T'), &["statelong"], "STATE"),
    def(F::Threads, Some('Z'), &["threads"], "THREADS"),
    def(F::Time, Some('l'), &["time"], "TIMELIMIT"),
    def(F::Timestamp, Some('H'), &["timestamp"], "TIMESTAMP"),
    def(F::User, Some('u'), &["user"], "USER"),
    def(F::UserLong, Some('U'), &["userlong"], "USER"),
    def(F::Version, Some('v'), &["version"], "VERSION"),
    def(F::Weight, Some('w'), &["weight"], "WEIGHT"),
    Def {
        slurm: false,
        ..def(F::Gpus, None, &["gpus"], "GPUS(total/free)")
    },
    Def {
        slurm: false,
        ..def(F::GpuHealth, None, &["gpuhealth"], "GPU_HEALTH")
    },
];

/// The field of a `-o` letter.
pub fn letter(c: char) -> Option<Field> {
    FIELDS.iter().find(|d| d.letter == Some(c)).map(|d| d.field)
}

/// Every letter, in the order `-o %all` prints them: `a`-`z`, then `A`-`Z`.
pub fn all_letters() -> impl Iterator<Item = char> {
    ('a'..='z')
        .chain('A'..='Z')
        .filter(|c| letter(*c).is_some())
}

/// The Slurm field of a lowercase `-O` name.
pub fn name(name: &str) -> Option<Field> {
    FIELDS
        .iter()
        .find(|d| d.slurm && d.names.contains(&name))
        .map(|d| d.field)
}

/// The field of a lowercase `-O` name, corral's own fields included.
pub fn corral_name(name: &str) -> Option<Field> {
    FIELDS
        .iter()
        .find(|d| d.names.contains(&name))
        .map(|d| d.field)
}

/// What a uid lookup found for the users named in reasons (`%U`).
pub type UserIds = BTreeMap<String, u32>;

/// One line of output: nodes of a partition that show alike.
#[derive(Debug, Clone)]
pub struct Line<'a> {
    /// The partition (the first one that made the line when several merge).
    pub partition: &'a Partition,
    /// Its place among the partitions shown (sinfo's `#P` order).
    pub partition_index: usize,
    /// The nodes, in the order they joined.
    pub nodes: Vec<&'a Node>,
}

impl Line<'_> {
    /// The state of its first node (what sinfo prints and sorts by).
    pub fn state(&self) -> SlurmState {
        self.nodes
            .first()
            .map_or(SlurmState::NONE, |n| slurm_state(n))
    }
}

impl Field {
    fn def(self) -> Option<&'static Def> {
        FIELDS.iter().find(|d| d.field == self)
    }

    /// The header.
    pub fn header(self) -> &'static str {
        self.def().map_or("", |d| d.header)
    }

    /// Whether the field names the partition (so every partition gets a line,
    /// `0 n/a` when none of its nodes are shown).
    pub fn names_partition(self) -> bool {
        matches!(self, F::Partition | F::PartitionName)
    }

    /// What of `partition` must be equal for two partitions' nodes to share a
    /// line, if the field shows anything of it.
    pub fn partition_key(self, partition: &Partition) -> Option<String> {
        match self {
            F::Partition | F::PartitionName => Some(partition.name.clone()),
            F::Available => Some(partition.up.to_string()),
            F::Time => Some(format!("{:?}", partition.max_time)),
            F::DefaultTime => Some(format!("{:?}", partition.default_time)),
            F::PreemptMode => Some(format!("{:?}", partition.preempt_mode)),
            F::PriorityTier => Some(partition.priority_tier.to_string()),
            _ => None,
        }
    }

    /// What of `node` must be equal for two nodes to share a line, if the
    /// field shows something that varies per node (CPU and memory counts do
    /// not split lines: they print as a range, `32+`).
    pub fn node_key(self, node: &Node) -> Option<String> {
        match self {
            F::StateCompact | F::StateLong => Some(slurm_state(node).long()),
            F::StateComplete => Some(slurm_state(node).complete()),
            F::Features | F::FeaturesAct => Some(features(node)),
            F::Gres => Some(gres(node)),
            F::GresUsed => Some(gres_used(node)),
            F::Reason => Some(
                reason_of(node)
                    .map(|r| r.reason.clone())
                    .unwrap_or_default(),
            ),
            F::Timestamp => Some(
                reason_of(node)
                    .map(|r| r.since.as_secs().to_string())
                    .unwrap_or_default(),
            ),
            F::User | F::UserLong => {
                Some(reason_of(node).map(|r| r.by.clone()).unwrap_or_default())
            }
            F::NodeAddr | F::NodeHost => Some(node.name.clone()),
            F::AllocMem => Some(alloc_memory(node).to_string()),
            _ => None,
        }
    }

    /// The field's value for `line`, for a column `width` wide (`None`: as
    /// wide as the value).
    pub fn value(self, line: &Line, width: Option<usize>, users: &UserIds) -> String {
        let partition = line.partition;
        let first = line.nodes.first().copied();
        let last = line.nodes.last().copied();
        let reason = first.and_then(reason_of);
        let counts = Counts::of(&line.nodes);
        let cpus = MinMax::of(line.nodes.iter().map(|n| u64::from(n.cpus)));
        match self {
            F::AllocMem => last.map_or(0, alloc_memory).to_string(),
            F::AllocNodes | F::Groups => "all".into(),
            F::Available => (if partition.up { "up" } else { "down" }).into(),
            F::Cluster | F::CpuLoad | F::FreeMem => "N/A".into(),
            F::Comment | F::Extra => "(null)".into(),
            F::Cpus | F::Cores => cpus.with_units(),
            F::CpusState => counts.cpus(),
            F::DefaultTime => match partition.default_time {
                None => "n/a".into(),
                Some(limit) => time_limit(limit),
            },
            F::Disk => "0".into(),
            F::Features | F::FeaturesAct => first.map_or("(null)".into(), features),
            F::Gres => first.map_or("(null)".into(), gres),
            F::GresUsed => first.map_or("(null)".into(), gres_used),
            F::MaxCpusPerNode => "UNLIMITED".into(),
            F::Memory => MinMax::of(line.nodes.iter().map(|n| n.memory_mb)).plain(),
            F::NodeAddr => {
                hostlist::compress(&line.nodes.iter().copied().map(address).collect::<Vec<_>>())
            }
            F::NodeAi => format!("{}/{}", counts.nodes[0], counts.nodes[1]),
            F::NodeAiot => counts.nodes(),
            F::NodeHost | F::NodeList => names(line),
            F::Nodes => line.nodes.len().to_string(),
            F::Oversubscribe => "NO".into(),
            F::Partition => partition_name(partition, width),
            F::PartitionName => partition.name.clone(),
            F::Port => first.and_then(port).unwrap_or_else(|| "0".into()),
            F::PreemptMode => match partition.preempt_mode {
                PreemptMode::Off => "OFF",
                PreemptMode::Requeue => "REQUEUE",
                PreemptMode::Cancel => "CANCEL",
            }
            .into(),
            F::PriorityJobFactor => "1".into(),
            F::PriorityTier => partition.priority_tier.to_string(),
            F::Reason => reason.map_or("none".into(), |r| r.reason.clone()),
            F::Root => "no".into(),
            F::Size => "1-infinite".into(),
            F::SocketCoreThread => format!(
                "{0}:{1}:{0}",
                usize::from(first.is_some()),
                cpus.with_units()
            ),
            F::Sockets | F::Threads => usize::from(first.is_some()).to_string(),
            F::StateCompact | F::StateLong | F::StateComplete if first.is_none() => "n/a".into(),
            F::StateCompact => line.state().compact(),
            F::StateLong => line.state().long(),
            F::StateComplete => line.state().complete(),
            F::Time => time_limit(partition.max_time),
            F::Timestamp => reason.map_or("Unknown".into(), |r| format_timestamp(r.since)),
            F::User => reason.map_or("Unknown".into(), |r| r.by.clone()),
            F::UserLong => reason.map_or("Unknown".into(), |r| match users.get(&r.by) {
                Some(uid) => format!("{}({uid})", r.by),
                None => r.by.clone(),
            }),
            F::Version => first
                .and_then(|n| n.registration.as_ref())
                .map_or("N/A".into(), |r| r.agent_version.clone()),
            F::Weight => usize::from(first.is_some()).to_string(),
            F::Gpus => {
                let total: usize = line.nodes.iter().map(|n| n.gpus.len()).sum();
                let free: usize = line.nodes.iter().copied().map(free_gpus).sum();
                format!("{total}/{free}")
            }
            F::GpuHealth => gpu_health(&line.nodes),
        }
    }
}

/// Why a node is out of service: its drain reason (kept, as Slurm keeps a
/// node's reason, when the node later goes down), else why it is down.
pub fn reason_of(node: &Node) -> Option<&StateReason> {
    match (&node.drain, &node.availability) {
        (Some(why), _) | (None, Availability::Down(why)) => Some(why),
        (None, Availability::Up { .. }) => None,
    }
}

/// Node and CPU counts by allocated, idle, other (drained or down) and total.
struct Counts {
    nodes: [usize; 4],
    cpus: [u64; 4],
}

impl Counts {
    fn of(nodes: &[&Node]) -> Counts {
        let mut counts = Counts {
            nodes: [0; 4],
            cpus: [0; 4],
        };
        for node in nodes {
            let state = slurm_state(node);
            let total = u64::from(node.cpus);
            let used = total - u64::from(node.free_cpus());
            let out = state.drain || state.base == BaseState::Down;
            let kind = if matches!(state.base, BaseState::Allocated | BaseState::Mixed) {
                0
            } else if out {
                2
            } else {
                1
            };
            counts.nodes[kind] += 1;
            counts.nodes[3] += 1;
            counts.cpus[0] += used;
            counts.cpus[if out { 2 } else { 1 }] += total - used;
            counts.cpus[3] += total;
        }
        counts
    }

    fn nodes(&self) -> String {
        let [a, i, o, t] = self.nodes;
        format!("{a}/{i}/{o}/{t}")
    }

    fn cpus(&self) -> String {
        let [a, i, o, t] = self.cpus;
        format!("{a}/{i}/{o}/{t}")
    }
}

/// The smallest and largest of some counts (0 for none).
struct MinMax(u64, u64);

impl MinMax {
    fn of(values: impl Iterator<Item = u64>) -> MinMax {
        values
            .fold(None, |acc: Option<MinMax>, v| {
                Some(acc.map_or(MinMax(v, v), |MinMax(lo, hi)| MinMax(lo.min(v), hi.max(v))))
            })
            .unwrap_or(MinMax(0, 0))
    }

    /// `64`, or `32+` when they differ.
    fn plain(&self) -> String {
        self.show(|n| n.to_string())
    }

    /// The same with Slurm's exact units: `1K` for 1024.
    fn with_units(&self) -> String {
        self.show(units)
    }

    fn show(&self, print: impl Fn(u64) -> String) -> String {
        if self.0 == self.1 {
            print(self.1)
        } else {
            format!("{}+", print(self.0))
        }
    }
}

/// A count as Slurm's exact unit conversion prints it: divided by 1024 while
/// it divides evenly (`2048` is `2K`, `1536` stays).
fn units(mut n: u64) -> String {
    const SUFFIXES: [&str; 6] = ["", "K", "M", "G", "T", "P"];
    let mut unit = 0;
    while n >= 1024 && n.is_multiple_of(1024) && unit + 1 < SUFFIXES.len() {
        n /= 1024;
        unit += 1;
    }
    format!("{n}{}", SUFFIXES[unit])
}

/// A partition time limit as sinfo prints it: `infinite`, `1:00:00`, `7-00:00:00`.
fn time_limit(limit: TimeLimit) -> String {
    match limit {
        TimeLimit::Unlimited => "infinite".into(),
        TimeLimit::Seconds(secs) => format_elapsed(secs),
    }
}

/// The partition's name, `*` after the default one (in its last column when
/// the name fills the width).
fn partition_name(partition: &Partition, width: Option<usize>) -> String {
    let name = partition.name.clone();
    if !partition.is_default {
        return name;
    }
    match width {
        Some(width) if width > 0 && name.chars().count() >= width => {
            let mut cut: String = name.chars().take(width - 1).collect();
            cut.push('*');
            cut
        }
        _ => name + "*",
    }
}

/// The line's node names as a hostlist.
fn names(line: &Line) -> String {
    hostlist::compress(
        &line
            .nodes
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>(),
    )
}

/// Features, comma-separated; `(null)` for none.
pub fn features(node: &Node) -> String {
    if node.features.is_empty() {
        "(null)".into()
    } else {
        node.features.iter().cloned().collect::<Vec<_>>().join(",")
    }
}

/// GPUs per type, `gpu:h100:8` (`gpu:8` untyped); `(null)` without GPUs.
pub fn gres(node: &Node) -> String {
    let mut by_type: BTreeMap<&str, usize> = BTreeMap::new();
    for gpu in &node.gpus {
        *by_type.entry(gpu.gpu_type.as_str()).or_default() += 1;
    }
    if by_type.is_empty() {
        return "(null)".into();
    }
    by_type
        .iter()
        .map(|(kind, count)| gpu_gres(kind, &count.to_string()))
        .collect::<Vec<_>>()
        .join(",")
}

/// GPUs in use per type with their indexes, `gpu:h100:2(IDX:0-1)`.
fn gres_used(node: &Node) -> String {
    let mut by_type: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for gpu in &node.gpus {
        let used = by_type.entry(gpu.gpu_type.as_str()).or_default();
        if gpu.allocated_to.is_some() {
            used.push(gpu.index);
        }
    }
    if by_type.is_empty() {
        return "(null)".into();
    }
    by_type
        .iter()
        .map(|(kind, used)| {
            let indexes = if used.is_empty() {
                "N/A".to_string()
            } else {
                let names: Vec<String> = used.iter().map(u32::to_string).collect();
                hostlist::compress(&names)
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_string()
            };
            gpu_gres(kind, &format!("{}(IDX:{indexes})", used.len()))
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn gpu_gres(kind: &str, count: &str) -> String {
    if kind.is_empty() {
        format!("gpu:{count}")
    } else {
        format!("gpu:{kind}:{count}")
    }
}

/// `ok`, `-` without GPUs, or each GPU out of service as `INDEX:xidN`,
/// `INDEX:fault` or `INDEX:drain` (prefixed `NODE:` when the line holds
/// several nodes).
fn gpu_health(nodes: &[&Node]) -> String {
    let mut problems = Vec::new();
    for node in nodes {
        for gpu in &node.gpus {
            let problem = match (&gpu.health, &gpu.drain) {
                (GpuHealth::Unhealthy { xid: Some(xid), .. }, _) => {
                    format!("{}:xid{xid}", gpu.index)
                }
                (GpuHealth::Unhealthy { xid: None, .. }, _) => format!("{}:fault", gpu.index),
                (GpuHealth::Healthy, Some(_)) => format!("{}:drain", gpu.index),
                (GpuHealth::Healthy, None) => continue,
            };
            problems.push(if nodes.len() > 1 {
                format!("{}:{problem}", node.name)
            } else {
                problem
            });
        }
    }
    if !problems.is_empty() {
        problems.join(",")
    } else if nodes.iter().all(|n| n.gpus.is_empty()) {
        "-".into()
    } else {
        "ok".into()
    }
}

/// Memory held by the node's live attempts, MiB.
fn alloc_memory(node: &Node) -> u64 {
    node.memory_mb - node.free_memory_mb()
}

/// The host of the agent's step address, else the node's name.
fn address(node: &Node) -> String {
    node.registration
        .as_ref()
        .and_then(|r| r.step_address.as_deref())
        .and_then(|a| a.rsplit_once(':'))
        .map_or_else(
            || node.name.clone(),
            |(host, _)| host.trim_matches(['[', ']']).to_string(),
        )
}

/// The port of the agent's step address.
fn port(node: &Node) -> Option<String> {
    let address = node.registration.as_ref()?.step_address.as_deref()?;
    address.rsplit_once(':').map(|(_, port)| port.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::test_jobs::{nodes, partitions, scenario};

    #[test]
    fn letters_and_names_map_to_the_same_fields() {
        assert_eq!(letter('P'), Some(Field::Partition));
        assert_eq!(letter('G'), Some(Field::Gres));
        assert_eq!(letter('i'), None);
        assert_eq!(name("share"), Some(Field::Oversubscribe));
        assert_eq!(name("gpus"), None);
        assert_eq!(corral_name("gpus"), Some(Field::Gpus));
        let all: String = all_letters().collect();
        assert_eq!(all, "abcdefghlmnoprstuvwzABCDEFGHILMNOPRSTUVXYZ");
    }

    #[test]
    fn values_for_a_line_of_two_nodes() {
        let state = scenario();
        let all = nodes(&state);
        let parts = partitions(&state);
        let line = Line {
            partition: &parts[0],
            partition_index: 0,
            nodes: vec![&all[0], &all[3]],
        };
        let users = UserIds::new();
        let shown = |f: Field| f.value(&line, None, &users);
        assert_eq!(shown(Field::NodeList), "n[1,4]");
        assert_eq!(shown(Field::Partition), "gpu*");
        assert_eq!(shown(Field::StateCompact), "alloc");
        assert_eq!(shown(Field::StateLong), "allocated");
        assert_eq!(shown(Field::Gres), "gpu:h100:8");
        assert_eq!(shown(Field::Gpus), "16/0");
        assert_eq!(shown(Field::NodeAiot), "2/0/0/2");
        assert_eq!(shown(Field::Time), "1-00:00:00");
        assert_eq!(shown(Field::Reason), "none");
        assert_eq!(shown(Field::Timestamp), "Unknown");
        assert_eq!(shown(Field::SocketCoreThread), "1:64:1");
        assert_eq!(shown(Field::GresUsed), "gpu:h100:8(IDX:0-7)");
        assert_eq!(Field::Partition.value(&line, Some(3), &users), "gp*");
    }

    #[test]
    fn values_for_a_line_without_nodes() {
        let state = scenario();
        let parts = partitions(&state);
        let line = Line {
            partition: &parts[0],
            partition_index: 0,
            nodes: Vec::new(),
        };
        let users = UserIds::new();
        let shown = |f: Field| f.value(&line, None, &users);
        assert_eq!(shown(Field::StateCompact), "n/a");
        assert_eq!(shown(Field::NodeList), "");
        assert_eq!(shown(Field::Nodes), "0");
        assert_eq!(shown(Field::CpusState), "0/0/0/0");
    }

    #[test]
    fn reasons_users_and_gpu_health_of_a_down_node() {
        let state = scenario();
        let all = nodes(&state);
        let parts = partitions(&state);
        let line = |n: usize| Line {
            partition: &parts[0],
            partition_index: 0,
            nodes: vec![&all[n]],
        };
        let mut users = UserIds::new();
        let down = line(1);
        let by = reason_of(&all[1]).expect("down").by.clone();
        assert_eq!(Field::Reason.value(&down, None, &users), "agent lost");
        assert_eq!(Field::User.value(&down, None, &users), by);
        users.insert(by.clone(), 1000);
        assert_eq!(
            Field::UserLong.value(&down, None, &users),
            format!("{by}(1000)")
        );
        assert_eq!(
            Field::Timestamp.value(&down, None, &users),
            "2026-11-21T08:15:00"
        );
        assert_eq!(Field::CpusState.value(&down, None, &users), "0/0/64/64");
        assert_eq!(Field::GpuHealth.value(&line(2), None, &users), "5:xid79");
        assert_eq!(Field::GpuHealth.value(&line(0), None, &users), "ok");
    }

    #[test]
    fn counts_with_units() {
        assert_eq!(units(64), "64");
        assert_eq!(units(2048), "2K");
        assert_eq!(units(1536), "1536");
        assert_eq!(MinMax::of([32, 64].into_iter()).with_units(), "32+");
    }
}
