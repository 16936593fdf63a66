//! Builders of small histories for the checkers' tests.

use crate::history::{
    Call, EventKind, FinalAttempt, FinalJob, HISTORY_VERSION, Header, History, JobView, Reply,
};

/// A header with a 10 s lease, a 60 s liveness bound and 500 ms of clock
/// tolerance.
pub fn header() -> Header {
    Header {
        corral_history: HISTORY_VERSION,
        scenario: "test".into(),
        seed: 1,
        lease_ms: 10_000,
        liveness_bound_ms: 60_000,
        clock_tolerance_ms: 500,
        preemption: None,
        faults: Vec::new(),
    }
}

/// A job that completed in one attempt on gpu01 GPU 0, 100..200 ms.
pub fn finished(job: u64, name: &str) -> FinalJob {
    FinalJob {
        job,
        name: name.into(),
        state: "COMPLETED".into(),
        requeues: 0,
        attempts: vec![FinalAttempt {
            number: 1,
            allocation: vec![("gpu01".into(), vec![0])],
            start: Some(100),
            end: Some(200),
            cause: Some("Exited(0)".into()),
        }],
        gpu_ms: 100,
    }
}

/// Builds a history event by event.
pub struct Builder {
    history: History,
}

impl Builder {
    pub fn new() -> Self {
        Builder {
            history: History::new(header()),
        }
    }

    pub fn event(&mut self, t: u64, kind: EventKind) -> &mut Self {
        self.history.push(t, kind);
        self
    }

    /// Fault `id` of `kind` on controller-1, cutting off no node, from
    /// `began` until `healed`.
    pub fn fault(&mut self, id: u64, kind: &str, (began, healed): (u64, u64)) -> &mut Self {
        self.event(
            began,
            EventKind::FaultBegin {
                fault: id,
                kind: kind.into(),
                target: "controller-1".into(),
                cut_off: Vec::new(),
            },
        )
        .event(healed, EventKind::FaultHealed { fault: id })
    }

    /// A submission invoked at `t`, acknowledged with `job` at `t + 1`, or
    /// indeterminate then when `job` is `None`.
    pub fn submit(&mut self, op: u64, name: &str, t: u64, job: Option<u64>) -> &mut Self {
        self.event(
            t,
            EventKind::Invoke {
                process: op as u32,
                op,
                call: Call::Submit {
                    key: format!("k{op}"),
                    name: name.into(),
                    nodes: 1,
                    gpus_per_node: 1,
                },
            },
        );
        match job {
            Some(job) => self.event(
                t + 1,
                EventKind::Ok {
                    process: op as u32,
                    op,
                    replica: Some(1),
                    reply: Reply::Submitted { job },
                },
            ),
            None => self.event(
                t + 1,
                EventKind::Info {
                    process: op as u32,
                    op,
                    error: "timed out".into(),
                },
            ),
        }
    }

    /// A submission invoked at `t` and refused at `t + 1`.
    pub fn submit_refused(&mut self, op: u64, name: &str, t: u64) -> &mut Self {
        self.submit(op, name, t, None);
        self.history.events.pop();
        self.event(
            t + 1,
            EventKind::Fail {
                process: op as u32,
                op,
                replica: Some(1),
                error: "refused".into(),
            },
        )
    }

    /// A read of `job` from `invoked` to `answered` that saw `view`.
    pub fn read(
        &mut self,
        op: u64,
        job: u64,
        invoked: u64,
        answered: u64,
        view: (&str, u32, u32),
    ) -> &mut Self {
        self.event(
            invoked,
            EventKind::Invoke {
                process: op as u32,
                op,
                call: Call::Read { job },
            },
        );
        self.event(
            answered,
            EventKind::Ok {
                process: op as u32,
                op,
                replica: Some(1),
                reply: Reply::Read(JobView {
                    state: view.0.into(),
                    attempts: view.1,
                    requeues: view.2,
                }),
            },
        )
    }

    /// Rank `rank` of `nodes` of an attempt started at `t` on `node`.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        t: u64,
        (job, attempt): (u64, u32),
        node: &str,
        (rank, nodes): (u32, u32),
        gpus: &[u32],
        resumed_from: Option<u64>,
    ) -> &mut Self {
        self.event(
            t,
            EventKind::AttemptStart {
                job,
                attempt,
                node: node.into(),
                rank,
                nodes,
                gpus: gpus.to_vec(),
                resumed_from,
            },
        )
    }

    /// Rank `rank` of an attempt ended at `t` with `status`.
    pub fn exit(
        &mut self,
        t: u64,
        (job, attempt): (u64, u32),
        node: &str,
        rank: u32,
        status: i32,
    ) -> &mut Self {
        self.event(
            t,
            EventKind::AttemptExit {
                job,
                attempt,
                node: node.into(),
                rank,
                status,
                step: 0,
            },
        )
    }

    /// Rank `rank` completed `step` at `t`.
    pub fn step(&mut self, t: u64, (job, attempt): (u64, u32), rank: u32, step: u64) -> &mut Self {
        self.event(
            t,
            EventKind::Step {
                job,
                attempt,
                rank,
                step,
            },
        )
    }

    /// A checkpoint at `step` committed at `t`.
    pub fn checkpoint(&mut self, t: u64, (job, attempt): (u64, u32), step: u64) -> &mut Self {
        self.event(t, EventKind::Checkpoint { job, attempt, step })
    }

    /// A rank hearing its preemption notice at `t`.
    pub fn notice(
        &mut self,
        t: u64,
        (job, attempt): (u64, u32),
        rank: u32,
        ignored: bool,
    ) -> &mut Self {
        self.event(
            t,
            EventKind::Notice {
                job,
                attempt,
                rank,
                step: 0,
                ignored,
            },
        )
    }

    /// The cluster's record that attempt `(job, attempt)` was preempted for
    /// `for_job`, its grace ending at `deadline`.
    pub fn preempted(
        &mut self,
        (job, attempt): (u64, u32),
        for_job: u64,
        deadline: u64,
    ) -> &mut Self {
        let t = self.history.end();
        self.event(
            t,
            EventKind::PreemptionNotice {
                job,
                attempt,
                for_job,
                deadline,
            },
        )
    }

    /// An attempt's batch script ending at `t` on `node`.
    pub fn batch_exit(
        &mut self,
        t: u64,
        (job, attempt): (u64, u32),
        node: &str,
        status: i32,
    ) -> &mut Self {
        self.event(
            t,
            EventKind::BatchExit {
                job,
                attempt,
                node: node.into(),
                status,
            },
        )
    }

    /// A preempting scenario's header: 4 s of grace, 2 s of kill wait.
    pub fn preempting(&mut self, scenario: &str) -> &mut Self {
        self.history.header.scenario = scenario.into();
        self.history.header.preemption = Some(crate::history::PreemptTimes {
            grace_ms: 4_000,
            kill_wait_ms: 2_000,
        });
        self
    }

    pub fn final_job(&mut self, job: FinalJob) -> &mut Self {
        let t = self.history.end();
        self.event(t, EventKind::Final(job))
    }

    /// The history, in time order.
    pub fn history(&self) -> History {
        let mut history = self.history.clone();
        history.sort();
        history
    }
}
