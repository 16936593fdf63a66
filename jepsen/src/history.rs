//! The history of a chaos run: what clients asked and were told, what jobs
//! did (as the jobs themselves recorded it), what the controllers did, which
//! faults were injected, and the cluster's state at the end.
//!
//! On disk it is JSON Lines: a [`Header`] line, then one [`Event`] per line
//! in the order they were recorded. Times are milliseconds since the run
//! began (`t`), from one clock: the runner's for its own events, and the wall
//! clock of the job's node, shifted by the run's start, for job events (on one
//! machine they are the same clock; across hosts their skew adds to every
//! tolerance, and the header says how much to allow).

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The format version this build writes and reads.
pub const HISTORY_VERSION: u32 = 1;

/// The first line: what the run was and the bounds its checkers use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`HISTORY_VERSION`] for histories this build writes.
    pub corral_history: u32,
    /// The scenario's name.
    pub scenario: String,
    /// The workload's seed: the same seed gives the same operations.
    pub seed: u64,
    /// The agents' lease: a partitioned agent may run its attempt this long
    /// after the leader last heard from it, so two attempts on one GPU may
    /// overlap by up to this much (measured and reported, not hidden).
    pub lease_ms: u64,
    /// How long after the last fault is healed every job must have ended and
    /// a leader must exist.
    pub liveness_bound_ms: u64,
    /// Clock resolution and skew allowed between the runner and the jobs.
    pub clock_tolerance_ms: u64,
    /// The cluster's preemption timing, where the scenario preempts (absent
    /// in older histories and in scenarios that do not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptTimes>,
    /// The kinds of fault the scenario injects (absent in older histories
    /// and in scenarios without faults).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<String>,
}

/// How long a preempted attempt may run on: the grace from the notice to
/// the deadline (`[scheduling] preempt_grace`), then the wait from the
/// deadline's SIGTERM to its SIGKILL (`[leader] kill_wait`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreemptTimes {
    /// Notice to deadline, ms.
    pub grace_ms: u64,
    /// Deadline's SIGTERM to SIGKILL, ms.
    pub kill_wait_ms: u64,
}

