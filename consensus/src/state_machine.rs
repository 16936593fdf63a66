//! The replicated state machine: a [`ClusterState`] in memory, applied entry by
//! entry, and its latest snapshot in a file of its own ([`crate::snapshot_file`]).
//! A restart loads the snapshot and replays only the log after it; a lagging
//! replica installs a snapshot sent by the leader.
//!
//! Building a snapshot encodes the state (applies wait for that), then
//! checksums and writes it on a thread of its own at a lower CPU priority, so
//! that Raft's heartbeats and appends keep the CPU while a large state is
//! written.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use corral_state::snapshot::FORMAT_VERSION;
use corral_state::{ClusterState, Command};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, EntryPayload, OptionalSend, RaftSnapshotBuilder, SnapshotMeta, StorageIOError,
};
use serde::{Deserialize, Serialize};
use tokio::sync::{oneshot, watch};

use crate::apply_total::apply_total;
use crate::snapshot_data::SnapshotData;
use crate::snapshot_file::{self, Loaded, Meta, SnapshotDir};
use crate::types::{
    Applied, Entry, LogId, ReplicaAddr, ReplicaId, StorageError, StoredMembership, TypeConfig,
};

/// The sled tree and key where builds before the snapshot file kept the snapshot.
const LEGACY_TREE: &str = "snapshot";
const LEGACY_KEY: &[u8] = b"current";

/// How much lower than the replica's own the snapshot thread's CPU priority is
/// (a `nice` increment).
const SNAPSHOT_NICENESS: i32 = 10;

/// What the pure state is and where in the log it stands.
#[derive(Debug, Clone, Default)]
struct Applier {
    state: ClusterState,
    last_applied: Option<LogId>,
    membership: StoredMembership,
}

/// The state's write lock, taken after the long readers' gate.
struct Writing<'a> {
    applier: std::sync::RwLockWriteGuard<'a, Applier>,
    _gate: tokio::sync::RwLockWriteGuard<'a, ()>,
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

/// A snapshot as builds before the snapshot file stored it in sled.
#[derive(Debug, Deserialize, Serialize)]
struct LegacySnapshot {
    meta: Meta,
    /// `corral_state::snapshot::encode` of the state.
    state: Vec<u8>,
}

/// The state machine store. Cheap to clone; clones share the state.
#[derive(Clone)]
pub struct StateMachineStore {
    applier: Arc<RwLock<Applier>>,
    /// The position of the durable snapshot.
    current: Arc<Mutex<Option<Meta>>>,
    /// Serializes making snapshots current, so a build racing an install cannot
    /// leave the older snapshot on disk.
    persisting: Arc<tokio::sync::Mutex<()>>,
    /// Shared by the readers that hold the state's read lock for long (a
    /// snapshot's encoding, a scheduling pass), taken alone by applies and
    /// installs: see `write_applier`.
    long_readers: Arc<tokio::sync::RwLock<()>>,
    /// The log index covered by the durable snapshot (the log may be purged up to it).
    durable: Arc<watch::Sender<Option<u64>>>,
    snapshots: Arc<SnapshotDir>,
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
    /// Opens the store in the replica directory `dir`, loading the latest
    /// snapshot if there is one (moving one that `db` holds from an earlier
    /// build into its file first).
    pub fn open(db: &sled::Db, dir: &Path) -> Result<Self, StorageError> {
        let snapshots = SnapshotDir::open(dir).map_err(io)?;
        move_legacy_snapshot(db, &snapshots)?;
        let (applier, current) = match snapshots.load().map_err(io)? {
            Some(loaded) => (applier_from(&loaded)?, Some(loaded.meta)),
            None => (Applier::default(), None),
        };
        let durable = current
            .as_ref()
            .and_then(|meta| meta.last_log_id.map(|l| l.index));
        Ok(StateMachineStore {
            applier: Arc::new(RwLock::new(applier)),
            current: Arc::new(Mutex::new(current)),
            persisting: Arc::new(tokio::sync::Mutex::new(())),
            long_readers: Arc::new(tokio::sync::RwLock::new(())),
            durable: Arc::new(watch::channel(durable).0),
            snapshots: Arc::new(snapshots),
        })
    }

