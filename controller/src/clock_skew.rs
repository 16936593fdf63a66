//! Followers' clocks, as the leader sees them. Only the leader stamps time
//! (its proposer stamps every command), so a follower's wrong clock changes
//! nothing while it follows; the day it leads, a majority of the others
//! outvotes it. The leader asks
//! every member for its clock every [`LOOK_EVERY`] (and at once when it
//! starts to lead), halves the round trip to estimate the offset, logs offsets
//! beyond [`WARN_BEYOND`] and shows them in `corral cluster`. The leader's own
//! stamps are bounded by them ([`crate::cluster_clock`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use corral_consensus::{Replica, ReplicaId};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::clock;

/// How often the leader looks at its followers' clocks.
pub const LOOK_EVERY: Duration = Duration::from_secs(10);

/// How soon a leader that could not read a majority's clocks looks again.
pub const LOOK_AGAIN: Duration = Duration::from_millis(200);

/// Offsets beyond this are logged as warnings and flagged in `corral cluster`.
pub const WARN_BEYOND: Duration = Duration::from_secs(1);

/// Readings older than this are not used to bound the leader's stamps.
pub const READING_LIFETIME: Duration = Duration::from_secs(30);

/// Each follower's clock as the leader last read it (known on the leader only).
#[derive(Debug, Clone)]
pub struct ClockOffsets {
    inner: Arc<Mutex<BTreeMap<ReplicaId, Reading>>>,
    /// Counts the changes of `inner`, so a stamp can wait for a reading.
    changes: Arc<watch::Sender<u64>>,
}

impl Default for ClockOffsets {
    fn default() -> Self {
        ClockOffsets {
            inner: Arc::default(),
            changes: Arc::new(watch::channel(0).0),
        }
    }
}

/// One reading of a follower's clock.
#[derive(Debug, Clone, Copy)]
struct Reading {
    /// Its clock minus the leader's at the reading, ms.
    offset_ms: i64,
    /// What its clock read, ms.
    remote_ms: u64,
    /// When, on the leader's monotonic clock (the round trip's middle).
    at: Instant,
}

impl ClockOffsets {
    /// The offset of replica `id`'s clock, when known.
    pub fn of(&self, id: ReplicaId) -> Option<i64> {
        Some(self.inner.lock().ok()?.get(&id)?.offset_ms)
    }

    /// Replica `id`'s clock now, ms: its last reading moved on by the
    /// leader's monotonic clock, so a step of the leader's own wall clock
    /// since does not move it (`None` when unknown or older than
    /// [`READING_LIFETIME`]).
    pub fn clock_now(&self, id: ReplicaId) -> Option<u64> {
        let reading = *self.inner.lock().ok()?.get(&id)?;
        let age = reading.at.elapsed();
        (age <= READING_LIFETIME).then(|| {
            reading
                .remote_ms
                .saturating_add(u64::try_from(age.as_millis()).unwrap_or(u64::MAX))
        })
    }

    fn readings(&self) -> BTreeMap<ReplicaId, Reading> {
        self.inner
            .lock()
            .map(|inner| inner.clone())
            .unwrap_or_default()
    }

