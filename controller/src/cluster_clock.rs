//! The time the leader stamps on every command: its own clock, but never
//! one that disagrees with the cluster's. State time only moves forward, so a
//! leader an hour fast would time out every time-limited job, bill an hour of
//! every running GPU and leave the cluster's time ahead for good; one an hour
//! slow would stop time for an hour.
//!
//! Two references bound it:
//! - **The voters' clocks.** The leader reads its followers' clocks
//!   ([`crate::clock_skew`]: at once when it starts to lead, then every
//!   [`crate::clock_skew::LOOK_EVERY`]) and moves each reading on by its own
//!   monotonic clock, so a step of its wall clock between readings shows at
//!   once. When a majority of the voters' clocks
//!   (its own among them) agree within [`AGREE_WITHIN`], the leader stamps their
//!   median: a leader whose clock is off is outvoted, and says so.
//! - **The replicated time.** A term's first stamps wait (up to
//!   [`FIRST_READ_WAIT`]) for a majority's clocks to be read and, unless they
//!   agree, for the term's anchor: the state's time once the leader applied
//!   what its log held when the term began. With no agreeing majority, the
//!   least-ahead clock the anchor vouches for (within [`VOUCH_AHEAD`] of it);
//!   without an anchor still, the least of the known clocks. When the anchor
//!   vouches for none, its own clock held within [`ANCHOR_BOUND`] of the
//!   anchor moved on by its monotonic clock. The anchor is taken once per
//!   term, never from its own stamps, so a fast clock cannot ratchet it.
//!
//! [`stamp_time`] decides, purely; [`ClusterClock`] gathers what it needs.

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use corral_consensus::Replica;
use corral_state::time::Timestamp;

use crate::clock;
use crate::clock_skew::ClockOffsets;

/// Clocks within this of each other agree.
pub const AGREE_WITHIN: Duration = Duration::from_secs(1);

/// How far from its term's anchor a leader's stamps may go while no majority
/// of clocks agrees (or before their offsets are known). The state's time
/// stands still while every controller is down, so after such an outage a
/// correct clock is ahead of the anchor by the outage's length: the bound
/// must not hold it back (the chaos suite's soak saw stamps held 7-18 s
/// behind after 2-30 s outages with a 5 s bound, which under-charged GPU time
/// and recorded jobs' ends before they happened). 15 minutes passes an outage
/// that long and still keeps a clock an hour (or a day) wrong from moving the
/// cluster's time further than that in the moments before its followers'
/// clocks are read (at once, and every 200 ms until a majority answered:
/// [`crate::clock_skew::LOOK_AGAIN`]).
pub const ANCHOR_BOUND: Duration = Duration::from_secs(15 * 60);

/// How long, from its term's first stamp, a leader's stamps wait for a
/// majority of the voters' clocks to be read (the clock watch reads every
/// peer at once when a term begins, in milliseconds where they answer; each
/// read gives up after 2 s). A leader that cannot read a majority's clocks
/// in this time stamps within [`ANCHOR_BOUND`] of the cluster's time.
pub const FIRST_READ_WAIT: Duration = Duration::from_secs(3);

/// How far past the term's anchor a clock may be for the anchor to vouch
/// for it when no majority agrees: a failover's length (the anchor is the
/// last stamp applied when the term began, moved on since), with room.
pub const VOUCH_AHEAD: Duration = Duration::from_secs(60);

/// Where a stamp came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The leader's clock, which a majority agrees with.
    Own,
    /// The median of a majority of clocks that agree, which the leader's is
    /// not among (by this many ms).
    Majority {
        /// The leader's clock minus the majority's.
        leader_off_ms: i64,
    },
    /// No majority agrees: the clock of a voter (not the leader) that the
    /// term's anchor vouches for (at or after it, within [`VOUCH_AHEAD`]),
    /// the least ahead of those.
    Vouched {
        /// The leader's clock minus that voter's.
        leader_off_ms: i64,
    },
    /// The leader's clock, held within [`ANCHOR_BOUND`] of the term's anchor
    /// (no majority known to agree); `clamped_by_ms` is how far it was moved.
    Anchored {
        /// The leader's clock minus the stamp.
        clamped_by_ms: i64,
    },
}

