//! A replica's durable snapshot, as one file: `raft-snapshot/current` in the
//! replica's directory. It holds the snapshot's Raft position (openraft's
//! `SnapshotMeta`) and the state's versioned encoding, so one rename replaces
//! both at once. The file is also what travels to a lagging follower: the leader
//! streams it as it is, and the follower writes it to a file of its own (a
//! `.partial` one) that becomes `current` once it is durable and checked.
//!
//! Format, version 1: magic `CRLSNAP\n`, the version (u32), the meta's length
//! (u32) and CRC32 (u32), the meta (postcard), then `corral_state::snapshot`'s
//! encoding of the state, which carries its own length and SHA-256. All
//! integers little-endian.
//!
//! A new snapshot is written to a `.partial` file, fsynced, renamed over
//! `current` and the directory fsynced: a crash leaves either snapshot whole,
//! never a mix, and the partial files it leaves are removed at the next open.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use openraft::SnapshotMeta;

use crate::types::{ReplicaAddr, ReplicaId};

/// The directory, inside a replica's directory, that holds its snapshot.
pub const DIRECTORY: &str = "raft-snapshot";
/// The durable snapshot's file name.
const CURRENT: &str = "current";
/// Ending of files being written (a build's, or a snapshot being received).
const PARTIAL: &str = ".partial";
/// Beginning of the partial files of snapshots being received.
const RECEIVING: &str = "receiving-";
const MAGIC: &[u8; 8] = b"CRLSNAP\n";
const VERSION: u32 = 1;
const HEADER_BYTES: usize = 8 + 4 + 4 + 4;
/// A snapshot is written and synced this many bytes at a time.
const WRITE_PIECE_BYTES: usize = 8 * 1024 * 1024;
/// Most bytes a meta may take (a membership of a few replicas takes hundreds).
const MAX_META_BYTES: usize = 1024 * 1024;

/// A snapshot's Raft position.
pub type Meta = SnapshotMeta<ReplicaId, ReplicaAddr>;

/// Why a snapshot file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotFileError {
    /// A file system call failed.
    #[error("could not {action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not a whole snapshot of this format.
    #[error(
        "snapshot {path} is damaged: {reason}; remove the replica's directory and add it to \
         the cluster again (it then receives a snapshot from the leader)"
    )]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SnapshotFileError {
    let path = path.to_path_buf();
    move |source| SnapshotFileError::Io {
        action,
        path,
        source,
    }
}

/// A snapshot read back: its position and its state's encoding.
#[derive(Debug)]
pub struct Loaded {
    /// Its Raft position.
    pub meta: Meta,
    bytes: Vec<u8>,
    state_at: usize,
}

impl Loaded {
    /// The state's encoding (`corral_state::snapshot`).
    pub fn state(&self) -> &[u8] {
        &self.bytes[self.state_at..]
    }
}

/// The snapshot directory of one replica.
#[derive(Debug)]
pub struct SnapshotDir {
    dir: PathBuf,
    next_partial: AtomicU64,
}

impl SnapshotDir {
    /// Opens the snapshot directory in `data_dir`, creating it, and removes the
    /// partial files an interrupted write left.
    pub fn open(data_dir: &Path) -> Result<Self, SnapshotFileError> {
        let dir = crate::durable_dir::create(data_dir, DIRECTORY)
            .map_err(|(path, e)| io("create", &path)(e))?;
        for entry in std::fs::read_dir(&dir).map_err(io("list", &dir))? {
            let path = entry.map_err(io("list", &dir))?.path();
            if is_partial(&path) {
                std::fs::remove_file(&path).map_err(io("remove", &path))?;
            }
        }
        Ok(SnapshotDir {
            dir,
            next_partial: AtomicU64::new(0),
        })
    }

    /// Where the durable snapshot is.
    pub fn current_path(&self) -> PathBuf {
        self.dir.join(CURRENT)
    }

    /// Bytes the durable snapshot takes (0 when there is none).
    pub fn disk_bytes(&self) -> u64 {
        std::fs::metadata(self.current_path()).map_or(0, |m| m.len())
    }

    fn partial_path(&self, prefix: &str) -> PathBuf {
        let n = self.next_partial.fetch_add(1, Ordering::Relaxed);
        self.dir.join(format!("{prefix}{n}{PARTIAL}"))
    }

    /// A path for a snapshot about to be received. (A reception openraft
    /// abandons removes its file when dropped: see
    /// [`crate::snapshot_data::SnapshotData::create`].)
    pub fn receiving_path(&self) -> PathBuf {
        self.partial_path(RECEIVING)
    }

