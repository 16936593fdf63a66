//! One attempt on this node and its life, as an explicit state machine:
//!
//! ```text
//! Launching ──> Running ──> Ending ──> Ended ──> (forgotten once the leader
//!     │                       ^          acknowledged the end report)
//!     └───────────────────────┘
//! ```
//!
//! `Launching`: the launch was taken and its processes are being started off
//! the runtime. `Running`: they run (away from the batch host: the allocation
//! is ready). `Ending`: something ends it (its batch script exited, the leader
//! killed it, a GPU failed, the lease lapsed, the agent is stopping); no step
//! task starts in it any more, and what is left gets SIGKILL at `kill_at`.
//! `Ended`: every process is gone and the end report is queued; the attempt
//! stays in hellos and heartbeats until the leader acknowledges that report,
//! so a leader change in between can neither take it for lost nor launch it
//! again.
//!
//! Pure: the supervisor does the signalling and waiting around it.

use std::collections::BTreeMap;
use std::sync::Arc;

use corral_proto::agent::{AgentReport, Launch};
use corral_state::ids::{AttemptNumber, JobId};
use corral_state::job::ExitStatus;
use tokio::time::Instant;

/// An attempt on this node.
pub type AttemptKey = (JobId, AttemptNumber);

/// Why an attempt ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Its batch script exited on its own.
    Exited,
    /// The leader ended it (cancel, time limit, preemption, a failure on
    /// another node of its gang, requeue).
    Killed,
    /// A GPU it used failed; the failure's report went first.
    GpuFault,
    /// The lease lapsed: it is fenced.
    Fenced,
    /// The agent is stopping.
    Stopping,
    /// The agent could not start it for a reason of its own (its journal).
    AgentFailure,
}

impl Why {
    /// Whether the job's end is not the job's own nor the leader's doing: the
    /// leader is told the attempt was lost here, and fails it over.
    fn loses_attempt(self) -> bool {
        matches!(self, Why::Fenced | Why::Stopping | Why::AgentFailure)
    }

    fn describe(self) -> &'static str {
        match self {
            Why::Exited => "its batch script exited",
            Why::Killed => "the leader ended it",
            Why::GpuFault => "a GPU it used failed",
            Why::Fenced => {
                "the node's agent lost its lease (no leader confirmed its heartbeats in time) and killed it"
            }
            Why::Stopping => "the node's agent was stopped and killed it",
            Why::AgentFailure => {
                "the node's agent could not record the attempt in its journal and did not start it"
            }
        }
    }
}

/// Where an attempt is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Its processes are being started.
    Launching,
    /// Its processes run (or its allocation is ready).
    Running,
    /// Being ended: what is left gets SIGKILL at `kill_at`.
    Ending {
        /// Why.
        why: Why,
        /// When whatever is left is SIGKILLed.
        kill_at: Instant,
    },
    /// Everything is gone; `report` (the outbox id of the end report) waits
    /// for the leader's acknowledgement.
    Ended {
        /// The end report's outbox id.
        report: u64,
    },
}

/// What beginning to end an attempt did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begun {
    /// It was running (or launching): now it ends, for this reason.
    Now,
    /// It was already ending; the SIGKILL may have come forward.
    Already,
    /// It has ended; nothing to do.
    Over,
}

/// A step task: its step's number and its rank in the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskId {
    /// The step (`SLURM_STEP_ID`).
    pub step: u32,
    /// The rank (`SLURM_PROCID`).
    pub rank: u32,
    /// The rank among the step's tasks on this node (`SLURM_LOCALID`).
    pub local: u32,
}

/// One attempt on this node.
#[derive(Debug)]
pub struct Attempt {
    /// The launch: the job record, its script, where the other nodes' agents are.
    pub launch: Arc<Launch>,
    /// This node runs the batch script.
    pub batch: bool,
    /// The GPUs it holds here.
    pub gpus: Vec<u32>,
    /// The uid its processes run as (to find those that escaped their groups).
    pub uid: u32,
    /// Its life.
    pub phase: Phase,
    /// Its processes are still being started (no group known yet).
    pub launch_pending: bool,
    /// The batch script's process group, on the batch host.
    pub group: Option<i32>,
    /// How the batch script ended, once it did.
    pub batch_status: Option<ExitStatus>,
    /// Process groups of the steps' tasks running here, with their step and rank.
    pub tasks: BTreeMap<i32, TaskId>,
    /// Tasks being started, whose groups are not known yet.
    pub starting: u32,
    /// The number the next step coordinated here gets.
    pub next_step: u32,
    /// The newest checkpoint step reported.
    pub checkpoint_step: Option<u64>,
    /// Its report's id (none for a step inherited from the job's record).
    pub checkpoint_report: Option<u64>,
}