/// What the leader knows when it stamps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClockView {
    /// Its own clock, ms.
    pub local_ms: u64,
    /// Each other voter's offset from it (ms; their clock minus its), where
    /// known and fresh.
    pub peer_offsets_ms: Vec<i64>,
    /// How many voters there are, itself included.
    pub voters: usize,
    /// The term's anchor moved on to now, ms, when known.
    pub anchor_ms: Option<u64>,
}

impl ClockView {
    /// True when a majority of the voters' clocks (this one among them) is
    /// known: enough to outvote this clock or agree with it.
    pub fn knows_majority(&self) -> bool {
        self.peer_offsets_ms.len() + 1 > self.voters / 2
    }

    /// True when what is known suffices to stamp without waiting more: a
    /// majority of clocks is known, and either they agree or the term's
    /// anchor is known to judge them by.
    pub fn suffices(&self) -> bool {
        self.knows_majority() && (agreeing(self).is_some() || self.anchor_ms.is_some())
    }
}

/// The time to stamp, and where it came from.
pub fn stamp_time(view: &ClockView) -> (u64, Source) {
    if let Some(agreed) = agreeing(view) {
        return agreed;
    }
    let Some(anchor) = view.anchor_ms else {
        // Nothing to judge the clocks by (a new leader whose state is not
        // applied yet, or a cluster that never stamped): the least of them.
        // A stamp too early is corrected by the next; one too late never is.
        let least = view
            .peer_offsets_ms
            .iter()
            .copied()
            .filter(|off| *off < 0)
            .min();
        return match least {
            Some(off) => (
                shift(view.local_ms, off),
                Source::Vouched {
                    leader_off_ms: -off,
                },
            ),
            None => (view.local_ms, Source::Own),
        };
    };
    anchored(view, anchor)
}

/// The stamp when a majority of the voters' clocks agree within
/// [`AGREE_WITHIN`]: the leader's own among them, else their median.
fn agreeing(view: &ClockView) -> Option<(u64, Source)> {
    let majority = view.voters / 2 + 1;
    let agree = i64::try_from(AGREE_WITHIN.as_millis()).unwrap_or(i64::MAX);
    let mut offsets: Vec<i64> = view.peer_offsets_ms.clone();
    offsets.push(0);
    offsets.sort_unstable();
    // The largest group of clocks within AGREE_WITHIN of each other (a
    // window over the sorted offsets); a majority of all voters or nothing.
    let mut best: Option<&[i64]> = None;
    let mut start = 0;
    for end in 0..offsets.len() {
        while offsets[end] - offsets[start] > agree {
            start += 1;
        }
        let group = &offsets[start..=end];
        if best.is_none_or(|b| group.len() > b.len()) {
            best = Some(group);
        }
    }
    let group = best.filter(|g| g.len() >= majority)?;
    let median = group[(group.len() - 1) / 2];
    if group.contains(&0) {
        return Some((view.local_ms, Source::Own));
    }
    Some((
        shift(view.local_ms, median),
        Source::Majority {
            leader_off_ms: -median,
        },
    ))
}

