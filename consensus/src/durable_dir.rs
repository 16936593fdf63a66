//! Directories whose changes survive a power cut: a new directory's entry in its
//! parent, and renames or removals inside a directory, are durable only once
//! the directory holding them is fsynced.

use std::fs::File;
use std::path::{Path, PathBuf};

/// Makes `parent/name` exist, durably; returns its path. On failure, the
/// error names the directory the failing step touched.
pub fn create(parent: &Path, name: &str) -> Result<PathBuf, (PathBuf, std::io::Error)> {
    let dir = parent.join(name);
    if !dir.exists() {
        std::fs::create_dir_all(&dir).map_err(|e| (dir.clone(), e))?;
        sync(parent).map_err(|e| (parent.to_path_buf(), e))?;
    }
    Ok(dir)
}

/// Makes the renames and removals inside `dir` durable.
pub fn sync(dir: &Path) -> std::io::Result<()> {
    File::open(dir).and_then(|directory| directory.sync_all())
}
