//! What `corral top` shows, as data: the latest reading of the cluster (its
//! replicas, the unfinished jobs, the nodes and their GPUs) and the recent
//! events found by comparing each reading with the one before (elections,
//! requeues, GPU faults and drains, nodes going down). Pure: readings in,
//! a model out; the terminal is `view.rs`'s.

use std::collections::{BTreeMap, VecDeque};

use corral_proto::api::ClusterStatusReply;
use corral_state::ids::JobId;
use corral_state::job::{EndCause, Job, JobState};
use corral_state::node::{GpuHealth, Node, NodeStateView};

/// Events kept for the view.
pub const EVENTS_KEPT: usize = 200;

/// One reading of the cluster.
#[derive(Debug, Clone)]
pub struct Reading {
    /// The leader's view of the replicas.
    pub status: ClusterStatusReply,
    /// The unfinished jobs.
    pub jobs: Vec<Job>,
    /// Every node.
    pub nodes: Vec<Node>,
    /// The state's clock when it was read, ms since the epoch.
    pub as_of_ms: u64,
}

/// Something that happened between two readings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// When it was seen (the later reading's clock).
    pub at_ms: u64,
    /// What kind.
    pub kind: EventKind,
    /// What, in words.
    pub text: String,
}

/// The kinds of events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// A new term, or the leader changed.
    Election,
    /// A job went back to the queue.
    Requeue,
    /// A GPU reported a fault (an XID, most often).
    GpuFault,
    /// A GPU or node was drained.
    Drain,
    /// A node was declared down.
    NodeDown,
    /// The view could not read the cluster.
    Unreachable,
}

impl EventKind {
    /// Its label in the event list.
    pub fn label(self) -> &'static str {
        match self {
            EventKind::Election => "election",
            EventKind::Requeue => "requeue",
            EventKind::GpuFault => "gpu fault",
            EventKind::Drain => "drain",
            EventKind::NodeDown => "node down",
            EventKind::Unreachable => "unreachable",
        }
    }
}

/// One GPU as the map shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuCell {
    /// Free for work.
    Free,
    /// Held by a job.
    Job(JobId),
    /// Out of service by a drain (its own or its node's).
    Drained,
    /// Faulty.
    Failed,
    /// Its node is down.
    Down,
}

/// What the view draws.
#[derive(Debug, Default)]
pub struct Top {
    /// The latest reading.
    pub latest: Option<Reading>,
    /// Recent events, newest last.
    pub events: VecDeque<Event>,
    /// Why the last reading failed, while it does.
    pub error: Option<String>,
}

impl Top {
    /// Takes a new reading, noting what changed since the last.
    pub fn observe(&mut self, reading: Reading) {
        if let Some(before) = &self.latest {
            for event in changes(before, &reading) {
                self.push(event);
            }
        }
        self.error = None;
        self.latest = Some(reading);
    }

    /// A reading failed.
    pub fn failed(&mut self, error: String, at_ms: u64) {
        if self.error.as_deref() != Some(&error) {
            self.push(Event {
                at_ms,
                kind: EventKind::Unreachable,
                text: error.clone(),
            });
        }
        self.error = Some(error);
    }

    fn push(&mut self, event: Event) {
        if self.events.len() == EVENTS_KEPT {
            self.events.pop_front();
        }
        self.events.push_back(event);
    }
}

/// Unfinished jobs by (state, partition).
pub fn queue(jobs: &[Job]) -> BTreeMap<(String, String), usize> {
    let mut counts = BTreeMap::new();
    for job in jobs {
        *counts
            .entry((job.state.slurm_name().to_string(), job.partition.clone()))
            .or_default() += 1;
    }
    counts
}

/// Each GPU of `node`, as the map shows it.
pub fn gpu_cells(node: &Node) -> Vec<GpuCell> {
    let down = node.state_view() == NodeStateView::Down;
    node.gpus
        .iter()
        .map(|gpu| {
            if down {
                GpuCell::Down
            } else if matches!(gpu.health, GpuHealth::Unhealthy { .. }) {
                GpuCell::Failed
            } else if let Some((job, _)) = gpu.allocated_to {
                GpuCell::Job(job)
            } else if gpu.drain.is_some() || node.drain.is_some() {
                GpuCell::Drained
            } else {
                GpuCell::Free
            }
        })
        .collect()
}

