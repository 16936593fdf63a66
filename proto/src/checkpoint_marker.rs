//! The checkpoint marker: `corral checkpoint --step N --path P` inside a job
//! writes `CORRAL_CHECKPOINT_DIR/.corral-checkpoint` (atomically, by rename); the
//! agent on the batch host reads it and reports the checkpoint, which the leader
//! commits with the attempt number. The next attempt gets the path as
//! `CORRAL_RESUME_FROM`.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The marker's file name inside `CORRAL_CHECKPOINT_DIR`.
pub const MARKER: &str = ".corral-checkpoint";

/// What a marker says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// Training step.
    pub step: u64,
    /// Where the checkpoint is.
    pub path: String,
}

/// Reads the marker in `dir`, if there is a valid one.
pub fn read(dir: &Path) -> Option<Marker> {
    let text = std::fs::read_to_string(dir.join(MARKER)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Writes a marker into `dir` atomically.
pub fn write(dir: &Path, marker: &Marker) -> std::io::Result<()> {
    let tmp = dir.join(format!("{MARKER}.tmp.{}", std::process::id()));
    let text = serde_json::to_string(marker).map_err(std::io::Error::other)?;
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, dir.join(MARKER))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_marker_reads_back_and_garbage_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), None);
        let marker = Marker {
            step: 40,
            path: "/ckpt/step-40".into(),
        };
        write(dir.path(), &marker).unwrap();
        assert_eq!(read(dir.path()), Some(marker));
        std::fs::write(dir.path().join(MARKER), "{not json").unwrap();
        assert_eq!(read(dir.path()), None);
    }
}
