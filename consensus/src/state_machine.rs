//! The replicated state machine: a [`ClusterState`] in memory, applied entry by
//! entry, and its latest snapshot persisted in sled tree `snapshot`. A restart
//! loads the snapshot and replays only the log after it; a lagging replica
//! installs a snapshot sent by the leader.
//!
//! The snapshot file is the state's versioned encoding (`corral_state::snapshot`)
//! plus the Raft position it reflects (last applied id and membership).

use std::io::Cursor;
use std::sync::{Arc, Mutex, RwLock};

use corral_state::ClusterState;
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, EntryPayload, OptionalSend, RaftSnapshotBuilder, SnapshotMeta, StorageIOError,
};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::flusher::Flusher;
use crate::types::{
    Applied, Entry, LogId, ReplicaAddr, ReplicaId, StorageError, StoredMembership, TypeConfig,
};

const CURRENT: &[u8] = b"current";

/// What the pure state is and where in the log it stands.
#[derive(Debug, Clone, Default)]
struct Applier {
    state: ClusterState,
    last_applied: Option<LogId>,
    membership: StoredMembership,
}

/// The state's write lock, taken after the snapshot-copy gate.
struct Writing<'a> {
    applier: std::sync::RwLockWriteGuard<'a, Applier>,
    _gate: tokio::sync::MutexGuard<'a, ()>,
}

impl std::ops::Deref for Writing<'_> {
    type Target = Applier;

    fn deref(&self) -> &Applier {
        &self.applier
    }
}

impl std::ops::DerefMut for Writing<'_> {
    fn deref_mut(&mut self) -> &mut Applier {
        &mut self.applier
    }
}

/// A snapshot as stored and sent: its metadata and the encoded state.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta<ReplicaId, ReplicaAddr>,
    /// `corral_state::snapshot::encode` of the state.
    state: Vec<u8>,
}

/// The state machine store. Cheap to clone; clones share the state.
#[derive(Clone)]
pub struct StateMachineStore {
    applier: Arc<RwLock<Applier>>,
    current: Arc<Mutex<Option<SnapshotFile>>>,
    /// Serializes snapshot persists, so a build racing an install cannot leave the
    /// older snapshot on disk.
    persisting: Arc<tokio::sync::Mutex<()>>,
    /// Held while a snapshot copies the state, and by applies: see
    /// `write_applier`.
    copying: Arc<tokio::sync::Mutex<()>>,
    /// The log index covered by the durable snapshot (the log may be purged up to it).
    durable: Arc<watch::Sender<Option<u64>>>,
    tree: sled::Tree,
    flusher: Arc<Flusher>,
}

fn io(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_state_machine(&e).into()
}

fn poisoned() -> StorageError {
    io(std::io::Error::other(
        "state machine lock poisoned by an earlier panic",
    ))
}

impl StateMachineStore {
    /// Opens the store, loading the latest snapshot if there is one.
    pub fn open(db: &sled::Db, flusher: Arc<Flusher>) -> Result<Self, StorageError> {
        let tree = db.open_tree("snapshot").map_err(io)?;
        let mut applier = Applier::default();
        let mut current = None;
        if let Some(bytes) = tree.get(CURRENT).map_err(io)? {
            let file: SnapshotFile = postcard::from_bytes(&bytes).map_err(io)?;
            applier = applier_from(&file)?;
            current = Some(file);
        }
        let durable = current
            .as_ref()
            .and_then(|f: &SnapshotFile| f.meta.last_log_id.map(|l| l.index));
        Ok(StateMachineStore {
            applier: Arc::new(RwLock::new(applier)),
            current: Arc::new(Mutex::new(current)),
            persisting: Arc::new(tokio::sync::Mutex::new(())),
            copying: Arc::new(tokio::sync::Mutex::new(())),
            durable: Arc::new(watch::channel(durable).0),
            tree,
            flusher,
        })
    }

    /// A watch of the log index the durable snapshot covers.
    pub fn durable_snapshot(&self) -> watch::Receiver<Option<u64>> {
        self.durable.subscribe()
    }

    /// Runs `read` on the applied state (not linearizable by itself: see `Replica::read`).
    pub fn read<T>(&self, read: impl FnOnce(&ClusterState) -> T) -> Result<T, StorageError> {
        let applier = self.applier.read().map_err(|_| poisoned())?;
        Ok(read(&applier.state))
    }

    /// The last applied log id.
    pub fn last_applied(&self) -> Option<LogId> {
        self.applier.read().ok().and_then(|a| a.last_applied)
    }

