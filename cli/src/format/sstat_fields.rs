//! sstat's fields: the names and widths of Slurm 22.05's table (a prefix picks
//! the first name it starts, case-insensitively, as sstat matches), the
//! figures of one step summed from its tasks' samples (average, maximum with
//! its node and task, minimum CPU with its node and task, total), and each
//! cell as sstat prints it (`convert_num_unit` with exact units, `_elapsed_time`,
//! the TRES strings). GPU use appears where Slurm's gpu/nvml plugin puts it:
//! `gres/gpumem` and `gres/gpuutil` in the TRESUsageIn fields.

use std::collections::BTreeSet;

use corral_proto::step::{GpuUsage, TaskUsage};
use corral_state::slurm::hostlist;

/// One field of sstat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatField {
    AveCpu,
    AveCpuFreq,
    AveDiskRead,
    AveDiskWrite,
    AvePages,
    AveRss,
    AveVmSize,
    ConsumedEnergy,
    ConsumedEnergyRaw,
    JobId,
    Max(Measure),
    MaxNode(Measure),
    MaxTask(Measure),
    MinCpu,
    MinCpuNode,
    MinCpuTask,
    Nodelist,
    NTasks,
    Pids,
    ReqCpuFreq,
    /// TRESUsageIn/Out Ave, Max, MaxNode, MaxTask, Min, MinNode, MinTask, Tot.
    Tres(Direction, TresFigure),
}

/// What a Max field measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    DiskRead,
    DiskWrite,
    Pages,
    Rss,
    VmSize,
}

/// TRESUsageIn or TRESUsageOut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    In,
    Out,
}

/// Which figure of a TRES string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TresFigure {
    Ave,
    Max,
    MaxNode,
    MaxTask,
    Min,
    MinNode,
    MinTask,
    Tot,
}

use StatField as F;