/// No majority agrees: the clock the anchor vouches for, or the leader's
/// own held within [`ANCHOR_BOUND`] of it.
fn anchored(view: &ClockView, anchor: u64) -> (u64, Source) {
    let agree = AGREE_WITHIN.as_millis() as i64;
    let mut offsets: Vec<i64> = view.peer_offsets_ms.clone();
    offsets.push(0);
    // No majority agrees (a voter down, one clock off): the replicated time
    // vouches for the clocks at or just after it (a failover's length,
    // VOUCH_AHEAD: the anchor is the last stamp before the term, so a right
    // clock is only that much ahead of it). Of those, the least ahead: time
    // in the log only moves forward, so a stamp too early is corrected by
    // the next, one too late never is. A clock further ahead is vouched for
    // by nothing, and the leader's own is only held within the bound.
    let bound = u64::try_from(ANCHOR_BOUND.as_millis()).unwrap_or(u64::MAX);
    let ahead = u64::try_from(VOUCH_AHEAD.as_millis()).unwrap_or(u64::MAX);
    let agree = agree.unsigned_abs();
    let vouched = offsets
        .iter()
        .map(|off| (*off, shift(view.local_ms, *off)))
        .filter(|(_, at)| at.saturating_add(agree) >= anchor && *at <= anchor.saturating_add(ahead))
        .min_by_key(|(_, at)| *at);
    match vouched {
        Some((0, at)) => return (at, Source::Own),
        Some((off, at)) => {
            return (
                at,
                Source::Vouched {
                    leader_off_ms: -off,
                },
            );
        }
        None => {}
    }
    let at = view
        .local_ms
        .clamp(anchor.saturating_sub(bound), anchor.saturating_add(bound));
    let clamped_by_ms = i64::try_from(i128::from(view.local_ms) - i128::from(at)).unwrap_or(0);
    if clamped_by_ms == 0 {
        (at, Source::Own)
    } else {
        (at, Source::Anchored { clamped_by_ms })
    }
}

fn shift(ms: u64, by: i64) -> u64 {
    if by >= 0 {
        ms.saturating_add(by.unsigned_abs())
    } else {
        ms.saturating_sub(by.unsigned_abs())
    }
}

/// The stamping clock of one controller: reads its replica's term, state
/// time and voters, and the offsets the clock watch measured.
#[derive(Clone, Default)]
pub struct ClusterClock {
    replica: Arc<OnceLock<Weak<Replica>>>,
    offsets: ClockOffsets,
    anchor: Arc<Mutex<Option<Anchor>>>,
    /// When it last logged a stamp that was not its own clock, by source
    /// (majority, vouched, anchored).
    said: Arc<Mutex<[Option<Instant>; 3]>>,
}

/// The replicated time a term began with.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    term: u64,
    /// The last index of the log when the term's first stamp was asked for:
    /// the state's time is the term's anchor once it is applied.
    applied_by: u64,
    /// The state's time then, and when it was read.
    taken: Option<(u64, Instant)>,
    /// When the term's first stamp was asked for.
    began: Instant,
}

/// How often a leader whose clock is overruled says so.
const SAY_EVERY: Duration = Duration::from_secs(30);

impl ClusterClock {
    /// A clock reading the offsets `offsets` holds.
    pub fn new(offsets: ClockOffsets) -> Self {
        ClusterClock {
            offsets,
            ..ClusterClock::default()
        }
    }

    /// Gives the clock its replica (once it started).
    pub fn attach(&self, replica: &Arc<Replica>) {
        let _ = self.replica.set(Arc::downgrade(replica));
    }

    /// The time to stamp now. A leader that has not yet read a majority of
    /// the voters' clocks (the first moments of its term) waits for them, up
    /// to [`FIRST_READ_WAIT`]: before, its first stamps could only be held
    /// within [`ANCHOR_BOUND`] of the cluster's time, and a leader an hour
    /// fast moved the cluster's time 15 minutes ahead for good.
    pub async fn now(&self) -> Timestamp {
        let Some(replica) = self.replica.get().and_then(Weak::upgrade) else {
            return clock::now();
        };
        let mut changes = self.offsets.changes();
        let mut leadership = replica.leadership();
        let mut deadline = None;
        loop {
            changes.borrow_and_update();
            leadership.borrow_and_update();
            let view = self.view(&replica);
            // Only a young term waits (from its first stamp, taken once): a
            // leader whose peers' clocks cannot be read for long must not
            // hold every proposal.
            let until = *deadline.get_or_insert_with(|| {
                tokio::time::Instant::from_std(self.term_began() + FIRST_READ_WAIT)
            });
            // Raft's own word: the leadership watch publishes a new term a
            // moment after Raft takes proposals in it.
            let (_, leads) = replica.raft_standing();
            if !leads || view.suffices() || tokio::time::Instant::now() >= until {
                let (at, source) = stamp_time(&view);
                if source != Source::Own {
                    self.say(source);
                }
                return Timestamp(at);
            }
            // A new reading, a change of leader, or the deadline.
            tokio::select! {
                _ = changes.changed() => {}
                _ = leadership.changed() => {}
                () = tokio::time::sleep_until(until) => {}
            }
        }
    }

