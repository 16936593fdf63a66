//! Writing the batch script to the agent's spool directory as an executable file
//! only its user can read (mode 0700, owned by the job's user when the agent
//! runs as root).

use std::fs::{self, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt, fchown};
use std::path::{Path, PathBuf};

use corral_state::JobId;
use nix::fcntl::OFlag;
use nix::unistd::geteuid;

use super::{ProcessError, RunAs};

/// The script's mode.
const SCRIPT_MODE: u32 = 0o700;

/// Writes `script` as `dir/job<ID>.attempt<N>.sh`, replacing a file of that name
/// left by an earlier launch, and returns its path. `dir` is the agent's own
/// spool directory; the job's user must be able to enter it.
pub fn write_script(
    dir: &Path,
    job: JobId,
    attempt: u32,
    script: &str,
    user: Option<&RunAs>,
) -> Result<PathBuf, ProcessError> {
    let path = dir.join(format!("job{job}.attempt{attempt}.sh"));
    let error = |source: io::Error| ProcessError::Script {
        path: path.clone(),
        source,
    };
    match fs::remove_file(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(error(e)),
        _ => {}
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(SCRIPT_MODE)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(&path)
        .map_err(error)?;
    file.set_permissions(Permissions::from_mode(SCRIPT_MODE))
        .map_err(error)?;
    if let Some(user) = user.filter(|_| geteuid().is_root()) {
        fchown(&file, Some(user.uid), Some(user.gid)).map_err(error)?;
    }
    file.write_all(script.as_bytes()).map_err(error)?;
    file.sync_all().map_err(error)?;
    Ok(path)
}
