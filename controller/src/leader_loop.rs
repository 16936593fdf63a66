//! The leader's loop: while this replica leads, run scheduling passes (on a timer
//! and when woken by a change) and propose their plans, and propose `Tick` with
//! this replica's clock so time limits, preemption grace, reservation windows and
//! usage decay advance. Everything it needs is replicated state, so a new leader
//! simply starts this loop and carries on; only which nodes have not answered
//! lately (the gateway's soft state) keeps new work off them.

use std::sync::Arc;
use std::time::Duration;

use corral_consensus::{ProposeError, Replica};
use corral_state::Command;
use tokio::sync::{Notify, watch};
use tokio::time::{Instant, MissedTickBehavior};

use crate::agent_gateway::liveness::Heartbeats;
use crate::clock;

/// How often the loop works, and the leader's own say in its plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderLoopSettings {
    /// A scheduling pass at least this often (and whenever woken).
    pub schedule_interval: Duration,
    /// A `Tick` this often.
    pub tick_interval: Duration,
    /// `[leader] preempt_send_user_signal` (Slurm's SlurmctldParameters
    /// option): a victim's preemption notice is its own `--signal`.
    pub preempt_send_user_signal: bool,
}

/// Counters the loop keeps, for tests and logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaderStats {
    /// Passes run.
    pub passes: u64,
    /// Plans proposed (passes that changed something).
    pub plans: u64,
    /// Ticks proposed.
    pub ticks: u64,
}

/// Runs until `stop` turns true. Follows leadership: it works only while
/// `replica` leads. Passes start nothing on the nodes `heartbeats` says do not
/// respond.
pub async fn run(
    replica: Arc<Replica>,
    timing: LeaderLoopSettings,
    (wake, committed): (Arc<Notify>, Arc<Notify>),
    heartbeats: Heartbeats,
    mut stop: watch::Receiver<bool>,
) {
    let mut leadership = replica.leadership();
    let mut stats = LeaderStats::default();
    loop {
        if *stop.borrow() {
            return;
        }
        let leads = leadership.borrow_and_update().is_self;
        if !leads {
            tokio::select! {
                changed = leadership.changed() => if changed.is_err() { return },
                _ = stop.changed() => return,
            }
            continue;
        }
        let term = leadership.borrow().term;
        tracing::info!(term, "leading: scheduling passes and ticks start");
        lead(
            &replica,
            timing,
            (&wake, &committed),
            &heartbeats,
            &mut leadership,
            &mut stop,
            &mut stats,
        )
        .await;
        tracing::info!(term, ?stats, "no longer leading");
    }
}

/// One term of leadership.
async fn lead(
    replica: &Replica,
    timing: LeaderLoopSettings,
    (wake, committed): (&Notify, &Notify),
    heartbeats: &Heartbeats,
    leadership: &mut watch::Receiver<corral_consensus::Leadership>,
    stop: &mut watch::Receiver<bool>,
    stats: &mut LeaderStats,
) {
    // Before any plan: a replica of an older build stops here instead of
    // applying this build's entries by its own rules.
    let format = Command::StoredFormat {
        format: corral_state::snapshot::FORMAT_VERSION,
    };
    if let Err(NotLeading) = propose(replica, format).await {
        return;
    }
    let mut ticks = tokio::time::interval_at(Instant::now(), timing.tick_interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut passes = tokio::time::interval_at(Instant::now(), timing.schedule_interval);
    passes.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let work = tokio::select! {
            _ = ticks.tick() => Work::Tick,
            _ = passes.tick() => Work::Pass,
            () = wake.notified() => Work::Pass,
            changed = leadership.changed() => {
                if changed.is_err() || !leadership.borrow().is_self { return; }
                continue;
            }
            _ = stop.changed() => return,
        };
        let outcome = match work {
            Work::Tick => {
                stats.ticks += 1;
                propose(replica, Command::Tick { at: clock::now() }).await
            }
            Work::Pass => {
                stats.passes += 1;
                let now = clock::now();
                let inputs = corral_scheduler::PassInputs {
                    avoid: heartbeats.not_responding(),
                    preempt_send_user_signal: timing.preempt_send_user_signal,
                };
                // On a blocking thread, under the state's read lock: applies
                // wait for the pass without holding a runtime thread.
                match replica
                    .read_local_long(move |state| {
                        corral_scheduler::plan_with(state, now, &inputs).to_command(now)
                    })
                    .await
                {
                    Ok(Some(command)) => {
                        stats.plans += 1;
                        propose(replica, command).await
                    }
                    Ok(None) => Ok(()),
                    Err(e) => {
                        tracing::warn!("cannot read state for a pass: {e}");
                        Ok(())
                    }
                }
            }
        };
        match outcome {
            Err(NotLeading) => return,
            // Plans start attempts and ticks end them: agents hear of it now.
            Ok(()) => committed.notify_waiters(),
        }
    }
}

enum Work {
    Tick,
    Pass,
}

struct NotLeading;

async fn propose(replica: &Replica, command: Command) -> Result<(), NotLeading> {
    match replica.propose(command).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(rejection)) => {
            // Plans may be stale by design; the applier refuses what no longer fits.
            tracing::debug!("leader command refused: {rejection}");
            Ok(())
        }
        Err(ProposeError::NotLeader { .. }) => Err(NotLeading),
        Err(e) => {
            tracing::warn!("leader command not committed: {e}");
            Ok(())
        }
    }
}