/// sstat's table, in its order (which prefixes resolve against), with widths.
const FIELDS: &[(&str, i32, StatField)] = &[
    ("AveCPU", 10, F::AveCpu),
    ("AveCPUFreq", 10, F::AveCpuFreq),
    ("AveDiskRead", 12, F::AveDiskRead),
    ("AveDiskWrite", 12, F::AveDiskWrite),
    ("AvePages", 10, F::AvePages),
    ("AveRSS", 10, F::AveRss),
    ("AveVMSize", 10, F::AveVmSize),
    ("ConsumedEnergy", 14, F::ConsumedEnergy),
    ("ConsumedEnergyRaw", 17, F::ConsumedEnergyRaw),
    ("JobID", -12, F::JobId),
    ("MaxDiskRead", 12, F::Max(Measure::DiskRead)),
    ("MaxDiskReadNode", 15, F::MaxNode(Measure::DiskRead)),
    ("MaxDiskReadTask", 15, F::MaxTask(Measure::DiskRead)),
    ("MaxDiskWrite", 12, F::Max(Measure::DiskWrite)),
    ("MaxDiskWriteNode", 16, F::MaxNode(Measure::DiskWrite)),
    ("MaxDiskWriteTask", 16, F::MaxTask(Measure::DiskWrite)),
    ("MaxPages", 8, F::Max(Measure::Pages)),
    ("MaxPagesNode", 12, F::MaxNode(Measure::Pages)),
    ("MaxPagesTask", 14, F::MaxTask(Measure::Pages)),
    ("MaxRSS", 10, F::Max(Measure::Rss)),
    ("MaxRSSNode", 10, F::MaxNode(Measure::Rss)),
    ("MaxRSSTask", 10, F::MaxTask(Measure::Rss)),
    ("MaxVMSize", 10, F::Max(Measure::VmSize)),
    ("MaxVMSizeNode", 14, F::MaxNode(Measure::VmSize)),
    ("MaxVMSizeTask", 14, F::MaxTask(Measure::VmSize)),
    ("MinCPU", 10, F::MinCpu),
    ("MinCPUNode", 10, F::MinCpuNode),
    ("MinCPUTask", 10, F::MinCpuTask),
    ("Nodelist", 20, F::Nodelist),
    ("NTasks", 8, F::NTasks),
    ("Pids", 20, F::Pids),
    ("ReqCPUFreq", 10, F::ReqCpuFreq),
    ("ReqCPUFreqMin", 13, F::ReqCpuFreq),
    ("ReqCPUFreqMax", 13, F::ReqCpuFreq),
    ("ReqCPUFreqGov", 13, F::ReqCpuFreq),
    (
        "TRESUsageInAve",
        14,
        F::Tres(Direction::In, TresFigure::Ave),
    ),
    (
        "TRESUsageInMax",
        14,
        F::Tres(Direction::In, TresFigure::Max),
    ),
    (
        "TRESUsageInMaxNode",
        18,
        F::Tres(Direction::In, TresFigure::MaxNode),
    ),
    (
        "TRESUsageInMaxTask",
        18,
        F::Tres(Direction::In, TresFigure::MaxTask),
    ),
    (
        "TRESUsageInMin",
        14,
        F::Tres(Direction::In, TresFigure::Min),
    ),
    (
        "TRESUsageInMinNode",
        18,
        F::Tres(Direction::In, TresFigure::MinNode),
    ),
    (
        "TRESUsageInMinTask",
        18,
        F::Tres(Direction::In, TresFigure::MinTask),
    ),
    (
        "TRESUsageInTot",
        14,
        F::Tres(Direction::In, TresFigure::Tot),
    ),
    (
        "TRESUsageOutAve",
        15,
        F::Tres(Direction::Out, TresFigure::Ave),
    ),
    (
        "TRESUsageOutMax",
        15,
        F::Tres(Direction::Out, TresFigure::Max),
    ),
    (
        "TRESUsageOutMaxNode",
        19,
        F::Tres(Direction::Out, TresFigure::MaxNode),
    ),
    (
        "TRESUsageOutMaxTask",
        19,
        F::Tres(Direction::Out, TresFigure::MaxTask),
    ),
    (
        "TRESUsageOutMin",
        15,
        F::Tres(Direction::Out, TresFigure::Min),
    ),
    (
        "TRESUsageOutMinNode",
        19,
        F::Tres(Direction::Out, TresFigure::MinNode),
    ),
    (
        "TRESUsageOutMinTask",
        19,
        F::Tres(Direction::Out, TresFigure::MinTask),
    ),
    (
        "TRESUsageOutTot",
        15,
        F::Tres(Direction::Out, TresFigure::Tot),
    ),
];

/// sstat's default fields (`STAT_FIELDS`).
pub const DEFAULT_FIELDS: &str = "jobid,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,maxrss,maxrssnode,maxrsstask,averss,maxpages,maxpagesnode,maxpagestask,avepages,mincpu,mincpunode,mincputask,avecpu,ntasks,avecpufreq,reqcpufreqmin,reqcpufreqmax,reqcpufreqgov,consumedenergy,maxdiskread,maxdiskreadnode,maxdiskreadtask,avediskread,maxdiskwrite,maxdiskwritenode,maxdiskwritetask,avediskwrite,tresusageinave,tresusageinmax,tresusageinmaxn,tresusageinmaxt,tresusageinmin,tresusageinminn,tresusageinmint,tresusageintot,tresusageoutave,tresusageoutmax,tresusageoutmaxn,tresusageoutmaxt,tresusageoutmin,tresusageoutminn,tresusageoutmint,tresusageouttot";

/// sstat's `-i/--pidformat` fields.
pub const PID_FIELDS: &str = "jobid,nodelist,pids";

/// Every field name, for `--helpformat`.
pub fn field_names() -> impl Iterator<Item = &'static str> {
    FIELDS.iter().map(|(name, _, _)| *name)
}