    /// Writes the snapshot of `state` (an encoding by `corral_state::snapshot`)
    /// at `meta` to a new partial file and makes it durable; returns its path.
    pub fn write_partial(&self, meta: &Meta, state: &[u8]) -> Result<PathBuf, SnapshotFileError> {
        let path = self.partial_path("built-");
        let header = header(meta).map_err(|reason| SnapshotFileError::Damaged {
            path: path.clone(),
            reason,
        })?;
        let written = (|| {
            let mut file = File::create_new(&path)?;
            file.write_all(&header)?;
            // A piece at a time, each synced before the next: hundreds of MB
            // written at once queue ahead of the log's fsyncs for seconds.
            for piece in state.chunks(WRITE_PIECE_BYTES) {
                file.write_all(piece)?;
                file.sync_data()?;
            }
            file.sync_all()
        })();
        if let Err(e) = written {
            self.discard(&path);
            return Err(io("write", &path)(e));
        }
        Ok(path)
    }

    /// Makes the durable partial file at `partial` the current snapshot.
    pub fn make_current(&self, partial: &Path) -> Result<(), SnapshotFileError> {
        let current = self.current_path();
        std::fs::rename(partial, &current).map_err(io("rename into place", partial))?;
        crate::durable_dir::sync(&self.dir).map_err(io("fsync the directory", &self.dir))
    }

    /// Removes a partial file that will not become current (best effort: a file
    /// left behind is removed at the next open).
    pub fn discard(&self, partial: &Path) {
        if let Err(e) = std::fs::remove_file(partial) {
            tracing::warn!("could not remove {}: {e}", partial.display());
        }
    }

    /// The durable snapshot's file, open; `None` when there is none yet.
    fn open_current_file(&self) -> Result<Option<(File, PathBuf)>, SnapshotFileError> {
        let path = self.current_path();
        match File::open(&path) {
            Ok(file) => Ok(Some((file, path))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io("open", &path)(e)),
        }
    }

    /// The durable snapshot, read whole; `None` when there is none yet.
    pub fn load(&self) -> Result<Option<Loaded>, SnapshotFileError> {
        self.open_current_file()?
            .map(|(file, path)| read_from(file, &path))
            .transpose()
    }

    /// Opens the durable snapshot to send it: its position and the file, at its
    /// start. The position is the file's own, so a snapshot replacing it
    /// meanwhile cannot pair one's position with the other's state.
    pub fn open_current(&self) -> Result<Option<(Meta, File)>, SnapshotFileError> {
        let Some((mut file, path)) = self.open_current_file()? else {
            return Ok(None);
        };
        let (meta, _) = read_header(&mut file, &path)?;
        use std::io::Seek;
        file.rewind().map_err(io("read", &path))?;
        Ok(Some((meta, file)))
    }

    /// The position of the durable snapshot, reading only its header.
    pub fn current_meta(&self) -> Result<Option<Meta>, SnapshotFileError> {
        Ok(self.open_current()?.map(|(meta, _)| meta))
    }
}

/// Reads the whole snapshot at `path` (a received one, before it is current).
pub fn read(path: &Path) -> Result<Loaded, SnapshotFileError> {
    let file = File::open(path).map_err(io("open", path))?;
    read_from(file, path)
}

fn read_from(mut file: File, path: &Path) -> Result<Loaded, SnapshotFileError> {
    let length = file.metadata().map_err(io("read", path))?.len();
    let mut bytes = Vec::with_capacity(usize::try_from(length).unwrap_or(0));
    file.read_to_end(&mut bytes).map_err(io("read", path))?;
    let (meta, state_at) = parse_header(&bytes).map_err(|reason| SnapshotFileError::Damaged {
        path: path.to_path_buf(),
        reason,
    })?;
    Ok(Loaded {
        meta,
        bytes,
        state_at,
    })
}

fn read_header(file: &mut File, path: &Path) -> Result<(Meta, usize), SnapshotFileError> {
    let damaged = |reason: String| SnapshotFileError::Damaged {
        path: path.to_path_buf(),
        reason,
    };
    let mut fixed = [0u8; HEADER_BYTES];
    file.read_exact(&mut fixed)
        .map_err(|e| damaged(format!("its header does not read: {e}")))?;
    let meta_len = check_fixed(&fixed).map_err(damaged)?;
    let mut bytes = fixed.to_vec();
    bytes.resize(HEADER_BYTES + meta_len, 0);
    file.read_exact(&mut bytes[HEADER_BYTES..])
        .map_err(|e| damaged(format!("its position does not read: {e}")))?;
    parse_header(&bytes).map_err(damaged)
}

/// The header of a snapshot at `meta`: everything before the state.
fn header(meta: &Meta) -> Result<Vec<u8>, String> {
    let encoded =
        postcard::to_stdvec(meta).map_err(|e| format!("position does not encode: {e}"))?;
    let mut out = Vec::with_capacity(HEADER_BYTES + encoded.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(encoded.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&encoded).to_le_bytes());
    out.extend_from_slice(&encoded);
    Ok(out)
}