    /// Wakes at every change of the readings.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn set(&self, readings: BTreeMap<ReplicaId, Reading>) {
        if let Ok(mut inner) = self.inner.lock() {
            *inner = readings;
        }
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// The offset of a clock that read `remote_ms` between `sent_ms` and
/// `received_ms` on the leader's clock: the remote reading is taken to be at
/// the middle of the round trip.
pub fn offset_ms(sent_ms: u64, remote_ms: u64, received_ms: u64) -> i64 {
    let middle = sent_ms / 2 + received_ms / 2 + (sent_ms % 2 + received_ms % 2) / 2;
    i64::try_from(remote_ms).unwrap_or(i64::MAX) - i64::try_from(middle).unwrap_or(i64::MAX)
}

/// Watches the followers' clocks while this replica leads; runs until `stop`.
pub async fn watch(replica: Arc<Replica>, offsets: ClockOffsets, mut stop: watch::Receiver<bool>) {
    let mut warned: BTreeMap<ReplicaId, bool> = BTreeMap::new();
    let mut leadership = replica.leadership();
    let mut read_majority;
    loop {
        leadership.borrow_and_update();
        if replica.leadership().borrow().is_self {
            // Every member at once, each reading published as it comes: the
            // first stamps of a term wait for a majority's clocks
            // (`cluster_clock`), and one member that does not answer (its
            // read times out after 2 s) must not hold up the others.
            let mut reads = tokio::task::JoinSet::new();
            for member in replica.members() {
                if member.id == replica.id() {
                    continue;
                }
                let replica = Arc::clone(&replica);
                reads.spawn(async move {
                    let (sent, sent_at) = (clock::now().as_ms(), Instant::now());
                    let metrics = replica.peer_metrics(member.id).await.ok()?;
                    let offset = offset_ms(sent, metrics.clock_ms, clock::now().as_ms());
                    let middle = sent_at + sent_at.elapsed() / 2;
                    Some((
                        member.id,
                        Reading {
                            offset_ms: offset,
                            remote_ms: metrics.clock_ms,
                            at: middle,
                        },
                    ))
                });
            }
            // Last round's readings stand (they age out by themselves) until
            // this round's replace them.
            let mut known = offsets.readings();
            let mut found = BTreeMap::new();
            while let Some(read) = reads.join_next().await {
                let Ok(Some((id, reading))) = read else {
                    continue;
                };
                warn_of_offset(&mut warned, id, reading.offset_ms);
                found.insert(id, reading);
                known.insert(id, reading);
                offsets.set(known.clone());
            }
            // Until a majority's clocks are read (peers still starting after
            // an outage), look again soon: the leader's stamps are bounded by
            // them (`cluster_clock`).
            let voters: Vec<ReplicaId> = replica
                .members()
                .iter()
                .filter(|m| m.voter)
                .map(|m| m.id)
                .collect();
            let read_voters = voters
                .iter()
                .filter(|id| **id != replica.id() && found.contains_key(id))
                .count();
            read_majority = read_voters + 1 > voters.len() / 2;
            offsets.set(found);
        } else {
            read_majority = true;
            offsets.set(BTreeMap::new());
        }
        // A new leader looks at once.
        let next = if read_majority {
            LOOK_EVERY
        } else {
            LOOK_AGAIN
        };
        tokio::select! {
            () = tokio::time::sleep(next) => {}
            changed = leadership.changed() => if changed.is_err() { return },
            _ = stop.changed() => return,
        }
    }
}

/// Logs a member's offset beyond [`WARN_BEYOND`] (and its return within).
fn warn_of_offset(warned: &mut BTreeMap<ReplicaId, bool>, id: ReplicaId, offset: i64) {
    let far = offset.unsigned_abs() > WARN_BEYOND.as_millis() as u64;
    if far {
        tracing::warn!(
            replica = id,
            offset_ms = offset,
            "replica {id}'s clock is {:.1} s {} the leader's: only the leader stamps time, but if it leads, the cluster's time jumps with it; check its time synchronisation",
            offset.unsigned_abs() as f64 / 1000.0,
            if offset > 0 { "ahead of" } else { "behind" }
        );
    } else if warned.get(&id).copied().unwrap_or(false) {
        tracing::info!(
            replica = id,
            offset_ms = offset,
            "replica {id}'s clock agrees with the leader's again"
        );
    }
    warned.insert(id, far);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reading moves on with the monotonic clock, not with the leader's
    /// wall clock: were the leader's clock stepped an hour after it, the
    /// peer's clock would still read the true time.
    #[test]
    fn a_reading_moves_on_by_the_monotonic_clock_and_expires() {
        let offsets = ClockOffsets::default();
        let two_s_ago = Instant::now() - Duration::from_secs(2);
        offsets.set(BTreeMap::from([
            (
                2,
                Reading {
                    offset_ms: 5,
                    remote_ms: 1_000_000,
                    at: two_s_ago,
                },
            ),
            (
                3,
                Reading {
                    offset_ms: 0,
                    remote_ms: 1_000_000,
                    at: Instant::now() - READING_LIFETIME - Duration::from_secs(1),
                },
            ),
        ]));
        let now = offsets.clock_now(2).expect("fresh");
        assert!((1_002_000..1_003_000).contains(&now), "{now}");
        assert_eq!(offsets.of(2), Some(5));
        assert_eq!(offsets.clock_now(3), None, "expired");
        assert_eq!(offsets.clock_now(4), None, "unknown");
    }

    #[test]
    fn the_remote_reading_is_placed_in_the_middle_of_the_round_trip() {
        assert_eq!(offset_ms(1_000, 1_050, 1_100), 0);
        assert_eq!(offset_ms(1_000, 3_601_050, 1_100), 3_600_000);
        assert_eq!(offset_ms(1_000, 50, 1_100), -1_000);
        assert_eq!(offset_ms(1, 1, 2), 0);
        assert_eq!(offset_ms(u64::MAX, u64::MAX, u64::MAX), 0);
    }
}
