//! `SaveBackup`: one consistent copy of the whole state, as a backup file
//! (`corral_state::backup`). The leader takes it after confirming with a
//! quorum that it leads and applying everything committed before the call
//! (so it holds every acknowledged change), encodes it once, and streams
//! the file in pieces; a follower names the leader. Admins only: the state
//! holds every user's jobs and scripts.

use corral_proto::api::{BackupChunk, backup_chunk};
use corral_state::backup::{self, BackupMeta};
use tokio::sync::mpsc;
use tonic::Status;

use super::ApiContext;
use super::caller::Caller;
use super::status;
use crate::clock;

/// Bytes per streamed piece (well under the API's message limit).
const PIECE_BYTES: usize = 1024 * 1024;
/// Pieces buffered ahead of a slow client.
const PIECES_AHEAD: usize = 4;

/// The backup file's pieces, size first.
pub async fn save(
    ctx: &ApiContext,
    caller: &Caller,
) -> Result<mpsc::Receiver<Result<BackupChunk, Status>>, Status> {
    caller.admin("saving a backup")?;
    let copy = ctx.replica.backup().await.map_err(status::read)?;
    let meta = BackupMeta {
        cluster_name: ctx.config.cluster_name.clone(),
        index: copy.index,
        term: copy.term,
        taken_at_ms: clock::now().0,
        build: env!("CARGO_PKG_VERSION").to_string(),
        format: corral_state::snapshot::FORMAT_VERSION,
    };
    let file = backup::encode(&meta, &copy.snapshot)
        .map_err(|e| Status::internal(format!("cannot write the backup: {e}")))?;
    tracing::info!(
        index = meta.index,
        term = meta.term,
        bytes = file.len(),
        by = %caller.identity.name,
        "backup taken"
    );
    let (tx, rx) = mpsc::channel(PIECES_AHEAD);
    tokio::spawn(async move {
        let total = BackupChunk {
            part: Some(backup_chunk::Part::TotalBytes(file.len() as u64)),
        };
        if tx.send(Ok(total)).await.is_err() {
            return;
        }
        for piece in file.chunks(PIECE_BYTES) {
            let chunk = BackupChunk {
                part: Some(backup_chunk::Part::Data(piece.to_vec())),
            };
            if tx.send(Ok(chunk)).await.is_err() {
                return;
            }
        }
    });
    Ok(rx)
}