/// The field `prefix` names, with its name and width (`%N` overrides the
/// width): the first in sstat's table that starts with it.
pub fn lookup(spec: &str) -> Result<(&'static str, i32, StatField), String> {
    let (prefix, width) = match spec.split_once('%') {
        Some((prefix, width)) => (prefix, width.parse::<i32>().ok().filter(|w| *w != 0)),
        None => (spec, None),
    };
    let lower = prefix.trim().to_ascii_lowercase();
    FIELDS
        .iter()
        .find(|(name, _, _)| !lower.is_empty() && name.to_ascii_lowercase().starts_with(&lower))
        .map(|(name, default, field)| (*name, width.unwrap_or(*default), *field))
        .ok_or_else(|| format!("Invalid field requested: \"{}\"", prefix.trim()))
}

/// One task's sample, with its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSample {
    /// The node.
    pub node: String,
    /// What the task uses.
    pub usage: TaskUsage,
}

/// One step as sstat shows it: its tasks' samples and the job's GPUs on its
/// nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepStat {
    /// `--noconvert`: sizes in plain bytes, no unit letters.
    pub raw: bool,
    /// `N.batch` or `N.S`.
    pub id: String,
    /// Its tasks, in rank order.
    pub tasks: Vec<TaskSample>,
    /// The job's GPUs on each node the step runs on.
    pub gpus: Vec<(String, Vec<GpuUsage>)>,
}

/// A measure of one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Tres {
    /// CPU time, seconds.
    Cpu,
    /// Bytes read and written.
    DiskIn,
    DiskOut,
    /// GPU memory in use on the task's node (MiB), and mean utilisation (%).
    GpuMem,
    GpuUtil,
    /// Resident memory, bytes.
    Mem,
    /// Major page faults.
    Pages,
    /// Virtual memory, bytes.
    Vmem,
}

impl StepStat {
    fn value(&self, task: &TaskSample, what: Tres) -> Option<u64> {
        let u = &task.usage;
        Some(match what {
            Tres::Cpu => u.cpu_ms / 1000,
            Tres::DiskIn => u.read_bytes,
            Tres::DiskOut => u.write_bytes,
            Tres::Mem => u.rss_kib.saturating_mul(1024),
            Tres::Vmem => u.vmsize_kib.saturating_mul(1024),
            Tres::Pages => u.major_faults,
            Tres::GpuMem | Tres::GpuUtil => {
                let gpus = &self.gpus.iter().find(|(n, _)| *n == task.node)?.1;
                if what == Tres::GpuMem {
                    gpus.iter()
                        .filter_map(|g| g.memory_used_mb)
                        .reduce(u64::saturating_add)?
                } else {
                    let utils: Vec<u64> = gpus
                        .iter()
                        .filter_map(|g| g.utilization_pct.map(u64::from))
                        .collect();
                    utils.iter().sum::<u64>()
                        / u64::try_from(utils.len()).ok().filter(|n| *n > 0)?
                }
            }
        })
    }

    /// The task with the largest (or smallest) `what`, and the value.
    fn extreme(&self, what: Tres, largest: bool) -> Option<(&TaskSample, u64)> {
        let mut best: Option<(&TaskSample, u64)> = None;
        for task in &self.tasks {
            let Some(value) = self.value(task, what) else {
                continue;
            };
            let better = best.is_none_or(|(_, b)| if largest { value > b } else { value < b });
            if better {
                best = Some((task, value));
            }
        }
        best
    }

    /// The values summed or averaged: one per task, but one per node for the
    /// GPUs (every task of a node shows the node's GPUs).
    fn values(&self, what: Tres) -> Vec<u64> {
        let per_node = matches!(what, Tres::GpuMem | Tres::GpuUtil);
        let mut seen = BTreeSet::new();
        self.tasks
            .iter()
            .filter(|t| !per_node || seen.insert(t.node.as_str()))
            .filter_map(|t| self.value(t, what))
            .collect()
    }

    fn total(&self, what: Tres) -> Option<u64> {
        self.values(what).into_iter().reduce(u64::saturating_add)
    }

    fn average(&self, what: Tres) -> Option<u64> {
        let values = self.values(what);
        let count = u64::try_from(values.len()).ok().filter(|n| *n > 0)?;
        Some(values.iter().fold(0u64, |s, v| s.saturating_add(*v)) / count)
    }

