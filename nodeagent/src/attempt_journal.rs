//! The attempts this node has run, on disk (`STATE_DIR/attempts/JOB.ATTEMPT`,
//! one JSON record each, replaced atomically), so that a restarted agent
//! neither runs an attempt a second time nor forgets how one ended:
//!
//! - a record is written before an attempt's processes start;
//! - its end report is added once every process is gone (before the report is
//!   sent), so a restart sends it again if the leader never acknowledged it;
//! - it is marked acknowledged once the leader committed the end, and kept
//!   for [`RETAIN`] after that, so a launch from a leader whose state lags
//!   behind is refused.
//!
//! Records are not fsynced: they guard against the agent's own restarts,
//! whose writes the page cache keeps; a machine that crashed runs none of
//! its old processes anyway.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use corral_proto::agent::AgentReport;
use corral_state::ids::{AttemptNumber, JobId};
use serde::{Deserialize, Serialize};

use crate::supervisor::AttemptKey;

/// How long an acknowledged attempt is remembered.
pub const RETAIN: Duration = Duration::from_secs(24 * 60 * 60);

/// One attempt's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The job.
    pub job: JobId,
    /// The attempt.
    pub attempt: AttemptNumber,
    /// The agent (node and start) that ran it: `CORRAL_AGENT_ID` of its processes.
    pub agent_id: String,
    /// How it ended here, once it did.
    pub end: Option<AgentReport>,
    /// The leader committed the end.
    pub acknowledged: bool,
    /// The GPUs it holds here and its user, while it has not ended: where a
    /// restarted agent also looks for its processes (journals of older
    /// agents have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<GpuHold>,
}

/// An attempt's GPUs on this node and the user its processes run as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuHold {
    /// The job's uid here.
    pub uid: u32,
    /// Its GPUs' (or MIG instances') UUIDs: slot numbers may change with a
    /// restart, UUIDs do not.
    pub uuids: Vec<String>,
}

impl Record {
    /// The attempt.
    pub fn key(&self) -> AttemptKey {
        (self.job, self.attempt)
    }
}

/// The journal of one node.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    /// The newest attempt of each job this node ran.
    newest: Mutex<BTreeMap<JobId, AttemptNumber>>,
    /// Held while a record is read or replaced: writes come from several
    /// threads, and an end must never overwrite an acknowledgement.
    writing: Mutex<()>,
}

