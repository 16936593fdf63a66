//! Job steps (`srun` inside an allocation): the messages between `srun` and the
//! agent of its node (a Unix socket; the agent checks the caller's uid), and
//! between that agent, which coordinates the step, and the agents of the
//! step's other nodes (QUIC with mutual TLS, agent certificates both ends).
//!
//! `srun` and `salloc` on a login node reach the batch host's agent over the
//! same QUIC channel with a user certificate: steps into a running job
//! (`srun --jobid`), and the hold on an allocation they created, whose batch
//! script only waits for them (`Attach`, `AwaitRelease`).
//!
//! Steps never pass through the controllers: a leader failover does not touch
//! a running step or its output, as in Slurm, where `srun` talks to `slurmd`
//! directly. Frames are the agent channel's ([`crate::agent::write_frame`]).

use std::collections::BTreeMap;

use corral_state::ids::{AttemptNumber, JobId};
use corral_state::job::ExitStatus;
use corral_state::slurm::signal::Signal;
use serde::{Deserialize, Serialize};

/// The environment variable naming the agent's step socket inside a job.
pub const STEP_SOCKET_ENV: &str = "CORRAL_STEP_SOCKET";

/// The command the batch script of an allocation `srun` or `salloc` created
/// runs (`corral allocation-hold`): the CLI writes it, and an agent holds only
/// jobs whose script runs it.
pub const ALLOCATION_HOLD_COMMAND: &str = "corral allocation-hold";

/// The ALPN protocol of the agent-to-agent step channel.
pub const STEP_ALPN: &[u8] = b"corral-step/1";

/// What `srun` asked for; the coordinating agent lays the step out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepShapeRequest {
    /// `-N/--nodes`: the step runs on the allocation's first N nodes.
    pub nodes: Option<u32>,
    /// `-n/--ntasks`.
    pub ntasks: Option<u32>,
    /// `--ntasks-per-node`.
    pub ntasks_per_node: Option<u32>,
    /// `-c/--cpus-per-task`: how many tasks a node holds when `-n` spreads them
    /// (the job's value when `None`).
    pub cpus_per_task: Option<u32>,
    /// `-w/--nodelist`: these nodes of the allocation (all of them must be).
    pub nodelist: Option<Vec<String>>,
    /// `-m/--distribution`; without, Slurm's default: cyclic when the step
    /// has no more tasks than nodes, else block.
    pub distribution: Option<TaskDistribution>,
    /// `--gpus-per-task` (the job's when `None`).
    pub gpus_per_task: Option<u32>,
}

/// `srun` → its node's agent: run a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrunRequest {
    /// `SLURM_JOB_ID` of the allocation `srun` runs in.
    pub job: JobId,
    /// `CORRAL_ATTEMPT` of the job script that runs `srun`: a step of an attempt
    /// that has ended is refused rather than run in the next one.
    pub attempt: Option<AttemptNumber>,
    /// The command and its arguments (the program is looked up in the task's `PATH`).
    pub argv: Vec<String>,
    /// `srun`'s environment, which the tasks get (`--export`), before the
    /// agent sets the step's and the task's `SLURM_*` variables.
    pub env: BTreeMap<String, String>,
    /// The tasks' working directory.
    pub workdir: String,
    /// Nodes and tasks.
    pub shape: StepShapeRequest,
    /// Which tasks read `srun`'s standard input (`--input`), which follows
    /// the request as `Stdin` frames and one `StdinEnd`.
    pub input: StepInput,
    /// `--pty`: task 0 runs on a pseudo-terminal of this size (its input
    /// and output are the terminal's), the other tasks' output is dropped.
    pub pty: Option<TerminalSize>,
    /// `-o/--output` and `-e/--error`: per-task files instead of `srun`'s own
    /// output.
    pub files: TaskFiles,
}

/// `srun -o/-e`: where the tasks' standard output and error go.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskFiles {
    /// `-o/--output`.
    pub stdout: TaskStream,
    /// `-e/--error`.
    pub stderr: TaskStream,
}

