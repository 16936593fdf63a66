//! The attempts of every job as the jobs themselves recorded them: which
//! ranks started where, on which GPUs, resuming from which checkpoint, and
//! when each ended. Several checkers read this one view.

use std::collections::BTreeMap;

use crate::history::{EventKind, FinalAttempt, FinalJob, History};

/// A job and attempt number.
pub type AttemptKey = (u64, u32);

/// One rank of an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rank {
    /// The node's name.
    pub node: String,
    /// The GPU indices it was given.
    pub gpus: Vec<u32>,
    /// When it started.
    pub started: u64,
    /// The checkpoint step it resumed from (`CORRAL_RESUME_FROM`).
    pub resumed_from: Option<u64>,
    /// When it recorded its end, and with which status (`None`: it recorded
    /// none: it was killed, or still ran when the run ended).
    pub exited: Option<(u64, i32)>,
    /// The last sign of life: its start, a step, a preemption notice heard,
    /// or its exit.
    pub last_seen: u64,
    /// When it heard a preemption notice, and whether it ran on (the first
    /// it heard).
    pub notice: Option<(u64, bool)>,
}

/// One attempt, as observed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObservedAttempt {
    /// The node count its ranks saw (`SLURM_NNODES`).
    pub nodes: u32,
    /// Its ranks by `SLURM_NODEID`.
    pub ranks: BTreeMap<u32, Rank>,
    /// Steps of checkpoints it committed, with when.
    pub checkpoints: Vec<(u64, u64)>,
    /// Steps of checkpoints it wrote (committed or not), with when.
    pub written: Vec<(u64, u64)>,
    /// When its batch script recorded its end, and with which status.
    pub batch_exit: Option<(u64, i32)>,
}

impl ObservedAttempt {
    /// When its first rank started.
    pub fn first_start(&self) -> Option<u64> {
        self.ranks.values().map(|r| r.started).min()
    }
}

/// A preemption of an attempt, as the cluster recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preemption {
    /// The job the resources went to.
    pub for_job: u64,
    /// The end of the grace, on the run's clock.
    pub deadline: u64,
}

/// Every observed attempt, and the final records.
#[derive(Debug, Clone, Default)]
pub struct Attempts {
    /// Attempts by job and number, as the jobs recorded them.
    pub observed: BTreeMap<AttemptKey, ObservedAttempt>,
    /// The cluster's records at the end, by job id.
    pub finals: BTreeMap<u64, FinalJob>,
    /// The attempts the cluster preempted.
    pub preemptions: BTreeMap<AttemptKey, Preemption>,
}

impl Attempts {
    /// Rank `rank` of an observed attempt, to record what it did.
    fn rank_mut(&mut self, key: AttemptKey, rank: u32) -> Option<&mut Rank> {
        self.observed
            .get_mut(&key)
            .and_then(|a| a.ranks.get_mut(&rank))
    }

    /// Collects the view from a history.
    pub fn of(history: &History) -> Attempts {
        let mut view = Attempts::default();
        for event in &history.events {
            match &event.kind {
                EventKind::AttemptStart {
                    job,
                    attempt,
                    node,
                    rank,
                    nodes,
                    gpus,
                    resumed_from,
                } => {
                    let observed = view.observed.entry((*job, *attempt)).or_default();
                    observed.nodes = observed.nodes.max(*nodes);
                    observed.ranks.insert(
                        *rank,
                        Rank {
                            node: node.clone(),
                            gpus: gpus.clone(),
                            started: event.t,
                            resumed_from: *resumed_from,
                            exited: None,
                            last_seen: event.t,
                            notice: None,
                        },
                    );
                }
                EventKind::AttemptExit {
                    job,
                    attempt,
                    rank,
                    status,
                    ..
                } => {
                    if let Some(r) = view.rank_mut((*job, *attempt), *rank) {
                        r.exited = Some((event.t, *status));
                        r.last_seen = r.last_seen.max(event.t);
                    }
                }
                EventKind::Step {
                    job, attempt, rank, ..
                } => {
                    if let Some(r) = view.rank_mut((*job, *attempt), *rank) {
                        r.last_seen = r.last_seen.max(event.t);
                    }
                }
                EventKind::Notice {
                    job,
                    attempt,
                    rank,
                    ignored,
                    ..
                } => {
                    if let Some(r) = view.rank_mut((*job, *attempt), *rank) {
                        r.last_seen = r.last_seen.max(event.t);
                        r.notice.get_or_insert((event.t, *ignored));
                    }
                }
                EventKind::PreemptionNotice {
                    job,
                    attempt,
                    for_job,
                    deadline,
                } => {
                    view.preemptions.insert(
                        (*job, *attempt),
                        Preemption {
                            for_job: *for_job,
                            deadline: *deadline,
                        },
                    );
                }
                EventKind::BatchExit {
                    job,
                    attempt,
                    status,
                    ..
                } => {
                    view.observed
                        .entry((*job, *attempt))
                        .or_default()
                        .batch_exit = Some((event.t, *status));
                }
                EventKind::Checkpoint { job, attempt, step } => {
                    let observed = view.observed.entry((*job, *attempt)).or_default();
                    observed.checkpoints.push((event.t, *step));
                    observed.written.push((event.t, *step));
                }
                EventKind::CheckpointWritten { job, attempt, step } => {
                    view.observed
                        .entry((*job, *attempt))
                        .or_default()
                        .written
                        .push((event.t, *step));
                }
                EventKind::Final(job) => {
                    view.finals.insert(job.job, job.clone());
                }
                _ => {}
            }
        }
        view
    }

    /// The final record of an attempt.
    pub fn final_attempt(&self, (job, attempt): AttemptKey) -> Option<&FinalAttempt> {
        self.finals
            .get(&job)?
            .attempts
            .iter()
            .find(|a| a.number == attempt)
    }

    /// When a rank stopped holding its GPUs, as far as the history tells:
    /// its own exit, else its last sign of life (a killed rank records no
    /// exit; it died within a step of its last one).
    pub fn rank_end(&self, rank: &Rank) -> u64 {
        rank.exited.map_or(rank.last_seen, |(t, _)| t)
    }
}
