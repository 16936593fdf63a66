//! The controller's metrics, served at `[listen] metrics` (`GET /metrics`;
//! see `corral-telemetry`). Every replica reports its Raft standing (term,
//! whether it leads, the last entry it applied, leader changes it saw, and
//! on the leader each follower's lag); the leader alone reports the
//! cluster's queue and machines (jobs by state and partition, nodes and
//! GPUs by state), so that summing a series over the three replicas counts
//! each job once. Proposal and log-sync latencies are recorded where they
//! happen (`corral-consensus`). All are read from the replica when scraped:
//! nothing here runs between scrapes but the watch that counts leader
//! changes. A scrape reads the whole state (a few milliseconds for a large
//! queue), on a blocking thread (`corral-telemetry` gathers there).

use std::collections::BTreeMap;
use std::sync::Arc;

use corral_consensus::Replica;
use corral_state::job::JobState;
use corral_state::node::{GpuHealth, NodeStateView};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, ObservableGauge};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A gauge's values at one scrape, each with its labels.
type Samples = Vec<(u64, Vec<KeyValue>)>;

/// What the controller registered; dropping it stops counting leader changes.
pub struct ControllerMetrics {
    _gauges: Vec<ObservableGauge<u64>>,
    leader_changes: JoinHandle<()>,
}

impl Drop for ControllerMetrics {
    fn drop(&mut self) {
        self.leader_changes.abort();
    }
}

/// Registers the controller's instruments for `replica`.
pub fn register(replica: &Arc<Replica>) -> ControllerMetrics {
    let meter = corral_telemetry::meter();
    let mut gauges = Vec::new();
    let of = Arc::downgrade(replica);
    let raft = move |read: fn(&Replica, &mut Samples)| {
        let of = of.clone();
        move |observer: &dyn opentelemetry::metrics::AsyncInstrument<u64>| {
            let Some(replica) = of.upgrade() else {
                return;
            };
            let mut values = Vec::new();
            read(&replica, &mut values);
            for (value, labels) in values {
                observer.observe(value, &labels);
            }
        }
    };
    gauges.push(
        meter
            .u64_observable_gauge("corral.raft.term")
            .with_description("The Raft term this replica is in")
            .with_callback(raft(|r, out| {
                out.push((r.leadership().borrow().term, Vec::new()))
            }))
            .build(),
    );
    gauges.push(
        meter
            .u64_observable_gauge("corral.raft.leader")
            .with_description("1 while this replica leads (with a quorum's contact), else 0")
            .with_callback(raft(|r, out| out.push((u64::from(leads(r)), Vec::new()))))
            .build(),
    );
    gauges.push(
        meter
            .u64_observable_gauge("corral.raft.last.applied")
            .with_description("The index of the last log entry this replica applied")
            .with_callback(raft(|r, out| {
                out.push((r.last_applied().unwrap_or(0), Vec::new()));
            }))
            .build(),
    );
    gauges.push(
        meter
            .u64_observable_gauge("corral.raft.follower.lag")
            .with_description("On the leader: entries each follower lags behind its log")
            .with_unit("{entry}")
            .with_callback(raft(|r, out| {
                if !r.leadership().borrow().is_self {
                    return;
                }
                for member in r.members() {
                    if member.id == r.id() {
                        continue;
                    }
                    if let Some(lag) = r.follower_lag(member.id) {
                        out.push((lag, vec![KeyValue::new("follower", member.id.to_string())]));
                    }
                }
            }))
            .build(),
    );
    gauges.push(
        meter
            .u64_observable_gauge("corral.jobs")
            .with_description("On the leader: jobs by state and partition")
            .with_callback(raft(|r, out| {
                if leads(r) {
                    out.extend(jobs(r));
                }
            }))
            .build(),
    );
    gauges.push(
        meter
            .u64_observable_gauge("corral.nodes")
            .with_description(
                "On the leader: nodes by state (idle, mixed, allocated, draining, drained, down)",
            )
            .with_callback(raft(|r, out| {
                if leads(r) {
                    out.extend(nodes(r));
                }
            }))
            .build(),
    );
    gauges.push(
        meter
            .u64_observable_gauge("corral.gpus")
            .with_description(
                "On the leader: GPUs by state (free, allocated, drained, failed, down)",
            )
            .with_callback(raft(|r, out| {
                if leads(r) {
                    out.extend(gpus(r));
                }
            }))
            .build(),
    );
    let changes = meter
        .u64_counter("corral.raft.leader.changes")
        .with_description("Times this replica saw the leader change (to another, or to none known)")
        .build();
    let leader_changes = tokio::spawn(count_leader_changes(replica.leadership(), changes));
    ControllerMetrics {
        _gauges: gauges,
        leader_changes,
    }
}