    /// A size as sstat prints it: `show`'s units, or plain under `--noconvert`.
    fn size(&self, value: u64, show: fn(u64) -> String) -> String {
        if self.raw {
            value.to_string()
        } else {
            show(value)
        }
    }

    /// The cell of `field` (`None`: Slurm's blank).
    pub fn cell(&self, field: StatField) -> Option<String> {
        let max = |what| self.extreme(what, true);
        match field {
            F::JobId => Some(self.id.clone()),
            F::AveCpu => self.average(Tres::Cpu).map(elapsed),
            F::MinCpu => self.extreme(Tres::Cpu, false).map(|(_, v)| elapsed(v)),
            F::MinCpuNode => self.extreme(Tres::Cpu, false).map(|(t, _)| t.node.clone()),
            F::MinCpuTask => self
                .extreme(Tres::Cpu, false)
                .map(|(t, _)| t.usage.rank.to_string()),
            F::AveRss => self.average(Tres::Mem).map(|v| self.size(v, exact_units)),
            F::AveVmSize => self.average(Tres::Vmem).map(|v| self.size(v, exact_units)),
            F::AvePages => self.average(Tres::Pages).map(|v| self.size(v, exact_units)),
            F::AveDiskRead => self
                .average(Tres::DiskIn)
                .map(|v| self.size(v, small_units)),
            F::AveDiskWrite => self
                .average(Tres::DiskOut)
                .map(|v| self.size(v, small_units)),
            F::Max(measure) => {
                let (what, show): (Tres, fn(u64) -> String) = match measure {
                    Measure::DiskRead => (Tres::DiskIn, small_units),
                    Measure::DiskWrite => (Tres::DiskOut, small_units),
                    Measure::Pages => (Tres::Pages, exact_units),
                    Measure::Rss => (Tres::Mem, exact_units),
                    Measure::VmSize => (Tres::Vmem, exact_units),
                };
                max(what).map(|(_, v)| self.size(v, show))
            }
            F::MaxNode(measure) => max(tres_of(measure)).map(|(t, _)| t.node.clone()),
            F::MaxTask(measure) => max(tres_of(measure)).map(|(t, _)| t.usage.rank.to_string()),
            F::NTasks => Some(self.tasks.len().to_string()),
            F::Nodelist => {
                let nodes: BTreeSet<&str> = self.tasks.iter().map(|t| t.node.as_str()).collect();
                let nodes: Vec<&str> = nodes.into_iter().collect();
                Some(hostlist::compress(&nodes))
            }
            F::Pids => {
                let pids: Vec<String> = self
                    .tasks
                    .iter()
                    .flat_map(|t| t.usage.pids.iter().map(u32::to_string))
                    .collect();
                Some(pids.join(","))
            }
            // corral sets no CPU frequency: Slurm's word for none requested.
            F::ReqCpuFreq => Some("Unknown".into()),
            // Not measured: no CPU frequency or energy sampling in corral.
            F::AveCpuFreq | F::ConsumedEnergy | F::ConsumedEnergyRaw => None,
            F::Tres(direction, figure) => Some(self.tres(direction, figure)),
        }
    }

