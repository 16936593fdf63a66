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

use crate::clock;

/// How often the leader looks at its followers' clocks.
pub const LOOK_EVERY: Duration = Duration::from_secs(10);

/// Offsets beyond this are logged as warnings and flagged in `corral cluster`.
pub const WARN_BEYOND: Duration = Duration::from_secs(1);

/// Each follower's clock minus the leader's, ms (known on the leader only).
#[derive(Debug, Clone, Default)]
pub struct ClockOffsets {
    inner: Arc<Mutex<BTreeMap<ReplicaId, i64>>>,
}

impl ClockOffsets {
    /// The offset of replica `id`'s clock, when known.
    pub fn of(&self, id: ReplicaId) -> Option<i64> {
        self.inner.lock().ok()?.get(&id).copied()
    }

    fn set(&self, offsets: BTreeMap<ReplicaId, i64>) {
        if let Ok(mut inner) = self.inner.lock() {
            *inner = offsets;
        }
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
    loop {
        leadership.borrow_and_update();
        if replica.leadership().borrow().is_self {
            let mut found = BTreeMap::new();
            for member in replica.members() {
                if member.id == replica.id() {
                    continue;
                }
                let sent = clock::now().as_ms();
                let Ok(metrics) = replica.peer_metrics(member.id).await else {
                    continue;
                };
                let offset = offset_ms(sent, metrics.clock_ms, clock::now().as_ms());
                let far = offset.unsigned_abs() > WARN_BEYOND.as_millis() as u64;
                if far {
                    tracing::warn!(
                        replica = member.id,
                        offset_ms = offset,
                        "replica {}'s clock is {:.1} s {} the leader's: only the leader stamps time, but if it leads, the cluster's time jumps with it; check its time synchronisation",
                        member.id,
                        offset.unsigned_abs() as f64 / 1000.0,
                        if offset > 0 { "ahead of" } else { "behind" }
                    );
                } else if warned.get(&member.id).copied().unwrap_or(false) {
                    tracing::info!(
                        replica = member.id,
                        offset_ms = offset,
                        "replica {}'s clock agrees with the leader's again",
                        member.id
                    );
                }
                warned.insert(member.id, far);
                found.insert(member.id, offset);
            }
            offsets.set(found);
        } else {
            offsets.set(BTreeMap::new());
        }
        // A new leader looks at once: its stamps are bounded by these
        // offsets (`cluster_clock`).
        tokio::select! {
            () = tokio::time::sleep(LOOK_EVERY) => {}
            changed = leadership.changed() => if changed.is_err() { return },
            _ = stop.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remote_reading_is_placed_in_the_middle_of_the_round_trip() {
        assert_eq!(offset_ms(1_000, 1_050, 1_100), 0);
        assert_eq!(offset_ms(1_000, 3_601_050, 1_100), 3_600_000);
        assert_eq!(offset_ms(1_000, 50, 1_100), -1_000);
        assert_eq!(offset_ms(1, 1, 2), 0);
        assert_eq!(offset_ms(u64::MAX, u64::MAX, u64::MAX), 0);
    }
}