    /// What this leader knows of the clocks now.
    fn view(&self, replica: &Replica) -> ClockView {
        let local_ms = clock::now().as_ms();
        let voters: Vec<_> = replica
            .members()
            .into_iter()
            .filter(|m| m.voter && m.id != replica.id())
            .collect();
        // Each peer's clock now (its reading moved on by the monotonic clock)
        // against this one now: a step of this clock since the readings shows.
        let peer_offsets_ms = voters
            .iter()
            .filter_map(|m| self.offsets.clock_now(m.id))
            .map(|peer| i64::try_from(i128::from(peer) - i128::from(local_ms)).unwrap_or(0))
            .collect();
        ClockView {
            local_ms,
            peer_offsets_ms,
            voters: voters.len() + 1,
            anchor_ms: self.anchor_now(replica),
        }
    }

    /// When this replica's current term's first stamp was asked for.
    fn term_began(&self) -> Instant {
        self.anchor
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map_or_else(Instant::now, |a| a.began)
    }

    /// The term's anchor moved on to now (taken at the term's first stamp).
    /// Taken once the replica applied every entry its log held when the
    /// term began (a leader just restarted may lead before it applied its
    /// log: its state's time would be from long ago, or 0), and never again
    /// in the term.
    fn anchor_now(&self, replica: &Replica) -> Option<u64> {
        let (term, _) = replica.raft_standing();
        let mut anchor = self.anchor.lock().unwrap_or_else(|p| p.into_inner());
        if anchor.is_none_or(|a| a.term != term) {
            *anchor = Some(Anchor {
                term,
                applied_by: replica.last_log_index().unwrap_or(0),
                taken: None,
                began: Instant::now(),
            });
        }
        let a = anchor.as_mut()?;
        if a.taken.is_none() && replica.last_applied().unwrap_or(0) >= a.applied_by {
            let state_ms = replica.read_local(|s| s.clock().as_ms()).ok()?;
            a.taken = Some((state_ms, Instant::now()));
        }
        let (state_ms, at) = a.taken?;
        let moved = u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX);
        // A cluster that never stamped (time 0) has no anchor.
        (state_ms > 0).then(|| state_ms.saturating_add(moved))
    }

    fn say(&self, source: Source) {
        let kind = match source {
            Source::Own => return,
            Source::Majority { .. } => 0,
            Source::Vouched { .. } => 1,
            Source::Anchored { .. } => 2,
        };
        let mut said = self.said.lock().unwrap_or_else(|p| p.into_inner());
        if said[kind].is_some_and(|at| at.elapsed() < SAY_EVERY) {
            return;
        }
        said[kind] = Some(Instant::now());
        match source {
            Source::Majority { leader_off_ms } => tracing::warn!(
                leader_off_ms,
                "this leader's clock is {:.1} s {} a majority of the controllers' clocks: it stamps their time, not its own; fix its time synchronisation",
                leader_off_ms.unsigned_abs() as f64 / 1000.0,
                if leader_off_ms > 0 {
                    "ahead of"
                } else {
                    "behind"
                }
            ),
            Source::Vouched { leader_off_ms } => tracing::warn!(
                leader_off_ms,
                "this leader's clock is {:.1} s {} the cluster's time and no majority of the controllers' clocks agrees: it stamps the clock of a controller that agrees with the cluster's time; fix its time synchronisation",
                leader_off_ms.unsigned_abs() as f64 / 1000.0,
                if leader_off_ms > 0 {
                    "ahead of"
                } else {
                    "behind"
                }
            ),
            Source::Anchored { clamped_by_ms } => tracing::warn!(
                clamped_by_ms,
                "this leader's clock is {:.1} s {} the cluster's time and no majority of clocks is known to agree with it: its stamps are held within {} min of the cluster's time",
                clamped_by_ms.unsigned_abs() as f64 / 1000.0,
                if clamped_by_ms > 0 {
                    "ahead of"
                } else {
                    "behind"
                },
                ANCHOR_BOUND.as_secs() / 60
            ),
            Source::Own => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HOUR: i64 = 3_600_000;
    const NOW: u64 = 1_800_000_000_000;

    fn view(peers: &[i64], voters: usize, anchor: Option<u64>) -> ClockView {
        ClockView {
            local_ms: NOW,
            peer_offsets_ms: peers.to_vec(),
            voters,
            anchor_ms: anchor,
        }
    }

    #[test]
    fn a_leader_that_agrees_with_a_majority_stamps_its_own_clock() {
        assert_eq!(stamp_time(&view(&[30, -20], 3, None)), (NOW, Source::Own));
        // A follower an hour off is outvoted.
        assert_eq!(stamp_time(&view(&[HOUR, 5], 3, None)), (NOW, Source::Own));
        // Two clocks known of three, disagreeing, nothing to judge them by
        // (no anchor yet): the lesser, which the next stamps correct.
        assert_eq!(
            stamp_time(&view(&[-HOUR], 3, None)),
            (
                NOW - HOUR as u64,
                Source::Vouched {
                    leader_off_ms: HOUR
                }
            )
        );
        assert_eq!(stamp_time(&view(&[HOUR], 3, None)), (NOW, Source::Own));
    }

    #[test]
    fn a_leader_an_hour_off_stamps_the_majoritys_time() {
        // Fast: the followers read an hour behind it.
        let (at, source) = stamp_time(&view(&[-HOUR, -HOUR + 40], 3, None));
        assert_eq!(at, NOW - HOUR as u64);
        assert_eq!(
            source,
            Source::Majority {
                leader_off_ms: HOUR
            }
        );
        // Slow.
        let (at, _) = stamp_time(&view(&[HOUR, HOUR + 10, HOUR - 10, 7], 5, None));
        assert_eq!(at, NOW + HOUR as u64);
    }

    #[test]
    fn without_an_agreeing_majority_the_anchor_bounds_the_stamp() {
        let bound = ANCHOR_BOUND.as_millis() as u64;
        // One follower known, and neither clock is near the anchor.
        let anchor = NOW - 3 * HOUR as u64;
        let (at, source) = stamp_time(&view(&[-HOUR], 3, Some(anchor)));
        assert_eq!(at, anchor + bound);
        assert!(matches!(source, Source::Anchored { .. }));
        // No offsets yet at the start of a term.
        let (at, _) = stamp_time(&view(&[], 3, Some(NOW + HOUR as u64)));
        assert_eq!(at, NOW + HOUR as u64 - bound);
        // Near the anchor, the own clock.
        assert_eq!(
            stamp_time(&view(&[], 3, Some(NOW - 2_000))),
            (NOW, Source::Own)
        );
        // A single controller agrees with itself.
        assert_eq!(
            stamp_time(&view(&[], 1, Some(NOW + HOUR as u64))),
            (NOW, Source::Own)
        );
    }

    #[test]
    fn a_majority_of_clocks_is_known_with_half_the_peers_read() {
        assert!(!view(&[], 3, None).knows_majority());
        assert!(view(&[5], 3, None).knows_majority());
        assert!(!view(&[5], 5, None).knows_majority());
        assert!(view(&[5, -HOUR], 5, None).knows_majority());
        assert!(view(&[], 1, None).knows_majority());
    }

    #[test]
    fn without_an_agreeing_majority_the_clock_the_anchor_vouches_for_is_stamped() {
        // A leader an hour fast, one follower read (the other down): the
        // follower's clock is just past the replicated time, its own is not.
        let (at, source) = stamp_time(&view(&[-HOUR], 3, Some(NOW - HOUR as u64 - 2_000)));
        assert_eq!(at, NOW - HOUR as u64);
        assert_eq!(
            source,
            Source::Vouched {
                leader_off_ms: HOUR
            }
        );
        // An hour slow.
        let (at, _) = stamp_time(&view(&[HOUR], 3, Some(NOW + HOUR as u64 - 2_000)));
        assert_eq!(at, NOW + HOUR as u64);
        // After an outage (the replicated time 5 minutes behind), the
        // leader's right clock, not a follower's an hour ahead.
        assert_eq!(
            stamp_time(&view(&[HOUR], 3, Some(NOW - 300_000))),
            (NOW, Source::Own)
        );
        // Seen in review: the leader 30 s slow, the one follower read 14
        // minutes fast, the third voter down: nothing vouches for the fast
        // clock, and the leader's own (held near the anchor) stands still
        // rather than move the cluster's time ahead for good.
        let anchor = NOW + 28_000;
        let (at, source) = stamp_time(&view(&[30_000 + 14 * 60_000], 3, Some(anchor)));
        assert_eq!((at, source), (NOW, Source::Own));
        // Two clocks past the anchor: the one least ahead.
        let (at, source) = stamp_time(&view(&[-60_000], 3, Some(NOW - 120_000)));
        assert_eq!(at, NOW - 60_000);
        assert!(matches!(source, Source::Vouched { .. }));
    }

    proptest! {
        /// Whatever the offsets: a stamp is a clock a majority agrees with,
        /// or a peer's clock the anchor vouches for, or within the bound of
        /// the anchor, or (no anchor) the own clock.
        #[test]
        fn a_stamp_is_a_majoritys_time_or_near_the_anchor(
            peers in proptest::collection::vec(-2 * HOUR..2 * HOUR, 0..5),
            extra in 0usize..2,
            anchor_off in -2 * HOUR..2 * HOUR,
        ) {
            let voters = peers.len() + 1 + extra;
            let anchor = shift(NOW, anchor_off);
            let (at, source) = stamp_time(&view(&peers, voters, Some(anchor)));
            let bound = ANCHOR_BOUND.as_millis() as u64;
            match source {
                Source::Majority { leader_off_ms } => {
                    // Every clock of the majority is within AGREE_WITHIN
                    // of the stamp, and the leader's is not among them.
                    let agreeing = peers
                        .iter()
                        .filter(|o| (**o + leader_off_ms).abs() <= AGREE_WITHIN.as_millis() as i64)
                        .count();
                    prop_assert!(agreeing > voters / 2);
                    prop_assert_eq!(at, shift(NOW, -leader_off_ms));
                }
                Source::Vouched { leader_off_ms } => {
                    // A peer's clock, at or after the anchor, within the bound.
                    prop_assert!(peers.contains(&-leader_off_ms));
                    prop_assert_eq!(at, shift(NOW, -leader_off_ms));
                    prop_assert!(at + AGREE_WITHIN.as_millis() as u64 >= anchor);
                    prop_assert!(at <= anchor + VOUCH_AHEAD.as_millis() as u64);
                }
                Source::Anchored { .. } => {
                    prop_assert!(at.abs_diff(anchor) <= bound);
                }
                Source::Own => prop_assert_eq!(at, NOW),
            }
        }
    }
}