    /// A TRES string: `cpu=00:00:05,fs/disk=2332,gres/gpumem=1024M,...`.
    fn tres(&self, direction: Direction, figure: TresFigure) -> String {
        let names: &[(&str, Tres)] = match direction {
            Direction::In => &[
                ("cpu", Tres::Cpu),
                ("fs/disk", Tres::DiskIn),
                ("gres/gpumem", Tres::GpuMem),
                ("gres/gpuutil", Tres::GpuUtil),
                ("mem", Tres::Mem),
                ("pages", Tres::Pages),
                ("vmem", Tres::Vmem),
            ],
            Direction::Out => &[("fs/disk", Tres::DiskOut)],
        };
        let mut parts = Vec::new();
        for (name, what) in names {
            let shown = match figure {
                TresFigure::Ave => self.average(*what).map(|v| tres_value(*what, v)),
                TresFigure::Tot => self.total(*what).map(|v| tres_value(*what, v)),
                TresFigure::Max => self.extreme(*what, true).map(|(_, v)| tres_value(*what, v)),
                TresFigure::Min => self
                    .extreme(*what, false)
                    .map(|(_, v)| tres_value(*what, v)),
                TresFigure::MaxNode => self.extreme(*what, true).map(|(t, _)| t.node.clone()),
                TresFigure::MinNode => self.extreme(*what, false).map(|(t, _)| t.node.clone()),
                TresFigure::MaxTask => self
                    .extreme(*what, true)
                    .map(|(t, _)| t.usage.rank.to_string()),
                TresFigure::MinTask => self
                    .extreme(*what, false)
                    .map(|(t, _)| t.usage.rank.to_string()),
            };
            if let Some(shown) = shown {
                parts.push(format!("{name}={shown}"));
            }
        }
        parts.join(",")
    }
}

fn tres_of(measure: Measure) -> Tres {
    match measure {
        Measure::DiskRead => Tres::DiskIn,
        Measure::DiskWrite => Tres::DiskOut,
        Measure::Pages => Tres::Pages,
        Measure::Rss => Tres::Mem,
        Measure::VmSize => Tres::Vmem,
    }
}

fn tres_value(what: Tres, value: u64) -> String {
    match what {
        Tres::Cpu => elapsed(value),
        Tres::Mem | Tres::Vmem => exact_units(value),
        Tres::GpuMem => exact_units(value.saturating_mul(1024 * 1024)),
        Tres::DiskIn | Tres::DiskOut | Tres::Pages | Tres::GpuUtil => value.to_string(),
    }
}

/// Slurm's `_elapsed_time(secs, 0)`: `00:MM:SS`, `HH:MM:SS` or `D-HH:MM:SS`.
pub fn elapsed(secs: u64) -> String {
    let (days, hours, minutes, seconds) = (
        secs / 86_400,
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60,
    );
    if days > 0 {
        format!("{days}-{hours:02}:{minutes:02}:{seconds:02}")
    } else if hours > 0 {
        format!("{hours:02}:{minutes:02}:{seconds:02}")
    } else {
        format!("00:{minutes:02}:{seconds:02}")
    }
}

/// Slurm's `convert_num_unit` with exact units from bytes: divided by 1024
/// while the value stays a multiple of 512 (`2.5G` counts as exact), printed
/// whole or with two decimals, with its unit letter.
pub fn exact_units(value: u64) -> String {
    if value == 0 {
        return "0".into();
    }
    let units = ['\0', 'K', 'M', 'G', 'T', 'P'];
    let mut num = value as f64;
    let mut unit = 0;
    while num >= 1024.0 && (num as u64).is_multiple_of(512) && unit + 1 < units.len() {
        num /= 1024.0;
        unit += 1;
    }
    let letter = if unit == 0 {
        String::new()
    } else {
        units[unit].to_string()
    };
    if num.fract() == 0.0 {
        format!("{}{letter}", num as u64)
    } else {
        format!("{num:.2}{letter}")
    }
}

