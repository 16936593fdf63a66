//! `corral shims DIR`: links named after Slurm's commands, so scripts and habits
//! that call `sbatch`, `squeue`, ... reach corral.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use crate::slurm_shims::SHIM_NAMES;

/// Creates (or replaces) the links.
pub fn run(dir: &Path) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("cannot find this program's own path")?;
    for link in link_all(dir, &exe)? {
        println!("{} -> {}", link.display(), exe.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Creates (or replaces) a link to `exe` in `dir` for every Slurm name; returns them.
pub fn link_all(dir: &Path, exe: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut links = Vec::new();
    for name in SHIM_NAMES {
        let link = dir.join(name);
        if link.symlink_metadata().is_ok() {
            std::fs::remove_file(&link)
                .with_context(|| format!("cannot replace {}", link.display()))?;
        }
        std::os::unix::fs::symlink(exe, &link)
            .with_context(|| format!("cannot create {}", link.display()))?;
        links.push(link);
    }
    Ok(links)
}
