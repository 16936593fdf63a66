//! A derived count of unfinished jobs (pending, held, running, completing) per
//! association, a user in an account, for sacctmgr's submit limits.
//!
//! It is not part of the replicated state: never encoded, never compared (two
//! states are equal whatever their indexes hold). It is built from the jobs
//! the first time a submit limit asks after the state was loaded, and from
//! then on kept up to date where a job enters or leaves the unfinished jobs
//! (submission; the end of an attempt that is not requeued; the end of a job
//! that never ran) or changes account (`scontrol update Account=`). The
//! invariants check it against a recount.

use std::collections::BTreeMap;

use crate::ids::JobId;
use crate::job::Job;

/// Unfinished jobs per (user, account); `None` until first needed.
#[derive(Clone, Default)]
pub(crate) struct UnfinishedIndex {
    counts: Option<BTreeMap<(String, String), usize>>,
}

impl PartialEq for UnfinishedIndex {
    /// Derived data: never part of what makes two states equal.
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl Eq for UnfinishedIndex {}

impl std::fmt::Debug for UnfinishedIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.counts.is_some() {
            "UnfinishedIndex(built)"
        } else {
            "UnfinishedIndex(not built)"
        })
    }
}

/// The counts of `unfinished` jobs, recounted.
pub(crate) fn recount<'a>(
    unfinished: impl Iterator<Item = &'a Job>,
) -> BTreeMap<(String, String), usize> {
    let mut counts = BTreeMap::new();
    for job in unfinished {
        *counts
            .entry((job.spec.user.clone(), job.account.clone()))
            .or_insert(0) += 1;
    }
    counts
}

impl UnfinishedIndex {
    /// The counts, built from `unfinished` if they are not yet.
    pub(crate) fn counts<'a>(
        &mut self,
        unfinished: impl Iterator<Item = &'a Job>,
    ) -> &BTreeMap<(String, String), usize> {
        self.counts.get_or_insert_with(|| recount(unfinished))
    }

    /// The counts, if built (for the invariants).
    pub(crate) fn built(&self) -> Option<&BTreeMap<(String, String), usize>> {
        self.counts.as_ref()
    }

    /// `n` more unfinished jobs of `user` in `account`.
    pub(crate) fn add(&mut self, user: &str, account: &str, n: usize) {
        if let Some(counts) = &mut self.counts {
            *counts
                .entry((user.to_string(), account.to_string()))
                .or_insert(0) += n;
        }
    }

    /// One unfinished job of `user` in `account` fewer.
    pub(crate) fn remove(&mut self, user: &str, account: &str) {
        if let Some(counts) = &mut self.counts {
            let key = (user.to_string(), account.to_string());
            if let Some(count) = counts.get_mut(&key) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    counts.remove(&key);
                }
            }
        }
    }

    /// Job `_id` of `user` moved from `from` to `to` while unfinished.
    pub(crate) fn moved(&mut self, _id: JobId, user: &str, from: &str, to: &str) {
        if from != to {
            self.remove(user, from);
            self.add(user, to, 1);
        }
    }
}