/// True while `replica` leads with a quorum's contact: a leader cut off from
/// the majority (replaced behind a partition, perhaps) reports no queue, so
/// a sum over the replicas never counts a job twice.
fn leads(replica: &Replica) -> bool {
    replica.leadership().borrow().is_self && !*replica.leads_without_quorum().borrow()
}

/// Counts each change of the leader `leadership` names.
async fn count_leader_changes(
    mut leadership: watch::Receiver<corral_consensus::Leadership>,
    changes: Counter<u64>,
) {
    let mut leader = leadership
        .borrow_and_update()
        .leader
        .as_ref()
        .map(|(id, _)| *id);
    while leadership.changed().await.is_ok() {
        let now = leadership
            .borrow_and_update()
            .leader
            .as_ref()
            .map(|(id, _)| *id);
        if now != leader {
            leader = now;
            changes.add(1, &[]);
        }
    }
}

/// Counts `keys`, one per item, as gauge values labelled by `names`.
fn counted<const N: usize>(
    names: [&'static str; N],
    keys: impl Iterator<Item = [String; N]>,
) -> Samples {
    let mut counts: BTreeMap<[String; N], u64> = BTreeMap::new();
    for key in keys {
        *counts.entry(key).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(key, n)| {
            let labels = names
                .iter()
                .zip(key)
                .map(|(name, value)| KeyValue::new(*name, value))
                .collect();
            (n, labels)
        })
        .collect()
}

fn jobs(replica: &Replica) -> Samples {
    replica
        .read_local(|s| {
            counted(
                ["state", "partition"],
                s.jobs()
                    .values()
                    .map(|j| [job_state(j.state).to_string(), j.partition.clone()]),
            )
        })
        .unwrap_or_default()
}

fn nodes(replica: &Replica) -> Samples {
    replica
        .read_local(|s| {
            counted(
                ["state"],
                s.nodes()
                    .values()
                    .map(|n| [node_state(n.state_view()).to_string()]),
            )
        })
        .unwrap_or_default()
}

fn gpus(replica: &Replica) -> Samples {
    replica
        .read_local(|s| {
            counted(
                ["state"],
                s.nodes().values().flat_map(|n| {
                    n.gpus.iter().map(move |g| {
                        let state = if !n.is_up() {
                            "down"
                        } else if matches!(g.health, GpuHealth::Unhealthy { .. }) {
                            "failed"
                        } else if g.allocated_to.is_some() {
                            "allocated"
                        } else if g.drain.is_some() || n.drain.is_some() {
                            "drained"
                        } else {
                            "free"
                        };
                        [state.to_string()]
                    })
                }),
            )
        })
        .unwrap_or_default()
}

/// A job state as a label: Slurm's name, lowercased (`pending`, `running`).
fn job_state(state: JobState) -> String {
    state.slurm_name().to_ascii_lowercase()
}

fn node_state(state: NodeStateView) -> &'static str {
    match state {
        NodeStateView::Idle => "idle",
        NodeStateView::Mixed => "mixed",
        NodeStateView::Allocated => "allocated",
        NodeStateView::Draining => "draining",
        NodeStateView::Drained => "drained",
        NodeStateView::Down => "down",
    }
}