/// Where one stream of a step's tasks goes, as `srun -o/-e` says it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskStream {
    /// To `srun` (the default, `all`, and a file `srun` itself writes on its
    /// host: a pattern without `%t`, `%n` or `%N`).
    #[default]
    Srun,
    /// Nowhere (`none`).
    Discard,
    /// Only this task's, to `srun` (`-o 3`); the other tasks' nowhere.
    OnlyTask(u32),
    /// A file on each task's node, named by this pattern (it holds `%t`,
    /// `%n` or `%N`: `%t %n %N %s %j %J %u %x %%`).
    NodeFile(String),
}

/// A terminal's size in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalSize {
    pub rows: u16,
    pub cols: u16,
}

impl Default for TerminalSize {
    /// What a terminal that cannot say its size is taken to be.
    fn default() -> Self {
        TerminalSize { rows: 24, cols: 80 }
    }
}

/// Which of a step's tasks get `srun`'s standard input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum StepInput {
    /// Every task (Slurm's default, `--input=all`, or a file srun reads).
    #[default]
    All,
    /// The task of this rank (`--input=N`); the others read nothing.
    Task(u32),
    /// No task (`--input=none`): standard input is closed.
    None,
}

impl StepInput {
    /// Whether the task of `rank` reads the input.
    pub fn reaches(self, rank: u32) -> bool {
        match self {
            StepInput::All => true,
            StepInput::Task(task) => task == rank,
            StepInput::None => false,
        }
    }
}

/// `srun` → agent, and coordinating agent → the agent of another node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StepControl {
    /// Start the step (first message only).
    Run(Box<SrunRequest>),
    /// Start this node's share of a laid-out step (agent to agent).
    Launch(Box<StepLaunch>),
    /// Forward a signal to every task (srun got it).
    Signal(Signal),
    /// `corral checkpoint` inside a job (first message only): record a
    /// checkpoint written by this attempt. Answered `Accepted` or `Refused`.
    Checkpoint {
        /// `SLURM_JOB_ID`.
        job: JobId,
        /// `CORRAL_ATTEMPT`: only the attempt that runs now may report.
        attempt: AttemptNumber,
        /// Training step.
        step: u64,
        /// Where the checkpoint is.
        path: String,
    },
    /// `srun` or `salloc` on a login node, to the agent of the allocation's
    /// batch host (first message only): it holds job `job`'s allocation,
    /// which lasts until it sends [`StepControl::Release`] or goes away.
    /// Answered `Attached`.
    Attach {
        /// The allocation's job.
        job: JobId,
    },
    /// The allocation's command ended with this status (after `Attach`): the
    /// job's holder exits with it, which ends the job.
    Release(u8),
    /// A piece of `srun`'s standard input, for the tasks the step's
    /// [`StepInput`] names (after `Run`, and agent to agent after `Launch`).
    Stdin(Vec<u8>),
    /// `srun`'s standard input ended: the tasks' is closed.
    StdinEnd,
    /// `sstat` (first message only): what job `job`'s processes on this node
    /// use now. Answered `Usage` or `Refused`.
    Usage {
        /// The job.
        job: JobId,
    },
    /// The holder of an allocation (`corral allocation-hold`, the batch script
    /// of a job `srun` or `salloc` created) waits here, on the step socket,
    /// until the login node's command releases it (first message only).
    /// Answered `Released`.
    AwaitRelease {
        /// `SLURM_JOB_ID`.
        job: JobId,
        /// `CORRAL_ATTEMPT`.
        attempt: AttemptNumber,
    },
    /// `srun --pty`'s terminal was resized: task 0's terminal takes the new
    /// size (after `Run`, and agent to agent after `Launch`).
    Resize(TerminalSize),
    /// Agent to agent (first message only): does this node reach a leader
    /// now, and which roster does it hold? Answered `Reach`.
    Reach,
}

/// How a step's ranks are dealt to its nodes (`-m/--distribution`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskDistribution {
    /// Consecutive ranks, node after node (Slurm's default).
    #[default]
    Block,
    /// One rank to each node in turn, round after round.
    Cyclic,
}

