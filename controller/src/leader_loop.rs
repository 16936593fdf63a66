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
use corral_state::node_liveness::NodeLiveness;
use tokio::sync::{Notify, watch};
use tokio::time::{Instant, MissedTickBehavior};

use crate::agent_gateway::liveness::{Heartbeats, leader_actor};
use crate::clock;
use crate::pass_instruments::{PassInstruments, PassSummary};
use crate::retry_pause::RetryPause;

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
    /// This controller's file's `[liveness]`: set as the cluster's when it
    /// has none yet (see [`settle_liveness`]).
    pub file_liveness: NodeLiveness,
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

/// The first pause after a term that ended at once (its first proposal was
/// refused while the watch still said this replica leads).
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(100);
/// The longest such pause: a leader cut off for minutes tries this often.
const MOST_RETRY_PAUSE: Duration = Duration::from_secs(2);
/// A term led this long was a real one: the pauses start over.
const HEALTHY_TERM: Duration = Duration::from_secs(10);

/// Runs until `stop` turns true. Follows leadership: it works only while
/// `replica` leads and a quorum acknowledges it. Passes start nothing on the
/// nodes `heartbeats` says do not respond.
///
/// Every turn waits on something: a change of leadership, a change of quorum
/// contact, or, after a term that ended at once while this replica still
/// seemed to lead, a pause that doubles up to [`MOST_RETRY_PAUSE`]. A leader
/// cut off from its peers therefore goes quiet instead of starting and ending
/// terms as fast as the CPU allows.
pub async fn run(
    replica: Arc<Replica>,
    timing: LeaderLoopSettings,
    (wake, committed): (Arc<Notify>, Arc<Notify>),
    heartbeats: Heartbeats,
    mut stop: watch::Receiver<bool>,
) {
    let mut leadership = replica.leadership();
    let mut without_quorum = replica.leads_without_quorum();
    let mut stats = LeaderStats::default();
    let instruments = PassInstruments::new();
    let mut pause = RetryPause::new(FIRST_RETRY_PAUSE, MOST_RETRY_PAUSE, HEALTHY_TERM);
    loop {
        if *stop.borrow() {
            return;
        }
        let leads = leadership.borrow_and_update().is_self;
        let cut_off = *without_quorum.borrow_and_update();
        if !leads || cut_off {
            // Not leading, or leading without a quorum (the proposer refuses
            // everything then): wait until either changes.
            tokio::select! {
                changed = leadership.changed() => if changed.is_err() { return },
                changed = without_quorum.changed() => if changed.is_err() { return },
                _ = stop.changed() => return,
            }
            continue;
        }
        let term = leadership.borrow().term;
        let began = Instant::now();
        let went = lead(
            &replica,
            timing,
            (&wake, &committed),
            &heartbeats,
            &mut leadership,
            &mut stop,
            (&mut stats, &instruments),
        )
        .await;
        if *stop.borrow() {
            return;
        }
        let lasted = began.elapsed();
        let wait = pause.after(lasted);
        if went == Term::Led {
            tracing::info!(term, ?stats, "no longer leading");
        } else if pause.failures().is_power_of_two() {
            // The same refusal again and again: logged at 2, 4, 8, ... in a row.
            tracing::warn!(
                term,
                in_a_row = pause.failures(),
                "this replica seems to lead but its proposals are refused (cut off from its peers?); trying again every {:?} at most",
                MOST_RETRY_PAUSE
            );
        }
        if !leadership.borrow().is_self {
            continue;
        }
        // Still "leading" as the watch sees it, yet the term ended: wait for a
        // change or the pause, whichever comes first.
        tokio::select! {
            changed = leadership.changed() => if changed.is_err() { return },
            changed = without_quorum.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
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
    (stats, instruments): (&mut LeaderStats, &PassInstruments),
) -> Term {
    // Before any plan: a replica of an older build stops here instead of
    // applying this build's entries by its own rules.
    let format = Command::StoredFormat {
        format: corral_state::snapshot::FORMAT_VERSION,
    };
    if let Err(NotLeading) = propose(replica, format).await {
        return Term::Refused;
    }
    if let Err(NotLeading) = settle_liveness(replica, &timing.file_liveness).await {
        return Term::Refused;
    }
    tracing::info!(
        term = leadership.borrow().term,
        "leading: scheduling passes and ticks start"
    );
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
                if changed.is_err() || !leadership.borrow().is_self { return Term::Led; }
                continue;
            }
            _ = stop.changed() => return Term::Led,
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
                        let began = std::time::Instant::now();
                        let plan = corral_scheduler::plan_with(state, now, &inputs);
                        let summary = PassSummary::of(&plan, began.elapsed());
                        (plan.to_command(now), summary)
                    })
                    .await
                {
                    Ok((Some(command), summary)) => {
                        instruments.record(&summary);
                        stats.plans += 1;
                        propose(replica, command).await
                    }
                    Ok((None, summary)) => {
                        instruments.record(&summary);
                        Ok(())
                    }
                    Err(e) => {
                        tracing::warn!("cannot read state for a pass: {e}");
                        Ok(())
                    }
                }
            }
        };
        match outcome {
            Err(NotLeading) => return Term::Led,
            // Plans start attempts and ticks end them: agents hear of it now.
            Ok(()) => committed.notify_waiters(),
        }
    }
}

/// How a term of leadership went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Term {
    /// Its first proposal was refused: it never began.
    Refused,
    /// It began, and has ended.
    Led,
}

enum Work {
    Tick,
    Pass,
}

struct NotLeading;

/// At a term's start: a cluster without liveness settings (new, or
/// upgraded from a build that kept them per controller) gets this file's;
/// one that has them keeps them, and a file that says otherwise is named in
/// the log, since its values are not the ones used.
async fn settle_liveness(replica: &Replica, file: &NodeLiveness) -> Result<(), NotLeading> {
    let replicated = match replica.read_local(|s| s.liveness().map(|l| l.current)) {
        Ok(replicated) => replicated,
        Err(e) => {
            tracing::warn!("cannot read the cluster's liveness settings: {e}");
            return Ok(());
        }
    };
    match replicated {
        None => {
            tracing::info!(
                heartbeat_ms = file.heartbeat_ms,
                lease_ms = file.lease_ms,
                down_margin_ms = file.down_margin_ms,
                "the cluster has no liveness settings yet: setting this controller's [liveness]"
            );
            let set = Command::SetLiveness {
                liveness: *file,
                by: leader_actor(),
                at: clock::now(),
            };
            propose(replica, set).await
        }
        Some(cluster) if cluster != *file => {
            tracing::warn!(
                "this controller's [liveness] (heartbeat {} ms, lease {} ms, margin {} ms) differs from the cluster's (heartbeat {} ms, lease {} ms, margin {} ms), which are the ones used: change them with `corral admin liveness set`, and the file to match",
                file.heartbeat_ms,
                file.lease_ms,
                file.down_margin_ms,
                cluster.heartbeat_ms,
                cluster.lease_ms,
                cluster.down_margin_ms
            );
            Ok(())
        }
        Some(_) => Ok(()),
    }
}

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
