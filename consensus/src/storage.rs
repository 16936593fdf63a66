//! A replica's storage, opened in the one right order: the sled database
//! (vote, purge point), the write-ahead log of entries from the purge point on,
//! the flusher thread that makes both durable, and openraft's two stores over
//! them (the state machine's with its snapshot file).

use std::path::Path;
use std::sync::Arc;

use crate::error::StartError;
use crate::flusher::Flusher;
use crate::log_store::{self, LogStore};
use crate::replica::open_database;
use crate::state_machine::StateMachineStore;
use crate::wal::Wal;

/// The sled tree that held the log's entries before they moved to the
/// write-ahead log.
const SLED_LOG_TREE: &[u8] = b"log";

/// A replica's opened storage.
pub struct Storage {
    /// The sled database.
    pub db: sled::Db,
    /// The thread that makes writes durable.
    pub flusher: Arc<Flusher>,
    /// The log's entries (also inside `log`).
    pub wal: Arc<Wal>,
    /// openraft's log store.
    pub log: LogStore,
    /// openraft's state machine store.
    pub state: StateMachineStore,
}

impl Storage {
    /// Opens (or creates) the storage in `dir`.
    pub fn open(dir: &Path) -> Result<Self, StartError> {
        let storage = |source| StartError::Storage {
            path: dir.display().to_string(),
            source,
        };
        let db = open_database(dir).map_err(storage)?;
        refuse_log_in_sled(&db, dir)?;
        let damaged = |reason: String| StartError::Log {
            path: dir.display().to_string(),
            reason,
        };
        let purged = log_store::last_purged(&db).map_err(|e| damaged(e.to_string()))?;
        let wal = Arc::new(
            Wal::open(dir, purged.map(|id| id.index)).map_err(|e| damaged(e.to_string()))?,
        );
        let flusher = Arc::new(
            Flusher::start(db.clone(), dir, Arc::clone(&wal))
                .map_err(|e| storage(sled::Error::Io(e)))?,
        );
        let state =
            StateMachineStore::open(&db, dir).map_err(|e| StartError::Raft(e.to_string()))?;
        let log = LogStore::open(&db, Arc::clone(&wal), Arc::clone(&flusher))
            .map_err(storage)?
            .purging_after(state.durable_snapshot());
        Ok(Storage {
            db,
            flusher,
            wal,
            log,
            state,
        })
    }
}

/// A directory whose entries are still in sled was written by an earlier build
/// (whose entries this one cannot decode either): refuse it rather than start
/// with its log missing.
fn refuse_log_in_sled(db: &sled::Db, dir: &Path) -> Result<(), StartError> {
    if !db
        .tree_names()
        .iter()
        .any(|name| &name[..] == SLED_LOG_TREE)
    {
        return Ok(());
    }
    let tree = db
        .open_tree(SLED_LOG_TREE)
        .map_err(|source| StartError::Storage {
            path: dir.display().to_string(),
            source,
        })?;
    if tree.is_empty() {
        return Ok(());
    }
    Err(StartError::Log {
        path: dir.display().to_string(),
        reason: format!(
            "it holds {} log entries in the format of an earlier corral build, which this \
             build cannot read; run that build, or remove the directory and add this replica \
             to the cluster again as a new member",
            tree.len()
        ),
    })
}
