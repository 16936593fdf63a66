//! When a voter that hears no leader may ask for votes: the pure election
//! timer. It waits the leader lease (a live leader's followers refuse any vote
//! for that long after its last message) plus a random share of the election
//! timeout, counted from the later of its last contact with a leader and its
//! own last attempt, so voters do not all stand at once and a failed round is
//! not retried before the timeout.

use std::time::Duration;

use tokio::time::Instant;

/// The election timing, as openraft's configuration gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectionTiming {
    /// How long a follower refuses votes after it heard from a leader.
    pub lease: Duration,
    /// The shortest and longest random part of the timeout.
    pub timeout_min: Duration,
    /// See `timeout_min`.
    pub timeout_max: Duration,
}

impl ElectionTiming {
    /// The random part for `roll`, a number in `[0, 1)`.
    pub fn jitter(&self, roll: f64) -> Duration {
        let spread = self.timeout_max.saturating_sub(self.timeout_min);
        self.timeout_min + spread.mul_f64(roll.clamp(0.0, 1.0))
    }

    /// When the voter may start a pre-vote round: `lease + jitter` after
    /// the later of `contact` (last heard from a leader, or when this replica
    /// started) and `last_attempt`.
    pub fn due_at(
        &self,
        contact: Instant,
        last_attempt: Option<Instant>,
        jitter: Duration,
    ) -> Instant {
        let from = last_attempt.map_or(contact, |attempt| attempt.max(contact));
        from + self.lease + jitter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMING: ElectionTiming = ElectionTiming {
        lease: Duration::from_millis(200),
        timeout_min: Duration::from_millis(100),
        timeout_max: Duration::from_millis(200),
    };

    #[test]
    fn the_jitter_spans_the_timeout_range() {
        assert_eq!(TIMING.jitter(0.0), Duration::from_millis(100));
        assert_eq!(TIMING.jitter(0.5), Duration::from_millis(150));
        assert_eq!(TIMING.jitter(7.0), Duration::from_millis(200));
    }

    #[test]
    fn due_after_the_lease_and_jitter_from_the_later_event() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let jitter = Duration::from_millis(150);
        assert_eq!(TIMING.due_at(at(0), None, jitter), at(350));
        assert_eq!(TIMING.due_at(at(0), Some(at(400)), jitter), at(750));
        assert_eq!(TIMING.due_at(at(900), Some(at(400)), jitter), at(1250));
    }
}