/// One line of the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Milliseconds since the run began.
    pub t: u64,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum EventKind {
    /// A client began an operation.
    Invoke {
        /// The client (one operation at a time each).
        process: u32,
        /// The operation's id, unique in the run.
        op: u64,
        /// What it asked.
        call: Call,
    },
    /// The operation took effect, and the client was told so.
    Ok {
        /// The client (one operation at a time each).
        process: u32,
        /// The operation's id, unique in the run.
        op: u64,
        /// The controller that answered.
        replica: Option<u64>,
        /// What it was told.
        reply: Reply,
    },
    /// The operation certainly did not take effect.
    Fail {
        /// The client (one operation at a time each).
        process: u32,
        /// The operation's id, unique in the run.
        op: u64,
        /// The controller, by id.
        replica: Option<u64>,
        /// What the client was told, or what went wrong.
        error: String,
    },
    /// The outcome is unknown (a timeout, a lost connection): it may or may not
    /// have taken effect, now or later.
    Info {
        /// The client (one operation at a time each).
        process: u32,
        /// The operation's id, unique in the run.
        op: u64,
        /// What the client was told, or what went wrong.
        error: String,
    },
    /// One rank of an attempt started, as the job recorded it.
    AttemptStart {
        /// The job's id.
        job: u64,
        /// The attempt's number (1 for the first).
        attempt: u32,
        /// The node's name.
        node: String,
        /// `SLURM_NODEID`: 0 .. `nodes`.
        rank: u32,
        /// The attempt's node count (`SLURM_NNODES`).
        nodes: u32,
        /// The GPU indices this rank was given (`CUDA_VISIBLE_DEVICES`).
        gpus: Vec<u32>,
        /// `CORRAL_RESUME_FROM`: the checkpoint step it resumes from.
        resumed_from: Option<u64>,
    },
    /// A rank completed a step (a sign of life: a rank killed by a signal
    /// records no exit, so its last step says when it last ran).
    Step {
        /// The job's id.
        job: u64,
        /// The attempt's number (1 for the first).
        attempt: u32,
        /// `SLURM_NODEID`: 0 .. the node count.
        rank: u32,
        /// The step completed.
        step: u64,
    },
    /// A rank wrote a checkpoint and is about to report it. The cluster may
    /// commit it although the rank never learns so (killed while waiting, or
    /// told after a partition that its agent only holds it), so a later
    /// attempt may resume from a checkpoint that is written but not
    /// `Checkpoint`-recorded.
    CheckpointWritten {
        /// The job's id.
        job: u64,
        /// The attempt's number (1 for the first).
        attempt: u32,
        /// The training step.
        step: u64,
    },
    /// A checkpoint was written and its report committed (`corral checkpoint`
    /// answered success).
    Checkpoint {
        /// The job's id.
        job: u64,
        /// The attempt's number (1 for the first).
        attempt: u32,
        /// The training step.
        step: u64,
    },
    /// One rank of an attempt ended, as the job recorded it (a rank killed by
    /// a signal records nothing: its last `Step` is the last sign of it).
    AttemptExit {
        /// The job's id.
        job: u64,
        /// The attempt's number (1 for the first).
        attempt: u32,
        /// The node's name.
        node: String,
        /// `SLURM_NODEID`: 0 .. the node count.
        rank: u32,
        /// The exit status it ended with.
        status: i32,
        /// The last step it completed.
        step: u64,
    },
    /// A rank heard its preemption notice (the SIGTERM sent to the steps'
    /// tasks), as it recorded it: it then either committed a checkpoint and
    /// ended (`ignored: false`) or ran on (`ignored: true`) until killed.
    Notice {
        /// The job's id.
        job: u64,
        /// The attempt's number (1 for the first).
        attempt: u32,
        /// `SLURM_NODEID`: 0 .. the node count.
        rank: u32,
        /// The last step it had completed.
        step: u64,
        /// Whether it ran on.
        ignored: bool,
    },
    /// The cluster's record, read at the end, that an attempt was told it
    /// was preempted (`attempts[i].preemption`).
    PreemptionNotice {
        /// The victim's id.
        job: u64,
        /// The victim's attempt.
        attempt: u32,
        /// The job the attempt's resources went to.
        for_job: u64,
        /// The end of the grace, on the run's clock.
        deadline: u64,
    },
    /// The attempt's batch script ended (it started the ranks and waited
    /// for them), as it recorded it.
    BatchExit {
        /// The job's id.
        job: u64,
        /// The attempt's number (1 for the first).
        attempt: u32,
        /// The node's name.
        node: String,
        /// The exit status it ended with.
        status: i32,
    },
    /// A controller led in `term` (from its status or log).
    Leader {
        /// The controller, by id.
        replica: u64,
        /// The Raft term.
        term: u64,
    },
    /// A controller sent a launch of an attempt to an agent.
    Dispatch {
        /// The controller, by id.
        replica: u64,
        /// The Raft term.
        term: u64,
        /// The job's id.
        job: u64,
        /// The attempt's number (1 for the first).
        attempt: u32,
        /// The node's name.
        node: String,
    },
    /// A fault was injected.
    FaultBegin {
        /// Unique in the run; `FaultHealed` names it.
        fault: u64,
        /// What kind (`kill-leader`, `pause-leader`, `partition-agent`, ...).
        kind: String,
        /// What it hit.
        target: String,
        /// The nodes whose agents it may cut off from the leader (killed,
        /// paused or partitioned): a node cut off past the lease may rightly
        /// be declared down, and a job's end there then never reach the
        /// cluster.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        cut_off: Vec<String>,
    },
    /// A fault ended.
    FaultHealed {
        /// The fault's id, as `FaultBegin` gave it.
        fault: u64,
    },
    /// A fault was not injected, and why (not the nemesis's to run here, say).
    FaultSkipped {
        /// What kind of fault.
        kind: String,
        /// Why it was not injected.
        reason: String,
    },
    /// A job as the cluster holds it at the end of the run.
    Final(FinalJob),
    /// What one of the cluster's processes had used by then, sampled about
    /// once a second (procfs on the process's host): cumulative CPU time,
    /// resident memory, open file descriptors, and the bytes its log file
    /// had. A restarted process starts its CPU count afresh.
    ProcessSample {
        /// The process's name (`controller-2`, `agent-gpu03`).
        process: String,
        /// Its pid (changes when it restarts).
        pid: u32,
        /// User and system CPU time since it started, ms.
        cpu_ms: u64,
        /// Resident memory, KiB.
        rss_kib: u64,
        /// Open file descriptors.
        fds: u64,
        /// Its log file's size, bytes (all its runs write to the same file).
        log_bytes: u64,
    },
    /// What showed that a fault took effect, counted while it lasted (a
    /// disk stall: the stalled controller's slow-sync lines).
    FaultEffect {
        /// The fault's id, as `FaultBegin` gave it.
        fault: u64,
        /// What was counted.
        effect: String,
        /// How many were seen.
        count: u64,
    },
    /// The controllers a partition (`FaultBegin` `fault`) left without a
    /// majority of the controllers: none of them may lead until the heal.
    Minority {
        /// The fault's id, as `FaultBegin` gave it.
        fault: u64,
        /// The controllers cut off from a majority (`controller-2`).
        controllers: Vec<String>,
    },
    /// Which replicas the leader saw caught up (its log's lag 0), recorded
    /// when that changes.
    Replicas {
        /// The leader that answered.
        leader: u64,
        /// Every member, voters and learners.
        members: Vec<u64>,
        /// The members at lag 0.
        caught_up: Vec<u64>,
    },
    /// A controller logged that, leading, its Raft core had not answered for
    /// longer than the core-hold limit (its disk held the log's writes, or
    /// the core was stuck) and that it no longer vouched for itself: the
    /// others may rightly elect a leader that can commit.
    CoreHeld {
        /// The controller (`controller-2`).
        process: String,
    },
}

