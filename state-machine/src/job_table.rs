//! The job table, and the journal of which jobs changed.
//!
//! Reads go through `Deref` to the ordered map; every way to change a job
//! (`get_mut`, `insert`) first writes its id into a bounded journal, so a
//! reader that wants the jobs changed since it last looked (a `WatchJobs`
//! stream) reads the journal instead of comparing every job.
//!
//! The journal is not part of the replicated state: it is neither encoded
//! (snapshots and the digest see the map only) nor compared. Its sequence
//! numbers count changes on this replica since the state was loaded, so they
//! mean nothing across replicas or restarts; [`JobTable::restart_journal_after`]
//! lets a replica that replaces its state (a snapshot installed) keep them
//! increasing, with everything before marked as unknown.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ids::JobId;
use crate::job::Job;

/// How many changes the journal remembers. A reader further behind than this
/// compares every job again (as it does on its first look).
pub const JOURNAL_CAPACITY: usize = 65_536;

/// The jobs by id, with the journal of changes.
#[derive(Clone, Default)]
pub struct JobTable {
    jobs: BTreeMap<JobId, Job>,
    journal: ChangeJournal,
}

/// Recent changes, oldest first.
#[derive(Clone, Default)]
struct ChangeJournal {
    /// The sequence number the next change gets.
    next: u64,
    /// Readers that last looked before this sequence number missed changes the
    /// journal no longer holds.
    floor: u64,
    recent: VecDeque<(u64, JobId)>,
}

/// What changed since a reader's last look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobChanges {
    /// The jobs changed since then (each once, in id order; a job may be named
    /// although nothing a reader sees of it changed).
    Since(BTreeSet<JobId>),
    /// The journal no longer reaches back that far: compare every job.
    Unknown,
}

impl JobTable {
    /// A table of `jobs` with an empty journal (a decoded or migrated state).
    pub(crate) fn from_jobs(jobs: BTreeMap<JobId, Job>) -> JobTable {
        JobTable {
            jobs,
            journal: ChangeJournal::default(),
        }
    }

    /// The job `id`, to change: recorded as changed.
    pub fn get_mut(&mut self, id: &JobId) -> Option<&mut Job> {
        if self.jobs.contains_key(id) {
            self.journal.record(*id);
        }
        self.jobs.get_mut(id)
    }

    /// Adds or replaces a job: recorded as changed.
    pub fn insert(&mut self, id: JobId, job: Job) -> Option<Job> {
        self.journal.record(id);
        self.jobs.insert(id, job)
    }

    /// The sequence number of the next change: pass it to
    /// [`JobTable::changes_since`] next time.
    pub fn journal_position(&self) -> u64 {
        self.journal.next
    }

    /// The jobs changed since `position` (an earlier `journal_position`).
    pub fn changes_since(&self, position: u64) -> JobChanges {
        let journal = &self.journal;
        if position < journal.floor || position > journal.next {
            return JobChanges::Unknown;
        }
        let start = journal.recent.partition_point(|(seq, _)| *seq < position);
        JobChanges::Since(journal.recent.range(start..).map(|(_, id)| *id).collect())
    }

    /// Continues the journal of `previous` (the table this one replaces):
    /// positions keep increasing, and every reader of `previous` is told to
    /// compare every job.
    pub fn restart_journal_after(&mut self, previous: &JobTable) {
        let start = previous.journal.next + 1;
        self.journal = ChangeJournal {
            next: start,
            floor: start,
            recent: VecDeque::new(),
        };
    }
}

impl ChangeJournal {
    fn record(&mut self, id: JobId) {
        if self.recent.len() == JOURNAL_CAPACITY
            && let Some((oldest, _)) = self.recent.pop_front()
        {
            self.floor = oldest + 1;
        }
        self.recent.push_back((self.next, id));
        self.next += 1;
    }
}

impl std::ops::Deref for JobTable {
    type Target = BTreeMap<JobId, Job>;

