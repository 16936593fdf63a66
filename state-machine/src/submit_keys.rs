//! Idempotency keys of recent submissions: which jobs a (user, key) created, kept
//! for [`SUBMIT_KEY_RETENTION_MS`] of leader time, so a client that lost the answer
//! to a submission can retry it without creating the jobs twice.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::ids::JobId;
use crate::time::Timestamp;

/// How long a submission's key is remembered: one hour.
pub const SUBMIT_KEY_RETENTION_MS: u64 = 3_600_000;

/// The jobs a keyed submission created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyedSubmission {
    /// The first job id.
    pub first: JobId,
    /// How many jobs.
    pub count: u32,
    /// When it was accepted.
    pub at: Timestamp,
}

/// Recent keys by (user, key), and the same keys in the order they were recorded
/// (leader time never runs backwards, so that order is by time and expiry only
/// ever pops from the front).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitKeys {
    by_key: BTreeMap<(String, String), KeyedSubmission>,
    order: VecDeque<(Timestamp, String, String)>,
}

impl SubmitKeys {
    /// The submission `user` made with `key`, if it is still remembered.
    pub fn get(&self, user: &str, key: &str) -> Option<&KeyedSubmission> {
        self.by_key.get(&(user.to_string(), key.to_string()))
    }

    /// How many keys are remembered.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// True when no key is remembered.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub(crate) fn record(
        &mut self,
        user: &str,
        key: String,
        first: JobId,
        count: u32,
        at: Timestamp,
    ) {
        self.order.push_back((at, user.to_string(), key.clone()));
        self.by_key.insert(
            (user.to_string(), key),
            KeyedSubmission { first, count, at },
        );
    }

    /// The structure's own invariants: every key is in the time order exactly
    /// once, that order never runs backwards or past `clock`, and every
    /// remembered job id was issued (is below `next_job_id`).
    pub(crate) fn check(&self, clock: Timestamp, next_job_id: u64) -> Result<(), String> {
        if self.order.len() != self.by_key.len() {
            return Err(format!(
                "submit keys: {} in time order, {} by key",
                self.order.len(),
                self.by_key.len()
            ));
        }
        let mut previous = Timestamp(0);
        for (at, user, key) in &self.order {
            let Some(seen) = self.by_key.get(&(user.clone(), key.clone())) else {
                return Err(format!(
                    "submit key ({user}, {key}) is in the time order only"
                ));
            };
            if seen.at != *at || *at < previous || *at > clock {
                return Err(format!(
                    "submit key ({user}, {key}) recorded at {} ms is out of order (previous {} ms, clock {} ms)",
                    at.as_ms(),
                    previous.as_ms(),
                    clock.as_ms()
                ));
            }
            if seen.count == 0 || seen.first.0.saturating_add(u64::from(seen.count)) > next_job_id {
                return Err(format!(
                    "submit key ({user}, {key}) names jobs {}+{} that were never issued",
                    seen.first, seen.count
                ));
            }
            previous = *at;
        }
        Ok(())
    }

    /// Forgets keys recorded more than the retention before `now`.
    pub(crate) fn expire(&mut self, now: Timestamp) {
        while let Some((at, _, _)) = self.order.front() {
            if at.as_ms().saturating_add(SUBMIT_KEY_RETENTION_MS) > now.as_ms() {
                break;
            }
            if let Some((_, user, key)) = self.order.pop_front() {
                self.by_key.remove(&(user, key));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_holds_through_expiry_and_catches_a_stray_entry() {
        let mut keys = SubmitKeys::default();
        keys.record("alice", "a".into(), JobId(1), 1, Timestamp(10));
        keys.record("bob", "b".into(), JobId(2), 3, Timestamp(20));
        assert_eq!(keys.check(Timestamp(20), 5), Ok(()));
        // A job id never issued, or a time past the clock, is caught.
        assert!(keys.check(Timestamp(20), 4).is_err());
        assert!(keys.check(Timestamp(15), 5).is_err());
        keys.expire(Timestamp(10 + SUBMIT_KEY_RETENTION_MS));
        assert_eq!(keys.len(), 1);
        assert_eq!(
            keys.check(Timestamp(10 + SUBMIT_KEY_RETENTION_MS), 5),
            Ok(())
        );
        // An entry in the time order without its key would expire someone else's.
        keys.order
            .push_back((Timestamp(30), "carol".into(), "c".into()));
        assert!(keys.check(Timestamp(30), 5).is_err());
    }
}
