//! What a starting agent does about the agents that ran on this node before
//! it, before it says hello to any leader:
//!
//! 1. Every process an earlier agent of this node started (found by the
//!    `CORRAL_AGENT_ID` in its environment, among the agents the journal names:
//!    another cluster's agent on the same machine may use the same node name)
//!    is SIGKILLed, and the agent waits until they are gone; so is everything
//!    in those agents' cgroups, where the node has them (a process that cleared
//!    its environment is there too), and every process of an unfinished
//!    attempt's user that its GPUs list (the journal records them: one that
//!    also left its cgroup, or ran where there is none, holds its GPU still). corral does not adopt a running attempt across an
//!    agent restart: its batch script is not this agent's child (its exit
//!    status would be lost), and its step tasks lost their output pipes with
//!    the old agent. Killing them and failing the attempt over (requeued,
//!    resumed from its checkpoint) is the one truthful outcome, and no GPU is
//!    registered free while they may still run on it.
//! 2. Every attempt the journal shows unfinished is reported lost (or
//!    unkillable, if its processes outlived the wait); every end the leader
//!    never acknowledged is reported again. These attempts stay in the hello
//!    until their reports are committed, so registration does not take them
//!    for lost before it knows how they ended.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use corral_proto::agent::AgentReport;
use corral_state::ids::JobId;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::time::Instant;

use crate::attempt_journal::{GpuHold, Journal, Record};
use crate::job::process::{Cgroups, Leftover, agents_processes};
use crate::supervisor::{AttemptKey, GpuHolders};

/// The end reports to send for earlier agents' attempts, oldest first.
/// `cgroups`: this agent's, beside which the earlier agents' are.
pub async fn recover(
    agent_id: &str,
    journal: &Journal,
    records: Vec<Record>,
    unkillable_timeout: Duration,
    (cgroups, gpus): (Option<&Cgroups>, Option<&GpuHolders>),
) -> Vec<(AttemptKey, AgentReport)> {
    let earlier: BTreeSet<String> = records
        .iter()
        .filter(|r| !r.acknowledged && r.agent_id != agent_id)
        .map(|r| r.agent_id.clone())
        .collect();
    if let Some(cgroups) = cgroups {
        kill_cgroups(cgroups, &earlier, unkillable_timeout).await;
    }
    // Unfinished attempts' GPUs, where this agent can list their processes.
    let holds: Vec<(AttemptKey, GpuHold)> = records
        .iter()
        .filter(|r| !r.acknowledged && r.end.is_none() && r.agent_id != agent_id)
        .filter_map(|r| Some((r.key(), r.gpus.clone()?)))
        .collect();
    let on_gpus = gpus.cloned().map(|gpus| (gpus, holds));
    let survivors = kill_leftovers(earlier, on_gpus, unkillable_timeout).await;
    let mut ends = Vec::new();
    for record in records.into_iter().filter(|r| !r.acknowledged) {
        let key = record.key();
        let end = match record.end {
            Some(end) => end,
            None => {
                let end = match survivors.get(&key) {
                    Some(pids) => AgentReport::Unkillable {
                        job: key.0,
                        attempt: key.1,
                        pids: pids.clone(),
                        after_s: unkillable_timeout.as_secs(),
                    },
                    None => AgentReport::Lost {
                        job: key.0,
                        attempt: key.1,
                        reason:
                            "the node's agent restarted while it ran; its processes were killed"
                                .into(),
                    },
                };
                if let Err(e) = journal.ended(key, &record.agent_id, &end) {
                    tracing::warn!(job = %key.0, attempt = key.1, "cannot record the attempt's end: {e}");
                }
                end
            }
        };
        tracing::info!(job = %key.0, attempt = key.1, ?end, "reporting how an earlier agent's attempt ended");
        ends.push((key, end));
    }
    ends
}

/// Kills everything in the `earlier` agents' cgroups (beside `cgroups`) and
/// removes them once empty, waiting up to `patience` in all. What survives is
/// found again by its environment, and reported, by [`kill_leftovers`].
async fn kill_cgroups(cgroups: &Cgroups, earlier: &BTreeSet<String>, patience: Duration) {
    let subtrees: Vec<Cgroups> = earlier.iter().map(|id| cgroups.sibling(id)).collect();
    let deadline = std::time::Instant::now() + patience;
    let left = tokio::task::spawn_blocking(move || {
        subtrees
            .iter()
            .flat_map(|tree| {
                tree.kill_all(deadline.saturating_duration_since(std::time::Instant::now()))
            })
            .collect::<Vec<i32>>()
    })
    .await
    .unwrap_or_default();
    if !left.is_empty() {
        tracing::error!(
            ?left,
            "processes in earlier agents' cgroups survived SIGKILL"
        );
    }
}

/// SIGKILLs the processes the `earlier` agents started (and those the GPUs
/// list of the attempts `on_gpus` holds), until they are gone or `patience`
/// runs out; returns those left, by attempt.
async fn kill_leftovers(
    earlier: BTreeSet<String>,
    on_gpus: Option<(GpuHolders, Vec<(AttemptKey, GpuHold)>)>,
    patience: Duration,
) -> BTreeMap<AttemptKey, Vec<i32>> {
    if earlier.is_empty() {
        return BTreeMap::new();
    }
    let earlier = std::sync::Arc::new(earlier);
    let on_gpus = std::sync::Arc::new(on_gpus);
    let deadline = Instant::now() + patience;
    let mut pause = Duration::from_millis(5);
    let mut announced = false;
    loop {
        let agents = std::sync::Arc::clone(&earlier);
        let on_gpus = std::sync::Arc::clone(&on_gpus);
        let leftovers: Vec<Leftover> = tokio::task::spawn_blocking(move || {
            let mut found = agents_processes(&agents);
            if let Some((gpus, holds)) = on_gpus.as_ref() {
                for ((job, attempt), hold) in holds {
                    found.extend(
                        gpus.on(&hold.uuids, hold.uid, (*job, *attempt))
                            .into_iter()
                            .map(|pid| Leftover {
                                pid,
                                job: job.0,
                                attempt: *attempt,
                            }),
                    );
                }
            }
            found.sort_by_key(|l| (l.pid, l.job, l.attempt));
            found.dedup_by_key(|l| l.pid);
            found
        })
        .await
        .unwrap_or_default();
        if leftovers.is_empty() {
            if announced {
                tracing::info!("every process of the earlier agents is gone");
            }
            return BTreeMap::new();
        }
        if !announced {
            announced = true;
            tracing::warn!(
                count = leftovers.len(),
                "killing the processes an earlier agent of this node left running (their attempts are reported lost and requeued)"
            );
        }
        for leftover in &leftovers {
            let _ = kill(Pid::from_raw(leftover.pid), Signal::SIGKILL);
        }
        if Instant::now() >= deadline {
            let mut left: BTreeMap<AttemptKey, Vec<i32>> = BTreeMap::new();
            for leftover in leftovers {
                left.entry((JobId(leftover.job), leftover.attempt))
                    .or_default()
                    .push(leftover.pid);
            }
            tracing::error!(?left, "processes of earlier agents survived SIGKILL");
            return left;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}