impl Attempt {
    /// A launched attempt whose processes are about to be started.
    pub fn launching(launch: Arc<Launch>, batch: bool, gpus: Vec<u32>, uid: u32) -> Attempt {
        let checkpoint_step = launch.job.last_checkpoint.as_ref().map(|c| c.step);
        // After an agent restart, past the steps the cluster recorded.
        let next_step = launch
            .job
            .steps
            .iter()
            .filter(|s| s.attempt == launch.attempt)
            .map(|s| s.step.saturating_add(1))
            .max()
            .unwrap_or(0);
        Attempt {
            launch,
            batch,
            gpus,
            uid,
            phase: Phase::Launching,
            launch_pending: true,
            group: None,
            batch_status: None,
            tasks: BTreeMap::new(),
            starting: 0,
            next_step,
            checkpoint_step,
            checkpoint_report: None,
        }
    }

    /// Whether a step task may start in it.
    pub fn takes_steps(&self) -> bool {
        self.phase == Phase::Running
    }

    /// Whether it is ending or has ended.
    pub fn is_over(&self) -> bool {
        matches!(self.phase, Phase::Ending { .. } | Phase::Ended { .. })
    }

    /// Every process group of the attempt here: the batch script's and the tasks'.
    pub fn groups(&self) -> Vec<i32> {
        self.group
            .iter()
            .chain(self.tasks.keys())
            .copied()
            .collect()
    }

    /// Its processes started: running, unless it began ending meanwhile.
    pub fn launched(&mut self, group: Option<i32>) {
        self.launch_pending = false;
        self.group = group;
        if self.phase == Phase::Launching {
            self.phase = Phase::Running;
        }
    }

    /// Begins ending it for `why`, with SIGKILL for what is left at `kill_at`.
    /// An attempt already ending keeps its reason, but its SIGKILL comes
    /// forward if `kill_at` is sooner.
    pub fn begin_ending(&mut self, why: Why, kill_at: Instant) -> Begun {
        match &mut self.phase {
            Phase::Launching | Phase::Running => {
                self.phase = Phase::Ending { why, kill_at };
                Begun::Now
            }
            Phase::Ending {
                kill_at: current, ..
            } => {
                if kill_at < *current {
                    *current = kill_at;
                }
                Begun::Already
            }
            Phase::Ended { .. } => Begun::Over,
        }
    }

    /// The batch script exited with `status`: the attempt ends now if nothing
    /// else was ending it.
    pub fn batch_exited(&mut self, status: ExitStatus, now: Instant) -> Begun {
        self.batch_status = Some(status);
        self.begin_ending(Why::Exited, now)
    }

    /// The batch script was SIGKILLed while the lease was lapsed: fenced, not
    /// failed (the watchdog of a hung agent can get there before the agent's
    /// own fence does), so the attempt ends as lost.
    pub fn batch_fenced(&mut self, status: ExitStatus, now: Instant) -> Begun {
        self.batch_status = Some(status);
        self.begin_ending(Why::Fenced, now)
    }

    /// Whether everything of it is gone, given which of its groups still have
    /// live processes and whether escaped ones remain.
    pub fn gone(&self, live_groups: bool, escaped: bool) -> bool {
        let batch_unreaped = self.batch && self.group.is_some() && self.batch_status.is_none();
        !self.launch_pending && self.starting == 0 && !live_groups && !escaped && !batch_unreaped
    }

    /// The report that tells the leader how it ended here; `None` while it has
    /// not begun ending.
    pub fn end_report(&self, key: AttemptKey) -> Option<AgentReport> {
        let Phase::Ending { why, .. } = self.phase else {
            return None;
        };
        let (job, attempt) = key;
        Some(if why.loses_attempt() {
            AgentReport::Lost {
                job,
                attempt,
                reason: why.describe().to_string(),
            }
        } else if self.batch {
            // A script that never started exits 1 (launch failures).
            let status = self.batch_status.unwrap_or(ExitStatus {
                code: 1,
                signal: None,
            });
            AgentReport::BatchExited {
                job,
                attempt,
                status,
            }
        } else {
            AgentReport::Released { job, attempt }
        })
    }