    fn deref(&self) -> &BTreeMap<JobId, Job> {
        &self.jobs
    }
}

impl<'a> IntoIterator for &'a JobTable {
    type Item = (&'a JobId, &'a Job);
    type IntoIter = std::collections::btree_map::Iter<'a, JobId, Job>;

    fn into_iter(self) -> Self::IntoIter {
        self.jobs.iter()
    }
}

/// Equal when the jobs are: the journal is this replica's bookkeeping.
impl PartialEq for JobTable {
    fn eq(&self, other: &Self) -> bool {
        self.jobs == other.jobs
    }
}

impl Eq for JobTable {}

impl std::fmt::Debug for JobTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.jobs.fmt(f)
    }
}

/// Encoded as the map alone, exactly as before the journal existed.
impl Serialize for JobTable {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.jobs.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for JobTable {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(JobTable {
            jobs: BTreeMap::deserialize(deserializer)?,
            journal: ChangeJournal::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit;

    /// A submitted job, renumbered.
    fn job_for_tests(id: u64) -> Job {
        let mut state = testkit::cluster(1, 8);
        let submitted = testkit::submit(&mut state, testkit::spec("alice", 1, 1), testkit::at(1));
        let mut job = state
            .job(submitted)
            .cloned()
            .expect("the job was just submitted");
        job.id = JobId(id);
        job
    }

    #[test]
    fn changes_since_names_each_changed_job_once() {
        let mut table = JobTable::default();
        let start = table.journal_position();
        table.insert(JobId(1), job_for_tests(1));
        table.insert(JobId(2), job_for_tests(2));
        let middle = table.journal_position();
        let _ = table.get_mut(&JobId(1));
        let _ = table.get_mut(&JobId(1));
        let _ = table.get_mut(&JobId(9));
        assert_eq!(
            table.changes_since(start),
            JobChanges::Since([JobId(1), JobId(2)].into())
        );
        assert_eq!(
            table.changes_since(middle),
            JobChanges::Since([JobId(1)].into())
        );
        assert_eq!(
            table.changes_since(table.journal_position()),
            JobChanges::Since(BTreeSet::new())
        );
        assert_eq!(
            table.changes_since(table.journal_position() + 1),
            JobChanges::Unknown
        );
    }

    #[test]
    fn a_reader_the_journal_left_behind_compares_everything() {
        let mut table = JobTable::default();
        table.insert(JobId(1), job_for_tests(1));
        let start = table.journal_position();
        for _ in 0..=JOURNAL_CAPACITY {
            let _ = table.get_mut(&JobId(1));
        }
        assert_eq!(table.changes_since(start), JobChanges::Unknown);
        let recent = table.journal_position() - 1;
        assert_eq!(
            table.changes_since(recent),
            JobChanges::Since([JobId(1)].into())
        );
    }

    #[test]
    fn a_replacing_table_sends_every_reader_back_to_a_full_comparison() {
        let mut old = JobTable::default();
        old.insert(JobId(1), job_for_tests(1));
        let caught_up = old.journal_position();
        let mut new = JobTable::default();
        new.restart_journal_after(&old);
        assert_eq!(new.changes_since(caught_up), JobChanges::Unknown);
        let position = new.journal_position();
        assert!(position > caught_up);
        new.insert(JobId(2), job_for_tests(2));
        assert_eq!(
            new.changes_since(position),
            JobChanges::Since([JobId(2)].into())
        );
    }

    #[test]
    fn the_encoding_is_the_map_alone_and_equality_ignores_the_journal() {
        let mut table = JobTable::default();
        table.insert(JobId(1), job_for_tests(1));
        let map: BTreeMap<JobId, Job> = table.jobs.clone();
        let encoded = postcard::to_stdvec(&table).unwrap();
        assert_eq!(encoded, postcard::to_stdvec(&map).unwrap());
        let decoded: JobTable = postcard::from_bytes(&encoded).unwrap();
        let _ = table.get_mut(&JobId(1));
        assert_eq!(decoded, table);
    }
}