impl TaskDistribution {
    /// `SLURM_DISTRIBUTION`'s value.
    pub fn slurm_name(self) -> &'static str {
        match self {
            TaskDistribution::Block => "block",
            TaskDistribution::Cyclic => "cyclic",
        }
    }
}

/// How a step is laid out: its nodes, in `SLURM_JOB_NODELIST` order, the
/// number of tasks on each, how ranks are dealt to them, and the GPUs each
/// task is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepLayout {
    /// The step's number within the job (0, 1, ...).
    pub step: u32,
    /// The nodes.
    pub nodes: Vec<String>,
    /// Tasks on each node.
    pub tasks: Vec<u32>,
    /// How ranks are dealt to the nodes.
    pub distribution: TaskDistribution,
    /// `--gpus-per-task`: each task sees only its own GPUs of its node (the
    /// task of local rank L the node's job GPUs L*N to L*N+N-1); `None`: every
    /// task sees all of them.
    pub gpus_per_task: Option<u32>,
}

/// Most tasks one step may have (Slurm's own limit is lower in practice).
pub const MAX_STEP_TASKS: u32 = 1 << 20;

impl StepLayout {
    /// Tasks in the step (never more than `u32::MAX`: see [`StepLayout::check`]).
    pub fn ntasks(&self) -> u32 {
        self.tasks
            .iter()
            .fold(0u32, |sum, t| sum.saturating_add(*t))
    }

    /// The ranks of `node`'s tasks in local-rank order, and the node's index,
    /// when it runs tasks: consecutive under block distribution (`4,5,6,7`),
    /// one per round under cyclic (`1,3,5`).
    pub fn ranks_on(&self, node: &str) -> Option<(Vec<u32>, u32)> {
        let index = self.nodes.iter().position(|n| n == node)?;
        // Never allocate for a count no checked layout has.
        let count = *self.tasks.get(index).filter(|c| **c <= MAX_STEP_TASKS)?;
        let nodeid = u32::try_from(index).ok()?;
        let ranks = match self.distribution {
            TaskDistribution::Block => {
                let first = self.tasks[..index]
                    .iter()
                    .fold(0u32, |sum, t| sum.saturating_add(*t));
                (0..count)
                    .map(|local| first.saturating_add(local))
                    .collect()
            }
            // The k-th task here is dealt after k full rounds (each node gives
            // min(its tasks, k)) and, in round k, after the nodes before it that
            // still have a task then; counted with sorted task counts, so a
            // node's ranks cost O(nodes log nodes + its tasks).
            TaskDistribution::Cyclic => {
                let mut all = self.tasks.clone();
                all.sort_unstable();
                let mut before = self.tasks[..index].to_vec();
                before.sort_unstable();
                let (mut done_all, mut done_before) = (0usize, 0usize);
                let mut rounds = 0u32;
                let mut ranks = Vec::with_capacity(count as usize);
                for k in 0..count {
                    while done_all < all.len() && all[done_all] <= k {
                        done_all += 1;
                    }
                    while done_before < before.len() && before[done_before] <= k {
                        done_before += 1;
                    }
                    let earlier = u32::try_from(before.len() - done_before).unwrap_or(u32::MAX);
                    ranks.push(rounds.saturating_add(earlier));
                    let still = u32::try_from(all.len() - done_all).unwrap_or(u32::MAX);
                    rounds = rounds.saturating_add(still);
                }
                ranks
            }
        };
        Some((ranks, nodeid))
    }

