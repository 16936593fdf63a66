//! The pause before trying again something that failed at once, without
//! waiting on time or an event (a term whose first proposal was refused): it
//! doubles from `first` up to `most`, and starts over once an attempt lasted
//! long enough to count as a success. Pure: durations in, durations out, so a
//! loop that uses it can never turn faster than `first` apart, and a fault
//! that lasts minutes costs one attempt every `most`.

use std::time::Duration;

/// A doubling, bounded pause between retries.
#[derive(Debug, Clone)]
pub struct RetryPause {
    first: Duration,
    most: Duration,
    /// An attempt that lasted this long was a success: the next pause is `first`.
    healthy_after: Duration,
    next: Duration,
    /// Attempts in a row that ended early, since the last healthy one.
    failures: u64,
}

impl RetryPause {
    /// Pauses from `first` doubling to `most`; an attempt that lasted
    /// `healthy_after` resets them.
    pub fn new(first: Duration, most: Duration, healthy_after: Duration) -> Self {
        RetryPause {
            first,
            most: most.max(first),
            healthy_after,
            next: first,
            failures: 0,
        }
    }

    /// An attempt that lasted `lasted` ended: how long to wait before the next.
    /// A healthy attempt waits `first`; each early end in a row doubles it.
    pub fn after(&mut self, lasted: Duration) -> Duration {
        if lasted >= self.healthy_after {
            self.next = self.first;
            self.failures = 0;
        }
        let pause = self.next;
        self.next = (self.next * 2).min(self.most);
        self.failures += 1;
        pause
    }

    /// Something succeeded: the next pause is `first` again.
    pub fn reset(&mut self) {
        self.next = self.first;
        self.failures = 0;
    }

    /// Attempts in a row that ended before `healthy_after` (for logs: a
    /// repeated failure is logged with its count, not once per turn).
    pub fn failures(&self) -> u64 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn early_ends_double_the_pause_up_to_the_most() {
        let mut pause = RetryPause::new(100 * MS, 2_000 * MS, 10_000 * MS);
        let pauses: Vec<u128> = (0..8).map(|_| pause.after(MS).as_millis()).collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1600, 2000, 2000, 2000]);
        assert_eq!(pause.failures(), 8);
    }

    #[test]
    fn a_healthy_attempt_starts_the_pauses_over() {
        let mut pause = RetryPause::new(100 * MS, 2_000 * MS, 10_000 * MS);
        for _ in 0..5 {
            pause.after(MS);
        }
        assert_eq!(pause.after(10_000 * MS), 100 * MS);
        assert_eq!(pause.after(MS), 200 * MS);
        assert_eq!(pause.failures(), 2);
    }

    #[test]
    fn a_reset_starts_the_pauses_over() {
        let mut pause = RetryPause::new(100 * MS, 2_000 * MS, Duration::MAX);
        pause.after(MS);
        pause.after(MS);
        pause.reset();
        assert_eq!(pause.failures(), 0);
        assert_eq!(pause.after(MS), 100 * MS);
    }

    /// However many turns, the total time waited grows with them: a loop that
    /// waits on it cannot spin.
    #[test]
    fn a_thousand_early_ends_wait_at_least_a_thousand_pauses() {
        let mut pause = RetryPause::new(100 * MS, 2_000 * MS, 10_000 * MS);
        let waited: Duration = (0..1000).map(|_| pause.after(Duration::ZERO)).sum();
        assert!(waited >= 1000 * 100 * MS);
    }
}
