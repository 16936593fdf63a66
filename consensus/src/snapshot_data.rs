//! The snapshot data openraft moves around: an open snapshot file (see
//! [`crate::snapshot_file`]) and its path. The leader reads its durable snapshot
//! file in chunks to send it; a follower writes the chunks it receives into a
//! partial file, which the state machine checks and renames into place. So a
//! snapshot of hundreds of MB is never held in memory to be sent or received.

use std::io::SeekFrom;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, AsyncWriteExt, ReadBuf};

/// An open snapshot file.
#[derive(Debug)]
pub struct SnapshotData {
    file: tokio::fs::File,
    path: PathBuf,
    /// A file being received is removed when dropped unless it was kept: a
    /// reception openraft abandons must not leave hundreds of MB behind.
    remove_on_drop: bool,
}

impl SnapshotData {
    /// The snapshot file `file`, found at `path`, positioned at its start.
    pub fn from_std(file: std::fs::File, path: PathBuf) -> Self {
        SnapshotData {
            file: tokio::fs::File::from_std(file),
            path,
            remove_on_drop: false,
        }
    }

    /// Creates the file at `path` to receive a snapshot into. It is removed
    /// when this is dropped, unless [`SnapshotData::keep`] was called.
    pub async fn create(path: PathBuf) -> std::io::Result<Self> {
        let file = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .await?;
        Ok(SnapshotData {
            file,
            path,
            remove_on_drop: true,
        })
    }

    /// Leaves the file in place when this is dropped: its receiver took it over.
    pub fn keep(&mut self) {
        self.remove_on_drop = false;
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits for the writes made so far and makes them durable.
    pub async fn sync(&mut self) -> std::io::Result<()> {
        self.file.flush().await?;
        self.file.sync_all().await
    }
}

impl Drop for SnapshotData {
    fn drop(&mut self) {
        if self.remove_on_drop
            && let Err(e) = std::fs::remove_file(&self.path)
        {
            tracing::warn!("could not remove {}: {e}", self.path.display());
        }
    }
}

impl AsyncRead for SnapshotData {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().file).poll_read(cx, buf)
    }
}

impl AsyncWrite for SnapshotData {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().file).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().file).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().file).poll_shutdown(cx)
    }
}

impl AsyncSeek for SnapshotData {
    fn start_seek(self: Pin<&mut Self>, position: SeekFrom) -> std::io::Result<()> {
        Pin::new(&mut self.get_mut().file).start_seek(position)
    }

    fn poll_complete(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<u64>> {
        Pin::new(&mut self.get_mut().file).poll_complete(cx)
    }
}