/// A client operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "snake_case")]
pub enum Call {
    /// A submission with an idempotency key; `name` is unique in the run, so
    /// the job it made can be found without the reply.
    Submit {
        /// The idempotency key.
        key: String,
        /// The job's name, unique in the run.
        name: String,
        /// Nodes asked for.
        nodes: u32,
        /// GPUs asked for on each node.
        gpus_per_node: u32,
    },
    /// `scancel`.
    Cancel {
        /// The job's id.
        job: u64,
    },
    /// A read of one job.
    Read {
        /// The job's id.
        job: u64,
    },
}

/// What a client was told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "r", rename_all = "snake_case")]
pub enum Reply {
    /// The job the submission made.
    Submitted {
        /// The job's id.
        job: u64,
    },
    /// The cancellation was accepted.
    Cancelled,
    /// The job as read.
    Read(JobView),
    /// A read's answer held no such job.
    NotFound,
}

/// A job as a read saw it: enough to order what reads saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobView {
    /// Slurm's state name (`PENDING`, `RUNNING`, `COMPLETED`, ...).
    pub state: String,
    /// Attempts the job has had.
    pub attempts: u32,
    /// Times it was requeued.
    pub requeues: u32,
}

/// A job at the end of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalJob {
    /// The job's id.
    pub job: u64,
    /// The job's name, unique in the run.
    pub name: String,
    /// Slurm's state name.
    pub state: String,
    /// Times it was requeued.
    pub requeues: u32,
    /// Its attempts, oldest first.
    pub attempts: Vec<FinalAttempt>,
    /// GPU-milliseconds the cluster's accounting charged the job.
    pub gpu_ms: u64,
}

/// One attempt at the end of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalAttempt {
    /// The attempt's number (1 for the first).
    pub number: u32,
    /// Nodes and the GPU indices on each.
    pub allocation: Vec<(String, Vec<u32>)>,
    /// When it started and ended, on the run's clock (`None`: not yet).
    pub start: Option<u64>,
    /// When it ended, on the run's clock (`None`: not yet).
    pub end: Option<u64>,
    /// Why it ended (`Exited(0)`, `NodeFailure`, `Xid`, `Preempted`,
    /// `Cancelled`, ...), as the cluster recorded it.
    pub cause: Option<String>,
}

impl FinalJob {
    /// Whether the job has ended for good.
    pub fn is_terminal(&self) -> bool {
        is_terminal_state(&self.state)
    }
}

/// Whether a Slurm state name is one a job never leaves.
pub fn is_terminal_state(state: &str) -> bool {
    matches!(
        state,
        "COMPLETED" | "FAILED" | "CANCELLED" | "TIMEOUT" | "NODE_FAIL" | "OUT_OF_MEMORY"
    )
}

/// A whole history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    /// The first line.
    pub header: Header,
    /// Every other line, in time order once sorted.
    pub events: Vec<Event>,
}

/// Why a history could not be read.
#[derive(Debug, Error)]
pub enum HistoryError {
    #[error("the history is empty: its first line must be the header")]
    /// No header line.
    Empty,
    #[error("line 1 is not a history header ({0}); is this a corral history?")]
    /// The first line is not a header.
    Header(serde_json::Error),
    #[error(
        "this history is format {found}; this build reads format {HISTORY_VERSION}: use the corral-jepsen that wrote it"
    )]
    /// A format this build does not read.
    Version {
        /// The version the history has.
        found: u32,
    },
    #[error("line {line}: {source}")]
    /// A line is not an event.
    Event {
        /// The line, counting from 1.
        line: usize,
        /// What was wrong with it.
        source: serde_json::Error,
    },
    #[error("line {line}: time {t} ms comes before the previous line's {previous} ms")]
    /// Times go backwards.
    Backwards {
        /// The line, counting from 1.
        line: usize,
        /// Its time.
        t: u64,
        /// The previous line's time.
        previous: u64,
    },
}

impl History {
    /// An empty history under `header`.
    pub fn new(header: Header) -> Self {
        History {
            header,
            events: Vec::new(),
        }
    }

    /// Adds an event. Events from several sources may be recorded out of
    /// order; [`History::sort`] orders them before checking.
    pub fn push(&mut self, t: u64, kind: EventKind) {
        self.events.push(Event { t, kind });
    }