    /// A watch of the log index the durable snapshot covers.
    pub fn durable_snapshot(&self) -> watch::Receiver<Option<u64>> {
        self.durable.subscribe()
    }

    /// Bytes the durable snapshot takes on disk.
    pub fn snapshot_disk_bytes(&self) -> u64 {
        self.snapshots.disk_bytes()
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

    /// Runs `read` on the applied state on a blocking thread, as a long
    /// reader: applies wait for it (asynchronously: see `write_applier`), and
    /// it waits for an apply already waiting (the gate is fair), so a stream
    /// of long reads cannot starve the log. For work that takes long on a
    /// large state: a scheduling pass, a copy of the state.
    pub async fn read_long<T: Send + 'static>(
        &self,
        read: impl FnOnce(&ClusterState) -> T + Send + 'static,
    ) -> Result<T, StorageError> {
        let gate = Arc::clone(&self.long_readers).read_owned().await;
        let applier = Arc::clone(&self.applier);
        tokio::task::spawn_blocking(move || {
            let result = applier
                .read()
                .map(|applier| read(&applier.state))
                .map_err(|_| poisoned());
            drop(gate);
            result
        })
        .await
        .map_err(io)?
    }

    /// The applied state in `corral_state::snapshot`'s encoding, sealed, and
    /// the last log id it had applied: one consistent copy, for a backup.
    /// Encoded as a long reader (as a snapshot is), sealed after applies
    /// may go on.
    pub async fn encode_applied(&self) -> Result<(Vec<u8>, Option<LogId>), StorageError> {
        let gate = Arc::clone(&self.long_readers).read_owned().await;
        let applier = Arc::clone(&self.applier);
        on_snapshot_thread(move || {
            let (unsealed, at) = {
                let applier = applier.read().map_err(|_| poisoned())?;
                (
                    corral_state::snapshot::encode_unsealed(&applier.state).map_err(io)?,
                    applier.last_applied,
                )
            };
            drop(gate);
            Ok((unsealed.seal(), at))
        })
        .await
    }

    /// Takes the write lock for an apply or an install. A snapshot encodes the
    /// state under the read lock for as long as a second, and a scheduling
    /// pass on a large state plans under it for a quarter of one; waiting for
    /// them on the std lock would hold a runtime thread, and with it every
    /// task queued there (Raft's heartbeats among them). So they hold the
    /// `long_readers` gate, shared, and this waits for the gate,
    /// asynchronously, first.
    async fn write_applier(&self) -> Result<Writing<'_>, StorageError> {
        let gate = self.long_readers.write().await;
        let applier = self.applier.write().map_err(|_| poisoned())?;
        Ok(Writing {
            applier,
            _gate: gate,
        })
    }

    /// Makes the durable partial snapshot file `partial`, at `meta`, the current
    /// snapshot, unless a snapshot at least as new already is (then `partial`
    /// is removed).
    async fn persist(&self, meta: &Meta, partial: PathBuf) -> Result<(), StorageError> {
        let _one_at_a_time = self.persisting.lock().await;
        let existing = self.current.lock().map_err(|_| poisoned())?.clone();
        let snapshots = Arc::clone(&self.snapshots);
        if existing.is_some_and(|e| e.last_log_id >= meta.last_log_id) {
            tokio::task::spawn_blocking(move || snapshots.discard(&partial))
                .await
                .map_err(io)?;
            return Ok(());
        }
        tokio::task::spawn_blocking(move || snapshots.make_current(&partial))
            .await
            .map_err(io)?
            .map_err(io)?;
        *self.current.lock().map_err(|_| poisoned())? = Some(meta.clone());
        self.durable.send_replace(meta.last_log_id.map(|l| l.index));
        Ok(())
    }
}

/// Moves a snapshot that an earlier build kept in sled into the snapshot file
/// (unless the file is at least as new), then removes it from sled.
fn move_legacy_snapshot(db: &sled::Db, snapshots: &SnapshotDir) -> Result<(), StorageError> {
    let tree = db.open_tree(LEGACY_TREE).map_err(io)?;
    let Some(bytes) = tree.get(LEGACY_KEY).map_err(io)? else {
        return Ok(());
    };
    let legacy: LegacySnapshot = postcard::from_bytes(&bytes).map_err(io)?;
    let on_file = snapshots.current_meta().map_err(io)?;
    if on_file.is_none_or(|meta| meta.last_log_id < legacy.meta.last_log_id) {
        let partial = snapshots
            .write_partial(&legacy.meta, &legacy.state)
            .map_err(io)?;
        snapshots.make_current(&partial).map_err(io)?;
    }
    tree.remove(LEGACY_KEY).map_err(io)?;
    db.flush().map_err(io)?;
    Ok(())
}