fn le_u32(bytes: &[u8]) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[..4]);
    u32::from_le_bytes(word)
}

/// Checks the fixed part of a header; returns the meta's length.
fn check_fixed(fixed: &[u8]) -> Result<usize, String> {
    if fixed.len() < HEADER_BYTES || &fixed[..8] != MAGIC {
        return Err("it is not a corral Raft snapshot (bad magic)".into());
    }
    let version = le_u32(&fixed[8..]);
    if version != VERSION {
        return Err(format!(
            "its format {version} is not the one this build reads ({VERSION}); run the build \
             that wrote it"
        ));
    }
    let meta_len = le_u32(&fixed[12..]) as usize;
    if meta_len > MAX_META_BYTES {
        return Err(format!("its header claims a {meta_len}-byte position"));
    }
    Ok(meta_len)
}

/// Parses the header at the start of `bytes`: the meta and where the state starts.
fn parse_header(bytes: &[u8]) -> Result<(Meta, usize), String> {
    let meta_len = check_fixed(bytes)?;
    let end = HEADER_BYTES + meta_len;
    let encoded = bytes
        .get(HEADER_BYTES..end)
        .ok_or_else(|| "it ends inside its header".to_string())?;
    if crc32fast::hash(encoded) != le_u32(&bytes[16..]) {
        return Err("its position fails its checksum".into());
    }
    let meta =
        postcard::from_bytes(encoded).map_err(|e| format!("its position does not decode: {e}"))?;
    Ok((meta, end))
}

fn is_partial(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(PARTIAL))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use openraft::{CommittedLeaderId, LogId, StoredMembership};

    use super::*;

    fn meta(index: u64) -> Meta {
        SnapshotMeta {
            last_log_id: Some(LogId::new(CommittedLeaderId::new(2, 1), index)),
            last_membership: StoredMembership::default(),
            snapshot_id: format!("2-1-{index}"),
        }
    }

    #[test]
    fn a_written_snapshot_reads_back_once_current() {
        let data = tempfile::tempdir().unwrap();
        let dir = SnapshotDir::open(data.path()).unwrap();
        assert!(dir.load().unwrap().is_none());
        let partial = dir.write_partial(&meta(7), b"state bytes").unwrap();
        assert!(
            dir.load().unwrap().is_none(),
            "a partial file is not current"
        );
        dir.make_current(&partial).unwrap();
        let loaded = dir.load().unwrap().unwrap();
        assert_eq!(loaded.meta, meta(7));
        assert_eq!(loaded.state(), b"state bytes");
        assert_eq!(dir.current_meta().unwrap(), Some(meta(7)));

        // A newer one replaces it whole.
        let newer = dir.write_partial(&meta(9), b"newer").unwrap();
        dir.make_current(&newer).unwrap();
        let loaded = dir.load().unwrap().unwrap();
        assert_eq!((&loaded.meta, loaded.state()), (&meta(9), &b"newer"[..]));
    }

    #[test]
    fn partial_files_are_removed_at_open() {
        let data = tempfile::tempdir().unwrap();
        let dir = SnapshotDir::open(data.path()).unwrap();
        let current = dir.write_partial(&meta(3), b"three").unwrap();
        dir.make_current(&current).unwrap();
        let built = dir.write_partial(&meta(4), b"four").unwrap();
        let receiving = dir.receiving_path();
        std::fs::write(&receiving, b"half a snapshot").unwrap();
        assert_ne!(dir.receiving_path(), receiving);

        let dir = SnapshotDir::open(data.path()).unwrap();
        assert!(!built.exists());
        assert!(!receiving.exists());
        assert_eq!(dir.load().unwrap().unwrap().meta, meta(3));
    }

    #[test]
    fn a_damaged_header_is_refused_with_the_file_named() {
        let data = tempfile::tempdir().unwrap();
        let dir = SnapshotDir::open(data.path()).unwrap();
        let partial = dir.write_partial(&meta(5), b"state").unwrap();
        dir.make_current(&partial).unwrap();
        let path = dir.current_path();
        let good = std::fs::read(&path).unwrap();

        for (what, bytes) in [
            ("bad magic", {
                let mut b = good.clone();
                b[0] ^= 1;
                b
            }),
            ("meta bit flip", {
                let mut b = good.clone();
                b[HEADER_BYTES + 2] ^= 0x40;
                b
            }),
            ("cut inside the header", good[..HEADER_BYTES + 3].to_vec()),
            ("newer version", {
                let mut b = good.clone();
                b[8] = 2;
                b
            }),
        ] {
            std::fs::write(&path, &bytes).unwrap();
            let error = dir.load().unwrap_err();
            assert!(
                matches!(&error, SnapshotFileError::Damaged { path: p, .. } if *p == path),
                "{what}: {error}"
            );
            assert!(dir.open_current().is_err(), "{what}");
        }
    }
}