    /// Its end report was queued as outbox id `report`.
    pub fn ended(&mut self, report: u64) {
        self.phase = Phase::Ended { report };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::job::BatchScript;
    use corral_state::testkit::{at, cluster, spec, start, submit};
    use std::time::Duration;

    fn launch() -> Arc<Launch> {
        let mut s = cluster(2, 8);
        let id = submit(&mut s, spec("alice", 1, 8), at(1));
        start(&mut s, id, at(2));
        let job = s.job(id).expect("job").clone();
        Arc::new(Launch {
            job,
            attempt: 1,
            script: BatchScript {
                script: "#!/bin/sh\ntrue\n".into(),
                argv: Vec::new(),
                environment: Default::default(),
            },
            step_peers: Default::default(),
            dispatched_by: (1, 1),
            topology: Default::default(),
        })
    }

    const KEY: AttemptKey = (JobId(1), 1);

    #[test]
    fn a_batch_attempt_reports_its_own_exit_only_once_its_status_is_known() {
        let now = Instant::now();
        let mut a = Attempt::launching(launch(), true, vec![0], 1000);
        assert!(!a.gone(false, false), "still launching");
        assert_eq!(a.end_report(KEY), None);
        a.launched(Some(42));
        assert!(a.takes_steps());
        assert!(!a.gone(false, false), "its script was never reaped");
        let status = ExitStatus {
            code: 3,
            signal: None,
        };
        assert_eq!(a.batch_exited(status, now), Begun::Now);
        assert!(!a.takes_steps());
        assert!(a.gone(false, false));
        assert!(!a.gone(true, false) && !a.gone(false, true));
        assert_eq!(
            a.end_report(KEY),
            Some(AgentReport::BatchExited {
                job: JobId(1),
                attempt: 1,
                status
            })
        );
        a.ended(7);
        assert_eq!(a.begin_ending(Why::Killed, now), Begun::Over);
    }

    #[test]
    fn a_kill_during_launch_ends_the_attempt_when_its_processes_start() {
        let now = Instant::now();
        let mut a = Attempt::launching(launch(), true, vec![0], 1000);
        assert_eq!(
            a.begin_ending(Why::Killed, now + Duration::from_secs(10)),
            Begun::Now
        );
        a.launched(Some(42));
        assert!(
            matches!(a.phase, Phase::Ending { .. }),
            "a started process does not bring a killed attempt back"
        );
        assert!(!a.takes_steps());
    }

    #[test]
    fn a_harsher_reason_brings_the_sigkill_forward_but_keeps_the_first_reason() {
        let now = Instant::now();
        let later = now + Duration::from_secs(10);
        let mut a = Attempt::launching(launch(), false, vec![0], 1000);
        a.launched(None);
        assert_eq!(a.begin_ending(Why::Killed, later), Begun::Now);
        assert_eq!(a.begin_ending(Why::Fenced, now), Begun::Already);
        assert_eq!(
            a.phase,
            Phase::Ending {
                why: Why::Killed,
                kill_at: now
            }
        );
        assert_eq!(
            a.end_report(KEY),
            Some(AgentReport::Released {
                job: JobId(1),
                attempt: 1
            })
        );
    }

    #[test]
    fn fenced_and_stopped_attempts_are_reported_lost_never_as_exits() {
        let now = Instant::now();
        for why in [Why::Fenced, Why::Stopping] {
            for batch in [true, false] {
                let mut a = Attempt::launching(launch(), batch, vec![0], 1000);
                a.launched(batch.then_some(42));
                a.begin_ending(why, now);
                if batch {
                    // The script dies of the SIGKILL: not the job's own exit.
                    a.batch_exited(
                        ExitStatus {
                            code: 0,
                            signal: Some(corral_state::slurm::signal::Signal::KILL),
                        },
                        now,
                    );
                }
                assert!(
                    matches!(a.end_report(KEY), Some(AgentReport::Lost { .. })),
                    "{why:?} batch={batch}: {:?}",
                    a.end_report(KEY)
                );
            }
        }
    }

    #[test]
    fn a_script_sigkilled_under_a_lapsed_lease_is_lost_not_failed() {
        // A hung agent's watchdog killed it before the agent's own fence ran:
        // the exit is the first thing the agent sees.
        let now = Instant::now();
        let mut a = Attempt::launching(launch(), true, vec![0], 1000);
        a.launched(Some(42));
        let killed = ExitStatus {
            code: 0,
            signal: Some(corral_state::slurm::signal::Signal::KILL),
        };
        assert_eq!(a.batch_fenced(killed, now), Begun::Now);
        assert!(
            matches!(a.end_report(KEY), Some(AgentReport::Lost { .. })),
            "{:?}",
            a.end_report(KEY)
        );
    }
}