/// sstat's `_print_small_double` for bytes: exact units above 1, else `0`.
fn small_units(value: u64) -> String {
    if value > 1 {
        exact_units(value)
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(node: &str, rank: u32, cpu_s: u64, rss_kib: u64) -> TaskSample {
        TaskSample {
            node: node.into(),
            usage: TaskUsage {
                rank,
                local: 0,
                leader: 100 + rank,
                pids: vec![100 + rank],
                cpu_ms: cpu_s * 1000 + 400,
                rss_kib,
                vmsize_kib: rss_kib * 4,
                major_faults: 2,
                read_bytes: 2332,
                write_bytes: 0,
            },
        }
    }

    fn step() -> StepStat {
        StepStat {
            raw: false,
            id: "12.0".into(),
            tasks: vec![task("n1", 0, 65, 2636), task("n2", 1, 5, 4096)],
            gpus: vec![
                (
                    "n1".into(),
                    vec![
                        GpuUsage {
                            index: 0,
                            utilization_pct: Some(90),
                            memory_used_mb: Some(1024),
                        },
                        GpuUsage {
                            index: 1,
                            utilization_pct: Some(70),
                            memory_used_mb: Some(1024),
                        },
                    ],
                ),
                ("n2".into(), vec![]),
            ],
        }
    }

    #[test]
    fn names_resolve_as_sstat_matches_them() {
        assert_eq!(lookup("jobid").unwrap().0, "JobID");
        assert_eq!(lookup("maxrss").unwrap().0, "MaxRSS");
        assert_eq!(lookup("tresusageinmaxn").unwrap().0, "TRESUsageInMaxNode");
        assert_eq!(lookup("ave").unwrap().0, "AveCPU");
        assert_eq!(lookup("MaxRSS%20").unwrap().1, 20);
        assert_eq!(
            lookup("bogus").unwrap_err(),
            "Invalid field requested: \"bogus\""
        );
        for name in DEFAULT_FIELDS.split(',').chain(PID_FIELDS.split(',')) {
            assert!(lookup(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn cells_as_sstat_prints_them() {
        let step = step();
        let cell = |name: &str| step.cell(lookup(name).unwrap().2);
        assert_eq!(cell("JobID").as_deref(), Some("12.0"));
        assert_eq!(cell("MaxRSS").as_deref(), Some("4M"));
        assert_eq!(cell("MaxRSSNode").as_deref(), Some("n2"));
        assert_eq!(cell("MaxRSSTask").as_deref(), Some("1"));
        assert_eq!(cell("AveRSS").as_deref(), Some("3366K"));
        assert_eq!(cell("MinCPU").as_deref(), Some("00:00:05"));
        assert_eq!(cell("MinCPUNode").as_deref(), Some("n2"));
        assert_eq!(cell("AveCPU").as_deref(), Some("00:00:35"));
        assert_eq!(cell("NTasks").as_deref(), Some("2"));
        assert_eq!(cell("Nodelist").as_deref(), Some("n[1-2]"));
        assert_eq!(cell("Pids").as_deref(), Some("100,101"));
        assert_eq!(cell("MaxDiskRead").as_deref(), Some("2332"));
        assert_eq!(cell("AveCPUFreq"), None);
        assert_eq!(cell("ReqCPUFreqMin").as_deref(), Some("Unknown"));
        assert_eq!(
            cell("TRESUsageInMax").as_deref(),
            Some(
                "cpu=00:01:05,fs/disk=2332,gres/gpumem=2G,gres/gpuutil=80,mem=4M,pages=2,vmem=16M"
            )
        );
        assert_eq!(
            cell("TRESUsageInMaxNode").as_deref(),
            Some("cpu=n1,fs/disk=n1,gres/gpumem=n1,gres/gpuutil=n1,mem=n2,pages=n1,vmem=n2")
        );
        assert_eq!(cell("TRESUsageOutTot").as_deref(), Some("fs/disk=0"));
    }

    #[test]
    fn a_nodes_gpus_count_once_however_many_tasks_it_runs() {
        let mut step = step();
        step.tasks.push(task("n1", 2, 1, 1024));
        let cell = |name: &str| step.cell(lookup(name).unwrap().2);
        // n1's two GPUs, 1 GiB each: 2G in all, not once per task.
        assert!(cell("TRESUsageInTot").unwrap().contains("gres/gpumem=2G,"));
        step.raw = true;
        assert_eq!(
            step.cell(lookup("MaxRSS").unwrap().2).as_deref(),
            Some("4194304")
        );
    }

    #[test]
    fn units_and_times() {
        assert_eq!(exact_units(0), "0");
        assert_eq!(exact_units(2332), "2332");
        assert_eq!(exact_units(2_699_264), "2636K");
        assert_eq!(exact_units(2_684_354_560), "2.50G");
        assert_eq!(elapsed(5), "00:00:05");
        assert_eq!(elapsed(3725), "01:02:05");
        assert_eq!(elapsed(90_061), "1-01:01:01");
    }
}