    /// Refuses a layout that does not make sense (it may come from another
    /// node's agent): a task count for every node, each node once, at least one
    /// task, at most [`MAX_STEP_TASKS`].
    pub fn check(&self) -> Result<(), String> {
        if self.nodes.is_empty() || self.nodes.len() != self.tasks.len() {
            return Err(format!(
                "a step laid out on {} nodes with {} task counts",
                self.nodes.len(),
                self.tasks.len()
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(twice) = self.nodes.iter().find(|n| !seen.insert(n.as_str())) {
            return Err(format!("a step lays node {twice} out twice"));
        }
        let total = self
            .tasks
            .iter()
            .try_fold(0u32, |sum, t| sum.checked_add(*t))
            .filter(|total| (1..=MAX_STEP_TASKS).contains(total));
        if total.is_none() {
            return Err(format!(
                "a step needs 1 to {MAX_STEP_TASKS} tasks; this one asks for {:?}",
                self.tasks
            ));
        }
        Ok(())
    }
}

/// One node's share of a step, sent by the coordinating agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepLaunch {
    /// The job.
    pub job: JobId,
    /// The attempt running now (a stale attempt is refused: fencing).
    pub attempt: AttemptNumber,
    /// The step.
    pub layout: StepLayout,
    /// The command.
    pub argv: Vec<String>,
    /// `srun`'s environment.
    pub env: BTreeMap<String, String>,
    /// The working directory.
    pub workdir: String,
    /// Which tasks read `srun`'s standard input.
    pub input: StepInput,
    /// Task 0 on a pseudo-terminal of this size (`srun --pty`).
    pub pty: Option<TerminalSize>,
    /// Per-task output files (`srun -o/-e`).
    pub files: TaskFiles,
}

/// Which output a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Agent → `srun`, and an agent running tasks → the coordinating agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StepEvent {
    /// The step is laid out and launching (to `srun` only).
    Started(StepLayout),
    /// Output from a task.
    Output {
        /// The task's rank.
        task: u32,
        /// Which stream.
        stream: OutputStream,
        /// The bytes, as read.
        data: Vec<u8>,
    },
    /// A task ended.
    TaskExited {
        /// Its rank.
        task: u32,
        /// Its node.
        node: String,
        /// How it ended.
        status: ExitStatus,
    },
    /// A task could not be started (no such program, no working directory...).
    TaskFailed {
        /// Its rank.
        task: u32,
        /// Its node.
        node: String,
        /// What went wrong.
        message: String,
    },
    /// A node's tasks were lost: its agent could not be reached or went away.
    NodeLost {
        /// The node.
        node: String,
        /// Why.
        message: String,
    },
    /// The step cannot run; nothing was started (or a checkpoint was not
    /// recorded). The reason says why.
    Refused(String),
    /// A checkpoint was recorded and committed by the cluster (to `corral
    /// checkpoint` only).
    Accepted,
    /// Every task this sender ran has ended; nothing follows.
    Finished,
    /// A checkpoint the node's agent holds and keeps reporting, which the
    /// cluster has not committed yet (to `corral checkpoint` only).
    Held(String),
    /// The agent took the login node's hold on this attempt of the job (to
    /// `Attach` only), with the job-wide variables `salloc` gives its command.
    Attached {
        /// The attempt held.
        attempt: AttemptNumber,
        /// `SLURM_JOB_ID`, `SLURM_JOB_NODELIST`, ... as the batch script has them.
        environment: BTreeMap<String, String>,
    },
    /// What the job's processes on this node use now (to `Usage` only).
    Usage(Box<NodeUsage>),
    /// The allocation is over: exit with this status (to the holder only).
    /// The text, when there is one, says why it ended without its command's
    /// status.
    Released(u8, Option<String>),
    /// How this node stands with the controllers (to `Reach` only).
    Reach {
        /// A leader acknowledged one of this agent's heartbeats lately.
        reaches_leader: bool,
        /// The roster this agent holds.
        roster: Option<crate::roster::RosterDigest>,
    },
}

/// What one node's processes of a job use now, for `sstat`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeUsage {
    /// The node.
    pub node: String,
    /// The attempt running there.
    pub attempt: AttemptNumber,
    /// Its steps there: the batch script (`step: None`, on the batch host)
    /// and the `srun` steps' tasks.
    pub steps: Vec<StepUsage>,
    /// The GPUs the job holds there, as last sampled.
    pub gpus: Vec<GpuUsage>,
}

/// One step's processes on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepUsage {
    /// The step's number; `None` for the batch script.
    pub step: Option<u32>,
    /// Its tasks here.
    pub tasks: Vec<TaskUsage>,
}