    /// Takes the write lock for an apply or an install. A snapshot copies the
    /// state under the read lock for as long as a second; waiting for it on
    /// the std lock would hold a runtime thread, and with it every task queued
    /// there (Raft's heartbeats among them). So the copy also holds the
    /// `copying` gate, and this waits for the gate, asynchronously, first.
    async fn write_applier(&self) -> Result<Writing<'_>, StorageError> {
        let gate = self.copying.lock().await;
        let applier = self.applier.write().map_err(|_| poisoned())?;
        Ok(Writing {
            applier,
            _gate: gate,
        })
    }

    /// Makes `file` the durable current snapshot, unless a snapshot at least as
    /// new already is; returns the current snapshot either way.
    async fn persist(&self, file: SnapshotFile) -> Result<SnapshotFile, StorageError> {
        let _one_at_a_time = self.persisting.lock().await;
        let existing = self.current.lock().map_err(|_| poisoned())?.clone();
        if let Some(existing) = existing.filter(|e| e.meta.last_log_id >= file.meta.last_log_id) {
            return Ok(existing);
        }
        // Encoding and writing a large state take seconds: off the runtime.
        {
            let (file, tree) = (file.clone(), self.tree.clone());
            tokio::task::spawn_blocking(move || {
                let encoded = postcard::to_stdvec(&file).map_err(io)?;
                tree.insert(CURRENT, encoded).map_err(io)
            })
            .await
            .map_err(io)??;
        }
        self.flusher
            .flush()
            .await
            .map_err(|e| io(std::io::Error::other(e)))?;
        *self.current.lock().map_err(|_| poisoned())? = Some(file.clone());
        self.durable
            .send_replace(file.meta.last_log_id.map(|l| l.index));
        Ok(file)
    }
}

fn applier_from(file: &SnapshotFile) -> Result<Applier, StorageError> {
    let state = corral_state::snapshot::decode(&file.state)
        .map_err(|e| StorageIOError::read_state_machine(&e))?;
    Ok(Applier {
        state,
        last_applied: file.meta.last_log_id,
        membership: file.meta.last_membership.clone(),
    })
}

fn to_snapshot(file: SnapshotFile) -> Snapshot<TypeConfig> {
    Snapshot {
        meta: file.meta,
        snapshot: Box::new(Cursor::new(file.state)),
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        // Copy under the read lock and encode, both on a blocking thread: a large
        // state takes a second to copy, and a runtime thread held that long
        // stalls Raft's heartbeats into elections. Applies wait for the copy
        // without holding a runtime thread (see `write_applier`); reads go on.
        let applier = Arc::clone(&self.applier);
        let gate = Arc::clone(&self.copying).lock_owned().await;
        let (state, last_applied, membership) = tokio::task::spawn_blocking(move || {
            let (copy, last_applied, membership) = {
                let applier = applier.read().map_err(|_| poisoned())?;
                (
                    applier.state.clone(),
                    applier.last_applied,
                    applier.membership.clone(),
                )
            };
            drop(gate);
            let state = corral_state::snapshot::encode(&copy).map_err(io)?;
            Ok::<_, StorageError>((state, last_applied, membership))
        })
        .await
        .map_err(io)??;
        let snapshot_id = match last_applied {
            Some(id) => format!(
                "{}-{}-{}",
                id.leader_id.term, id.leader_id.node_id, id.index
            ),
            None => "empty".to_string(),
        };
        let meta = SnapshotMeta {
            last_log_id: last_applied,
            last_membership: membership,
            snapshot_id,
        };
        let file = self.persist(SnapshotFile { meta, state }).await?;
        Ok(to_snapshot(file))
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let applier = self.applier.read().map_err(|_| poisoned())?;
        Ok((applier.last_applied, applier.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Applied>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut applier = self.write_applier().await?;
        let mut results = Vec::new();
        for entry in entries {
            let applied = match entry.payload {
                EntryPayload::Blank => Applied::default(),
                EntryPayload::Normal(proposal) => {
                    // Every command decodes before any applies: an entry that does
                    // not decode (a newer build's commands, or corruption) stops
                    // this replica with the entry named, never half applied.
                    let commands =
                        proposal
                            .commands()
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(|e| {
                                StorageError::from(StorageIOError::apply(
                                    entry.log_id,
                                    AnyError::new(&e),
                                ))
                            })?;
                    Applied {
                        results: commands
                            .into_iter()
                            .map(|command| applier.state.apply(command))
                            .collect(),
                    }
                }
                EntryPayload::Membership(membership) => {
                    applier.membership = StoredMembership::new(Some(entry.log_id), membership);
                    Applied::default()
                }
            };
            applier.last_applied = Some(entry.log_id);
            results.push(applied);
        }
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<ReplicaId, ReplicaAddr>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let file = SnapshotFile {
            meta: meta.clone(),
            state: snapshot.into_inner(),
        };
        let decoded = {
            let file = file.clone();
            tokio::task::spawn_blocking(move || applier_from(&file))
                .await
                .map_err(io)??
        };
        self.persist(file).await?;
        *self.write_applier().await? = decoded;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let current = self.current.lock().map_err(|_| poisoned())?.clone();
        Ok(current.map(to_snapshot))
    }
}