fn applier_from(loaded: &Loaded) -> Result<Applier, StorageError> {
    let state = corral_state::snapshot::decode(loaded.state())
        .map_err(|e| StorageIOError::read_state_machine(&e))?;
    Ok(Applier {
        state,
        last_applied: loaded.meta.last_log_id,
        membership: loaded.meta.last_membership.clone(),
    })
}

pub(crate) fn meta_at(last_applied: Option<LogId>, membership: StoredMembership) -> Meta {
    let snapshot_id = match last_applied {
        Some(id) => format!(
            "{}-{}-{}",
            id.leader_id.term, id.leader_id.node_id, id.index
        ),
        None => "empty".to_string(),
    };
    SnapshotMeta {
        last_log_id: last_applied,
        last_membership: membership,
        snapshot_id,
    }
}

/// Runs `work` on a thread of its own (a snapshot's work takes seconds for a
/// large state: it must hold neither a runtime thread nor a blocking-pool one
/// that a sync or a read waits for).
async fn on_snapshot_thread<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StorageError> + Send + 'static,
) -> Result<T, StorageError> {
    let (done, result) = oneshot::channel();
    std::thread::Builder::new()
        .name("raft-snapshot".into())
        .spawn(move || {
            let _ = done.send(work());
        })
        .map_err(io)?;
    result
        .await
        .map_err(|_| io(std::io::Error::other("the snapshot thread panicked")))?
}