    /// Orders events by time, keeping the recorded order among equal times.
    pub fn sort(&mut self) {
        self.events.sort_by_key(|e| e.t);
    }

    /// The history as JSON Lines.
    pub fn to_jsonl(&self) -> String {
        let mut out = json_line(&self.header);
        for event in &self.events {
            out.push_str(&json_line(event));
        }
        out
    }

    /// Reads a history written by [`History::to_jsonl`]. Times must not go
    /// backwards (sort before writing).
    pub fn parse(text: &str) -> Result<History, HistoryError> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty());
        let (_, first) = lines.next().ok_or(HistoryError::Empty)?;
        let header: Header = serde_json::from_str(first).map_err(HistoryError::Header)?;
        if header.corral_history != HISTORY_VERSION {
            return Err(HistoryError::Version {
                found: header.corral_history,
            });
        }
        let mut events = Vec::new();
        let mut previous = 0;
        for (index, line) in lines {
            let event: Event =
                serde_json::from_str(line).map_err(|source| HistoryError::Event {
                    line: index + 1,
                    source,
                })?;
            if event.t < previous {
                return Err(HistoryError::Backwards {
                    line: index + 1,
                    t: event.t,
                    previous,
                });
            }
            previous = event.t;
            events.push(event);
        }
        Ok(History { header, events })
    }

    /// The jobs at the end of the run.
    pub fn finals(&self) -> impl Iterator<Item = &FinalJob> {
        self.events.iter().filter_map(|e| match &e.kind {
            EventKind::Final(job) => Some(job),
            _ => None,
        })
    }

    /// When the run's last event was recorded.
    pub fn end(&self) -> u64 {
        self.events.iter().map(|e| e.t).max().unwrap_or(0)
    }
}

/// One value as a JSON line. Every type in a history is plain data with
/// string keys, which serde_json always encodes; were one ever to fail, the
/// line says so instead of vanishing.
fn json_line<T: Serialize>(value: &T) -> String {
    let mut line = serde_json::to_string(value)
        .unwrap_or_else(|e| format!("{{\"unencodable\":{:?}}}", e.to_string()));
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::testing::header;

    #[test]
    fn a_history_round_trips_through_json_lines() {
        let mut history = History::new(header());
        history.push(
            5,
            EventKind::Invoke {
                process: 1,
                op: 1,
                call: Call::Submit {
                    key: "k1".into(),
                    name: "w1".into(),
                    nodes: 2,
                    gpus_per_node: 4,
                },
            },
        );
        history.push(
            9,
            EventKind::Ok {
                process: 1,
                op: 1,
                replica: Some(2),
                reply: Reply::Submitted { job: 7 },
            },
        );
        history.push(
            20,
            EventKind::AttemptStart {
                job: 7,
                attempt: 1,
                node: "gpu01".into(),
                rank: 0,
                nodes: 2,
                gpus: vec![0, 1],
                resumed_from: None,
            },
        );
        history.push(
            30,
            EventKind::Final(FinalJob {
                job: 7,
                name: "w1".into(),
                state: "COMPLETED".into(),
                requeues: 0,
                attempts: vec![FinalAttempt {
                    number: 1,
                    allocation: vec![("gpu01".into(), vec![0, 1])],
                    start: Some(19),
                    end: Some(29),
                    cause: Some("Exited(0)".into()),
                }],
                gpu_ms: 20,
            }),
        );
        let text = history.to_jsonl();
        assert!(
            text.lines().nth(2).unwrap().contains("\"ev\":\"ok\""),
            "{text}"
        );
        assert_eq!(History::parse(&text).unwrap(), history);
    }

    #[test]
    fn bad_histories_are_refused_with_the_line() {
        assert!(matches!(History::parse(""), Err(HistoryError::Empty)));
        assert!(matches!(
            History::parse("{\"x\":1}"),
            Err(HistoryError::Header(_))
        ));
        let mut future = header();
        future.corral_history = HISTORY_VERSION + 1;
        let text = serde_json::to_string(&future).unwrap();
        assert!(matches!(
            History::parse(&text),
            Err(HistoryError::Version { .. })
        ));
        let good = serde_json::to_string(&header()).unwrap();
        let text = format!(
            "{good}\n{{\"t\":5,\"ev\":\"fault_healed\",\"fault\":1}}\n{{\"t\":4,\"ev\":\"fault_healed\",\"fault\":2}}\n"
        );
        let error = History::parse(&text).unwrap_err();
        assert!(error.to_string().starts_with("line 3:"), "{error}");
        let text = format!("{good}\n{{\"t\":5,\"ev\":\"no_such_event\"}}\n");
        let error = History::parse(&text).unwrap_err();
        assert!(error.to_string().starts_with("line 2:"), "{error}");
    }
}