/// What changed from `before` to `after`.
fn changes(before: &Reading, after: &Reading) -> Vec<Event> {
    let at_ms = after.as_of_ms;
    let mut events = Vec::new();
    let mut note = |kind, text: String| events.push(Event { at_ms, kind, text });
    let (was, now) = (&before.status, &after.status);
    if now.term > was.term || now.leader_id != was.leader_id {
        note(
            EventKind::Election,
            match now.leader_id {
                Some(leader) => format!("term {}: replica {leader} leads", now.term),
                None => format!("term {}: no leader", now.term),
            },
        );
    }
    let earlier: BTreeMap<JobId, &Job> = before.jobs.iter().map(|j| (j.id, j)).collect();
    for job in &after.jobs {
        let Some(old) = earlier.get(&job.id) else {
            continue;
        };
        if job.requeue_count > old.requeue_count {
            let cause = job
                .attempts
                .iter()
                .rev()
                .find_map(|a| a.end.as_ref().filter(|e| e.state == JobState::Requeued))
                .map_or("requeued".to_string(), |end| cause_text(&end.cause));
            note(EventKind::Requeue, format!("job {}: {cause}", job.id.0));
        }
    }
    let nodes_before: BTreeMap<&str, &Node> =
        before.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    for node in &after.nodes {
        let Some(old) = nodes_before.get(node.name.as_str()) else {
            continue;
        };
        let down = |n: &Node| n.state_view() == NodeStateView::Down;
        if down(node) && !down(old) {
            note(EventKind::NodeDown, format!("{}: down", node.name));
        }
        if node.drain.is_some() && old.drain.is_none() {
            let reason = node.drain.as_ref().map_or("", |d| d.reason.as_str());
            note(
                EventKind::Drain,
                format!("{}: drained: {reason}", node.name),
            );
        }
        for (gpu, old_gpu) in node.gpus.iter().zip(&old.gpus) {
            if let GpuHealth::Unhealthy { xid, reason, .. } = &gpu.health
                && old_gpu.health == GpuHealth::Healthy
            {
                let xid = xid.map_or(String::new(), |x| format!("XID {x}: "));
                note(
                    EventKind::GpuFault,
                    format!("{} GPU {}: {xid}{reason}", node.name, gpu.index),
                );
            }
            if gpu.drain.is_some() && old_gpu.drain.is_none() {
                note(
                    EventKind::Drain,
                    format!("{} GPU {}: drained", node.name, gpu.index),
                );
            }
        }
    }
    events
}

/// Why an attempt was requeued, briefly.
fn cause_text(cause: &EndCause) -> String {
    match cause {
        EndCause::NodeFailure { node, .. } => format!("node {node} failed"),
        EndCause::GpuFailure { node, gpu, xid } => match xid {
            Some(xid) => format!("GPU {gpu} of {node} failed (XID {xid})"),
            None => format!("GPU {gpu} of {node} failed"),
        },
        EndCause::ApplicationXid { node, gpu, xid } => {
            format!("XID {xid} on GPU {gpu} of {node}")
        }
        EndCause::Preempted { for_job } => format!("preempted for job {}", for_job.0),
        EndCause::RequeueRequested { by } => format!("requeued by {by}"),
        EndCause::TimeLimit => "time limit".to_string(),
        EndCause::Cancelled { by } => format!("cancelled by {by}"),
        EndCause::Exited(status) => format!("exited {}", status.code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::testkit::{at, cluster, spec, start, submit};

    fn reading(term: u64, leader: u64, jobs: Vec<Job>, nodes: Vec<Node>, at_ms: u64) -> Reading {
        Reading {
            status: ClusterStatusReply {
                term,
                leader_id: Some(leader),
                ..ClusterStatusReply::default()
            },
            jobs,
            nodes,
            as_of_ms: at_ms,
        }
    }

    #[test]
    fn an_election_a_requeue_and_a_gpu_fault_are_seen_between_readings() {
        let mut state = cluster(1, 8);
        let id = submit(&mut state, spec("alice", 1, 2), at(1));
        start(&mut state, id, at(2));
        let job = state.job(id).cloned().expect("submitted");
        let nodes: Vec<Node> = state.nodes().values().cloned().collect();
        let mut top = Top::default();
        top.observe(reading(1, 1, vec![job.clone()], nodes.clone(), 1_000));
        assert!(top.events.is_empty(), "nothing to compare the first with");
        assert_eq!(
            gpu_cells(&nodes[0])
                .iter()
                .filter(|c| **c == GpuCell::Job(id))
                .count(),
            2
        );

        let mut requeued = job;
        requeued.requeue_count = 1;
        let mut faulty = nodes.clone();
        faulty[0].gpus[5].health = GpuHealth::Unhealthy {
            xid: Some(79),
            reason: "fell off the bus".to_string(),
            since: at(3),
        };
        top.observe(reading(2, 3, vec![requeued], faulty.clone(), 2_000));
        let kinds: Vec<EventKind> = top.events.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            vec![EventKind::Election, EventKind::Requeue, EventKind::GpuFault]
        );
        assert_eq!(top.events[0].text, "term 2: replica 3 leads");
        assert!(top.events[2].text.contains("XID 79"), "{:?}", top.events[2]);
        assert_eq!(gpu_cells(&faulty[0])[5], GpuCell::Failed);
    }

    #[test]
    fn a_failing_reading_is_one_event_until_it_changes() {
        let mut top = Top::default();
        top.failed("no controller answered".to_string(), 1);
        top.failed("no controller answered".to_string(), 2);
        assert_eq!(top.events.len(), 1);
        top.failed("permission denied".to_string(), 3);
        assert_eq!(top.events.len(), 2);
        for n in 0..EVENTS_KEPT {
            top.failed(format!("error {n}"), 4);
        }
        assert_eq!(top.events.len(), EVENTS_KEPT, "bounded");
    }
}