/// Lowers the calling thread's CPU priority by [`SNAPSHOT_NICENESS`] (on Linux
/// the nice value is per thread). A failure only costs the priority, so it is
/// logged and ignored.
fn lower_priority() {
    let thread = rustix::thread::gettid();
    let result = rustix::process::getpriority_process(Some(thread)).and_then(|nice| {
        rustix::process::setpriority_process(Some(thread), nice + SNAPSHOT_NICENESS)
    });
    if let Err(e) = result {
        tracing::warn!("snapshot thread keeps its CPU priority: {e}");
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        // Encode under the read lock (faster than copying the state, and
        // without a second copy of it in memory), then checksum and write, all
        // on a thread of its own: a large state takes a second to encode, and
        // a runtime thread held that long stalls Raft's heartbeats into
        // elections. Applies wait for the encoding without holding a runtime
        // thread (see `write_applier`); reads go on.
        let applier = Arc::clone(&self.applier);
        let snapshots = Arc::clone(&self.snapshots);
        let gate = Arc::clone(&self.long_readers).read_owned().await;
        let (meta, partial) = on_snapshot_thread(move || {
            let started = std::time::Instant::now();
            let (unsealed, meta) = {
                let applier = applier.read().map_err(|_| poisoned())?;
                (
                    corral_state::snapshot::encode_unsealed(&applier.state).map_err(io)?,
                    meta_at(applier.last_applied, applier.membership.clone()),
                )
            };
            drop(gate);
            let encoded = started.elapsed();
            // Only now: applies waited for the encoding, so it ran at full
            // priority; checksumming and writing do not hold them up.
            lower_priority();
            let state = unsealed.seal();
            let sealed = started.elapsed();
            let partial = snapshots.write_partial(&meta, &state).map_err(io)?;
            tracing::info!(
                index = meta.last_log_id.map(|l| l.index),
                bytes = state.len(),
                encode_ms = encoded.as_millis() as u64,
                checksum_ms = (sealed - encoded).as_millis() as u64,
                write_ms = (started.elapsed() - sealed).as_millis() as u64,
                "snapshot built"
            );
            Ok((meta, partial))
        })
        .await?;
        self.persist(&meta, partial).await?;
        // The current snapshot: this one, or a newer one installed meanwhile.
        self.get_current_snapshot().await?.ok_or_else(|| {
            io(std::io::Error::other(
                "the snapshot just written is not on disk",
            ))
        })
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
                    // A leader of a newer build wrote its format first: stop
                    // there rather than apply its entries by this build's rules.
                    newer_format(&commands).map_or(Ok(()), |e| {
                        Err(StorageError::from(StorageIOError::apply(
                            entry.log_id,
                            AnyError::new(&e),
                        )))
                    })?;
                    Applied {
                        results: commands
                            .into_iter()
                            .map(|command| {
                                let state = &mut applier.state;
                                apply_total(&entry.log_id, || state.apply(command))
                            })
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

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<SnapshotData>, StorageError> {
        let path = self.snapshots.receiving_path();
        Ok(Box::new(SnapshotData::create(path).await.map_err(io)?))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<ReplicaId, ReplicaAddr>,
        snapshot: Box<SnapshotData>,
    ) -> Result<(), StorageError> {
        let mut received = *snapshot;
        let partial = received.path().to_path_buf();
        // From here this owns the file: it becomes current or is discarded.
        received.keep();
        let checked = async {
            received.sync().await.map_err(io)?;
            drop(received);
            let (expected, path) = (meta.clone(), partial.clone());
            tokio::task::spawn_blocking(move || {
                let loaded = snapshot_file::read(&path).map_err(io)?;
                if loaded.meta != expected {
                    return Err(io(std::io::Error::other(format!(
                        "the snapshot received is at {:?}, not at {:?} as announced",
                        loaded.meta.last_log_id, expected.last_log_id
                    ))));
                }
                applier_from(&loaded)
            })
            .await
            .map_err(io)?
        };
        let decoded = match checked.await {
            Ok(decoded) => decoded,
            Err(e) => {
                self.snapshots.discard(&partial);
                return Err(e);
            }
        };
        self.persist(meta, partial).await?;
        let mut applier = self.write_applier().await?;
        let mut decoded = decoded;
        // Watches of this replica's jobs compare every job once more.
        decoded.state.continue_job_journal(&applier.state);
        *applier = decoded;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let snapshots = Arc::clone(&self.snapshots);
        let current = tokio::task::spawn_blocking(move || {
            let path = snapshots.current_path();
            snapshots
                .open_current()
                .map(|found| found.map(|(meta, file)| (meta, SnapshotData::from_std(file, path))))
        })
        .await
        .map_err(io)?
        .map_err(io)?;
        Ok(current.map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(data),
        }))
    }
}

/// An entry written under a stored format newer than this build's.
#[derive(Debug, thiserror::Error)]
#[error(
    "the log holds stored format {found}, written by a newer corral; this build reads up to format {readable}: upgrade this replica"
)]
pub struct NewerFormat {
    /// The format the entry names.
    pub found: u32,
    /// The newest this build reads.
    pub readable: u32,
}

/// The first [`Command::StoredFormat`] among `commands` that names a format
/// newer than this build's, as an error.
pub fn newer_format(commands: &[Command]) -> Option<NewerFormat> {
    commands.iter().find_map(|command| match command {
        Command::StoredFormat { format } if *format > FORMAT_VERSION => Some(NewerFormat {
            found: *format,
            readable: FORMAT_VERSION,
        }),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn an_entry_of_a_newer_stored_format_is_named_and_this_ones_pass() {
        let tick = Command::Tick {
            at: corral_state::Timestamp(1),
        };
        let ours = Command::StoredFormat {
            format: FORMAT_VERSION,
        };
        assert!(newer_format(&[tick.clone(), ours]).is_none());
        let newer = Command::StoredFormat {
            format: FORMAT_VERSION + 1,
        };
        let error = newer_format(&[tick, newer]).unwrap();
        assert_eq!(error.found, FORMAT_VERSION + 1);
        assert!(
            error.to_string().contains("upgrade this replica"),
            "{error}"
        );
    }

    #[test]
    fn the_snapshot_thread_lowers_only_its_own_priority() {
        let own = || rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap();
        let before = own();
        let (was, now) = std::thread::spawn(move || {
            let was = own();
            lower_priority();
            (was, own())
        })
        .join()
        .unwrap();
        assert_eq!(now, (was + SNAPSHOT_NICENESS).min(19));
        assert_eq!(own(), before, "the calling thread's priority changed");
    }
}
