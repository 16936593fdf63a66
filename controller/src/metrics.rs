//! The controller's metrics, served at `[listen] metrics` (`GET /metrics`;
//! see `corral-telemetry`). Every replica reports its Raft standing (term,
//! whether it leads, whether that leadership is unconfirmed, the last entry
//! it applied, leader changes it saw, and on the leader each follower's
//! lag); the leader alone, while a quorum answers it, reports the cluster's
//! queue and machines (jobs by state, partition, user and account; nodes
//! and GPUs by state; requeued attempts by cause; the checkpoint age of each
//! running job; GPU-hours charged by account and by user), so that summing
//! a series over the three replicas counts each job once. Proposal and
//! log-sync latencies are recorded where they happen (`corral-consensus`),
//! scheduling passes by the leader loop (`pass_instruments`). All of these
//! are read from the replica when scraped: nothing here runs between
//! scrapes but the watch that counts leader changes. A scrape reads the
//! whole state (a few milliseconds for a large queue), on a blocking thread
//! (`corral-telemetry` gathers there).

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use corral_consensus::Replica;
use corral_state::job::{EndCause, JobState};
use corral_state::node::{GpuHealth, NodeStateView};
use corral_state::time::Timestamp;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{AsyncInstrument, Counter, ObservableCounter, ObservableGauge};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// An instrument's values at one scrape, each with its labels.
type Samples<T = u64> = Vec<(T, Vec<KeyValue>)>;

/// What the controller registered; dropping it stops counting leader changes.
pub struct ControllerMetrics {
    _gauges: Vec<ObservableGauge<u64>>,
    _f64_gauges: Vec<ObservableGauge<f64>>,
    _counters: Vec<ObservableCounter<u64>>,
    _f64_counters: Vec<ObservableCounter<f64>>,
    leader_changes: JoinHandle<()>,
}

/// An instrument's callback.
type Callback<T> = Box<dyn Fn(&dyn AsyncInstrument<T>) + Send + Sync>;