impl Journal {
    /// Opens the journal in `dir` (created if missing) and returns its
    /// records. Acknowledged records older than [`RETAIN`] are deleted;
    /// unreadable ones are reported and skipped.
    pub fn open(dir: &Path) -> io::Result<(Journal, Vec<Record>)> {
        std::fs::create_dir_all(dir)?;
        let mut records = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "tmp") {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            let record = match std::fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|bytes| {
                    serde_json::from_slice::<Record>(&bytes).map_err(|e| e.to_string())
                }) {
                Ok(record) => record,
                Err(e) => {
                    tracing::warn!(path = %path.display(), "skipping an unreadable attempt record: {e}");
                    continue;
                }
            };
            if record.acknowledged && older_than(&path, RETAIN) {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            records.push(record);
        }
        records.sort_by_key(Record::key);
        let mut newest = BTreeMap::new();
        for record in &records {
            let entry = newest.entry(record.job).or_insert(record.attempt);
            *entry = (*entry).max(record.attempt);
        }
        Ok((
            Journal {
                dir: dir.to_path_buf(),
                newest: Mutex::new(newest),
                writing: Mutex::new(()),
            },
            records,
        ))
    }

    /// Whether this node ran attempt `key`, or a newer attempt of its job:
    /// a launch of it is refused.
    pub fn ran(&self, key: AttemptKey) -> bool {
        self.newest
            .lock()
            .map_or(true, |n| n.get(&key.0).is_some_and(|a| *a >= key.1))
    }

    /// Records that attempt `key` starts under `agent_id`, holding `gpus`.
    pub fn started(
        &self,
        key: AttemptKey,
        agent_id: &str,
        gpus: Option<GpuHold>,
    ) -> io::Result<()> {
        if let Ok(mut newest) = self.newest.lock() {
            let entry = newest.entry(key.0).or_insert(key.1);
            *entry = (*entry).max(key.1);
        }
        self.write(&Record {
            job: key.0,
            attempt: key.1,
            agent_id: agent_id.to_string(),
            end: None,
            acknowledged: false,
            gpus,
        })
    }

    /// Records how attempt `key` ended.
    pub fn ended(&self, key: AttemptKey, agent_id: &str, end: &AgentReport) -> io::Result<()> {
        self.write(&Record {
            job: key.0,
            attempt: key.1,
            agent_id: agent_id.to_string(),
            end: Some(end.clone()),
            acknowledged: false,
            gpus: None,
        })
    }

    /// Records that the leader committed attempt `key`'s end.
    pub fn acknowledged(&self, key: AttemptKey, agent_id: &str) -> io::Result<()> {
        self.write(&Record {
            job: key.0,
            attempt: key.1,
            agent_id: agent_id.to_string(),
            end: None,
            acknowledged: true,
            gpus: None,
        })
    }

    /// Deletes acknowledged records older than [`RETAIN`] and forgets them;
    /// returns how many.
    pub fn prune(&self) -> io::Result<usize> {
        let mut pruned = 0;
        for entry in std::fs::read_dir(&self.dir)? {
            let path = entry?.path();
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let Ok(record) = serde_json::from_slice::<Record>(&bytes) else {
                continue;
            };
            if !record.acknowledged || !older_than(&path, RETAIN) {
                continue;
            }
            std::fs::remove_file(&path)?;
            pruned += 1;
            if let Ok(mut newest) = self.newest.lock()
                && newest.get(&record.job) == Some(&record.attempt)
            {
                newest.remove(&record.job);
            }
        }
        Ok(pruned)
    }

    fn path(&self, key: AttemptKey) -> PathBuf {
        self.dir.join(format!("{}.{}", key.0, key.1))
    }

    fn write(&self, record: &Record) -> io::Result<()> {
        let _writing = self
            .writing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let path = self.path(record.key());
        if !record.acknowledged
            && let Ok(bytes) = std::fs::read(&path)
            && serde_json::from_slice::<Record>(&bytes).is_ok_and(|r| r.acknowledged)
        {
            // The leader already acknowledged this attempt's end.
            return Ok(());
        }
        let tmp = self
            .dir
            .join(format!("{}.{}.tmp", record.job, record.attempt));
        let bytes = serde_json::to_vec(record).map_err(io::Error::other)?;
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &path)
    }
}

fn older_than(path: &Path, age: Duration) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|modified| SystemTime::now().duration_since(modified).ok())
        .is_some_and(|elapsed| elapsed > age)
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::job::ExitStatus;

    #[test]
    fn records_survive_a_reopen_and_refuse_a_second_run() {
        let dir = tempfile::tempdir().expect("dir");
        let (journal, records) = Journal::open(dir.path()).expect("open");
        assert!(records.is_empty());
        assert!(!journal.ran((JobId(5), 2)));
        journal
            .started((JobId(5), 2), "n1:a", None)
            .expect("started");
        journal
            .started((JobId(6), 1), "n1:a", None)
            .expect("started");
        let exit = AgentReport::BatchExited {
            job: JobId(6),
            attempt: 1,
            status: ExitStatus {
                code: 0,
                signal: None,
            },
        };
        journal.ended((JobId(6), 1), "n1:a", &exit).expect("ended");
        assert!(journal.ran((JobId(5), 2)));
        assert!(
            journal.ran((JobId(5), 1)),
            "an older attempt of a job run here"
        );
        assert!(!journal.ran((JobId(5), 3)));

        let (again, records) = Journal::open(dir.path()).expect("reopen");
        assert!(again.ran((JobId(5), 2)) && again.ran((JobId(6), 1)));
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].key(), (JobId(5), 2));
        assert_eq!(records[0].end, None, "still running when the agent stopped");
        assert_eq!(records[1].end, Some(exit.clone()));
        assert!(!records[1].acknowledged);
        again
            .acknowledged((JobId(6), 1), "n1:a")
            .expect("acknowledged");
        // A late write of the end does not undo the acknowledgement.
        again.ended((JobId(6), 1), "n1:a", &exit).expect("ended");
        let (_, records) = Journal::open(dir.path()).expect("reopen");
        assert!(records[1].acknowledged);
    }

    #[test]
    fn garbage_and_partial_writes_are_skipped() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("7.1"), "{not json").expect("write");
        std::fs::write(dir.path().join("7.2.tmp"), "{}").expect("write");
        let (journal, records) = Journal::open(dir.path()).expect("open");
        assert!(records.is_empty());
        assert!(!journal.ran((JobId(7), 1)));
        assert!(!dir.path().join("7.2.tmp").exists());
    }
}
