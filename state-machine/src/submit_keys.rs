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