/// A callback that reads `read` from the replica `of` at each scrape (none
/// once the replica is gone).
fn observe<T: 'static>(of: Weak<Replica>) -> impl Fn(fn(&Replica, &mut Samples<T>)) -> Callback<T> {
    move |read| {
        let of = of.clone();
        Box::new(move |observer: &dyn AsyncInstrument<T>| {
            let Some(replica) = of.upgrade() else {
                return;
            };
            let mut values = Vec::new();
            read(&replica, &mut values);
            for (value, labels) in values {
                observer.observe(value, &labels);
            }
        })
    }
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
    let raft = observe::<u64>(of.clone());
    let raft_f64 = observe::<f64>(of.clone());
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
            .with_description("On the leader: jobs by state, partition, user and account")
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
    gauges.push(
        meter
            .u64_observable_gauge("corral.raft.leadership.unconfirmed")
            .with_description(
                "1 while this replica is the leader Raft knows but no quorum has answered it lately (cut off, perhaps replaced behind a partition)",
            )
            .with_callback(raft(|r, out| {
                let unconfirmed =
                    r.leadership().borrow().is_self && *r.leads_without_quorum().borrow();
                out.push((u64::from(unconfirmed), Vec::new()));
            }))
            .build(),
    );
    let mut counters = Vec::new();
    counters.push(
        meter
            .u64_observable_counter("corral.job.requeues")
            .with_description(
                "On the leader: attempts of the jobs in the queue and its history that ended requeued, by cause",
            )
            .with_callback(raft(|r, out| {
                if leads(r) {
                    out.extend(requeues(r));
                }
            }))
            .build(),
    );
    let mut f64_counters = Vec::new();
    for (name, description, by) in [
        (
            "corral.accounting.account.gpu.hours",
            "On the leader: GPU-hours charged to each account (its direct charges, never decayed)",
            UsageBy::Account,
        ),
        (
            "corral.accounting.user.gpu.hours",
            "On the leader: GPU-hours charged to each user (never decayed)",
            UsageBy::User,
        ),
    ] {
        let read: fn(&Replica, &mut Samples<f64>) = match by {
            UsageBy::Account => |r, out| {
                if leads(r) {
                    out.extend(gpu_hours(r, UsageBy::Account));
                }
            },
            UsageBy::User => |r, out| {
                if leads(r) {
                    out.extend(gpu_hours(r, UsageBy::User));
                }
            },
        };
        f64_counters.push(
            meter
                .f64_observable_counter(name)
                .with_description(description)
                .with_callback(raft_f64(read))
                .build(),
        );
    }
    let f64_gauges = vec![
        meter
            .f64_observable_gauge("corral.job.checkpoint.age")
            .with_description(
                "On the leader: for each running job that has checkpointed, how long ago its last checkpoint committed",
            )
            .with_unit("s")
            .with_callback(raft_f64(|r, out| {
                if leads(r) {
                    out.extend(checkpoint_ages(r, crate::clock::now()));
                }
            }))
            .build(),
    ];
    let changes = meter
        .u64_counter("corral.raft.leader.changes")
        .with_description("Times this replica saw the leader change (to another, or to none known)")
        .build();
    let leader_changes = tokio::spawn(count_leader_changes(replica.leadership(), changes));
    ControllerMetrics {
        _gauges: gauges,
        _f64_gauges: f64_gauges,
        _counters: counters,
        _f64_counters: f64_counters,
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
                ["state", "partition", "user", "account"],
                s.jobs().values().map(|j| {
                    [
                        job_state(j.state),
                        j.partition.clone(),
                        j.spec.user.clone(),
                        j.account.clone(),
                    ]
                }),
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

/// Attempts that ended requeued, by cause.
fn requeues(replica: &Replica) -> Samples {
    replica
        .read_local(|s| {
            counted(
                ["cause"],
                s.jobs()
                    .values()
                    .flat_map(|j| j.attempts.iter())
                    .filter_map(|a| a.end.as_ref())
                    .filter(|end| end.state == JobState::Requeued)
                    .map(|end| [end_cause(&end.cause).to_string()]),
            )
        })
        .unwrap_or_default()
}

/// Whose usage a GPU-hours series reports.
#[derive(Clone, Copy)]
enum UsageBy {
    Account,
    User,
}

/// GPU-hours charged, by account or by user.
fn gpu_hours(replica: &Replica, by: UsageBy) -> Samples<f64> {
    const MS_PER_HOUR: f64 = 3_600_000.0;
    replica
        .read_local(|s| {
            let accounting = s.accounting();
            let (label, table) = match by {
                UsageBy::Account => ("account", &accounting.by_account),
                UsageBy::User => ("user", &accounting.by_user),
            };
            table
                .iter()
                .map(|(name, usage)| {
                    (
                        usage.gpu_ms as f64 / MS_PER_HOUR,
                        vec![KeyValue::new(label, name.clone())],
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Seconds since each running job's last checkpoint, as of `now`.
fn checkpoint_ages(replica: &Replica, now: Timestamp) -> Samples<f64> {
    replica
        .read_local(|s| {
            s.jobs()
                .values()
                .filter(|j| j.state == JobState::Running)
                .filter_map(|j| {
                    let at = j.last_checkpoint.as_ref()?.at;
                    let age_ms = now.0.saturating_sub(at.0);
                    Some((
                        age_ms as f64 / 1000.0,
                        vec![
                            KeyValue::new("job", j.id.0.to_string()),
                            KeyValue::new("user", j.spec.user.clone()),
                            KeyValue::new("account", j.account.clone()),
                        ],
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// An attempt's end as a label.
fn end_cause(cause: &EndCause) -> &'static str {
    match cause {
        EndCause::Exited(_) => "exited",
        EndCause::Cancelled { .. } => "cancelled",
        EndCause::TimeLimit => "time_limit",
        EndCause::NodeFailure { .. } => "node_failure",
        EndCause::GpuFailure { .. } => "gpu_failure",
        EndCause::Preempted { .. } => "preempted",
        EndCause::RequeueRequested { .. } => "requeue_requested",
        EndCause::ApplicationXid { .. } => "application_xid",
    }
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