/// What one task (the batch script counts as task 0) uses, summed over the
/// live processes of its process group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskUsage {
    /// Its rank in the step.
    pub rank: u32,
    /// Its rank among the step's tasks on this node (0 for the batch script).
    pub local: u32,
    /// Its first process (its process group's id).
    pub leader: u32,
    /// Its live processes.
    pub pids: Vec<u32>,
    /// CPU time, milliseconds (user + system, reaped children included).
    pub cpu_ms: u64,
    /// Resident memory, KiB.
    pub rss_kib: u64,
    /// Virtual memory, KiB.
    pub vmsize_kib: u64,
    /// Major page faults.
    pub major_faults: u64,
    /// Bytes read (`rchar`).
    pub read_bytes: u64,
    /// Bytes written (`wchar`).
    pub write_bytes: u64,
}

/// One GPU of the job's, as the node's GPU backend last sampled it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuUsage {
    /// Its index on the node.
    pub index: u32,
    /// Percent of the last sample period in which a kernel ran.
    pub utilization_pct: Option<u32>,
    /// Device memory in use, MiB.
    pub memory_used_mb: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(nodes: &[&str], tasks: &[u32]) -> StepLayout {
        StepLayout {
            step: 0,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            tasks: tasks.to_vec(),
            distribution: TaskDistribution::Block,
            gpus_per_task: None,
        }
    }

    #[test]
    fn ranks_are_dealt_by_block_or_round_by_round() {
        let mut uneven = layout(&["a", "b", "c"], &[3, 1, 2]);
        let ranks = |l: &StepLayout, n: &str| l.ranks_on(n).map(|(r, _)| r);
        assert_eq!(ranks(&uneven, "a"), Some(vec![0, 1, 2]));
        assert_eq!(ranks(&uneven, "c"), Some(vec![4, 5]));
        uneven.distribution = TaskDistribution::Cyclic;
        // Rounds: a0 b1 c2 | a3 c4 | a5.
        assert_eq!(ranks(&uneven, "a"), Some(vec![0, 3, 5]));
        assert_eq!(ranks(&uneven, "b"), Some(vec![1]));
        assert_eq!(ranks(&uneven, "c"), Some(vec![2, 4]));
        assert_eq!(uneven.ranks_on("c").map(|(_, id)| id), Some(2));
        assert_eq!(ranks(&uneven, "d"), None);
    }

    #[test]
    fn cyclic_ranks_agree_with_dealing_one_by_one() {
        let names = ["a", "b", "c", "d", "e"];
        for tasks in [
            vec![1, 1, 1],
            vec![4, 2, 7, 1, 3],
            vec![5, 5],
            vec![1, 6],
            vec![3, 0, 2],
        ] {
            let mut step = layout(&names[..tasks.len()], &tasks);
            step.distribution = TaskDistribution::Cyclic;
            // Deal ranks round by round, as Slurm's cyclic distribution does.
            let mut dealt: Vec<Vec<u32>> = vec![Vec::new(); tasks.len()];
            let mut rank = 0;
            for round in 0..tasks.iter().copied().max().unwrap_or(0) {
                for (node, count) in tasks.iter().enumerate() {
                    if round < *count {
                        dealt[node].push(rank);
                        rank += 1;
                    }
                }
            }
            for (node, expected) in dealt.iter().enumerate() {
                let got = step.ranks_on(names[node]).map(|(r, _)| r);
                assert_eq!(got.as_ref(), Some(expected), "{tasks:?} node {node}");
            }
        }
    }

    #[test]
    fn a_malformed_layout_is_refused_and_never_panics() {
        assert!(layout(&["a", "b"], &[2, 3]).check().is_ok());
        for bad in [
            layout(&["a", "b"], &[2]),
            layout(&[], &[]),
            layout(&["a", "a"], &[1, 1]),
            layout(&["a", "b"], &[u32::MAX, 2]),
            layout(&["a"], &[0]),
            layout(&["a"], &[MAX_STEP_TASKS + 1]),
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
            // Even unchecked, looking at it does not panic.
            let _ = bad.ntasks();
            let _ = bad.ranks_on("b");
        }
        assert_eq!(layout(&["a", "b"], &[u32::MAX, 2]).ntasks(), u32::MAX);
        assert_eq!(layout(&["a", "b", "c"], &[2]).ranks_on("c"), None);
    }
}
