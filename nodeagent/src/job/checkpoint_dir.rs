//! A job's checkpoint directory (`CHECKPOINT_ROOT/JOB_ID`): made by the agent,
//! which may be root, and handed to the job's user, without ever following a
//! link or taking over a directory a user planted there.
//!
//! The root is the operator's (a trusted path); the job's own name under it is
//! not, where users may write to the root (shared scratch, or NFS with root
//! squash). So the agent opens the root once and works relative to it: it
//! makes the job's directory there (`mkdirat`), opens that name without
//! following a link (`O_NOFOLLOW | O_DIRECTORY`), and changes the owner of
//! what it opened (`fchown`), never of a path looked up again. A directory
//! that was already there is handed over only if it is the job's user's (a
//! requeued attempt's) or the agent's own; another user's, a link, or anything
//! but a directory fails the launch as the job's fault, and nothing changes.

use std::os::fd::OwnedFd;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, open, openat};
use nix::sys::stat::{Mode, SFlag, fstat, fstatat, mkdirat};
use nix::unistd::{Gid, Uid, fchown, geteuid};

use super::process::RunAs;

/// The mode a new checkpoint directory is made with (before the umask).
const MODE: u32 = 0o755;

/// The uid NFS root squash maps root to (`anonuid`, 65534 unless changed).
const SQUASHED_UID: u32 = 65_534;

/// Whether the directory open at `dir` has no entries.
fn is_empty(dir: &OwnedFd) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let listed = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))?;
    Ok(listed.count() == 0)
}

/// Why the job's checkpoint directory could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointDirError {
    /// The root cannot be opened: the agent's configuration or its host.
    #[error("cannot open the checkpoint root {root}: {source}; check --checkpoint-root")]
    Root {
        /// The configured root.
        root: String,
        /// What opening it returned.
        source: Errno,
    },
    /// The job's name under the root is something the agent must not use.
    #[error("the job's checkpoint directory {path} {why}; remove it and requeue the job")]
    Unsafe {
        /// The job's directory.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// Making or opening the directory failed.
    #[error("cannot make the job's checkpoint directory {path}: {source}")]
    Make {
        /// The job's directory.
        path: String,
        /// The error.
        source: Errno,
    },
}

/// Makes (or finds) `root/name` for a job running as `user` (`None`: as the
/// agent's own user) and gives it to that user.
pub fn make_checkpoint_dir(
    root: &Path,
    name: &str,
    user: Option<&RunAs>,
) -> Result<(), CheckpointDirError> {
    let path = root.join(name).display().to_string();
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(CheckpointDirError::Unsafe {
            path,
            why: "is not a single name under the root".into(),
        });
    }
    let open_root = || {
        open(
            root,
            OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
    };
    let root_dir = match open_root() {
        // The operator's path, made as the agent makes it at its start (a
        // file system mounted since may have hidden it).
        Err(Errno::ENOENT) => std::fs::create_dir_all(root)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(0)))
            .and_then(|()| open_root()),
        opened => opened,
    }
    .map_err(|source| CheckpointDirError::Root {
        root: root.display().to_string(),
        source,
    })?;
    let made = match mkdirat(&root_dir, name, Mode::from_bits_truncate(MODE)) {
        Ok(()) => true,
        Err(Errno::EEXIST) => false,
        Err(source) => return Err(CheckpointDirError::Make { path, source }),
    };
    let dir = open_no_follow(&root_dir, name, &path)?;
    let owner = fstat(&dir)
        .map_err(|source| CheckpointDirError::Make {
            path: path.clone(),
            source,
        })?
        .st_uid;
    let agent = geteuid().as_raw();
    let Some(user) = user else {
        // Jobs run as the agent's own user: only its own directory.
        if owner != agent {
            return Err(CheckpointDirError::Unsafe {
                path,
                why: format!("was made by uid {owner}, not by this agent (uid {agent})"),
            });
        }
        return Ok(());
    };
    if owner == user.uid && !made {
        return Ok(());
    }
    // A directory this agent made now (empty, and the agent's: NFS root
    // squash makes it nobody's), or made for an earlier attempt before it
    // could hand it over, is the agent's to give. One that someone else made
    // first (a user expecting another's job id), or swapped in for the one
    // just made, is not.
    let made_here =
        made && (owner == agent || owner == SQUASHED_UID) && is_empty(&dir).unwrap_or(false);
    let earlier_attempts = !made && owner == agent;
    if !made_here && !earlier_attempts {
        return Err(CheckpointDirError::Unsafe {
            path,
            why: format!(
                "was made by uid {owner} (or changed since the agent made it), neither the job's user {} (uid {}) nor this agent",
                user.user, user.uid
            ),
        });
    }
    if let Err(e) = fchown(
        &dir,
        Some(Uid::from_raw(user.uid)),
        Some(Gid::from_raw(user.gid)),
    ) {
        // Root squash on NFS: root is nobody there and cannot give it away.
        tracing::warn!(
            "cannot give the checkpoint directory {path} to {} (uid {}): {e}; the job may not be able to write its checkpoints (with NFS root squash, let users write to the checkpoint root)",
            user.user,
            user.uid
        );
    }
    Ok(())
}

/// Opens `name` under `root_dir` as a directory, refusing a link.
fn open_no_follow(
    root_dir: &OwnedFd,
    name: &str,
    path: &str,
) -> Result<OwnedFd, CheckpointDirError> {
    // O_NONBLOCK: a named pipe planted there fails as "not a directory"
    // instead of waiting for a writer.
    let flags = OFlag::O_DIRECTORY
        | OFlag::O_NOFOLLOW
        | OFlag::O_RDONLY
        | OFlag::O_CLOEXEC
        | OFlag::O_NONBLOCK;
    openat(root_dir, name, flags, Mode::empty()).map_err(|source| match source {
        // Linux answers ENOTDIR for a link when O_DIRECTORY is given too.
        Errno::ELOOP | Errno::ENOTDIR => {
            let link = fstatat(root_dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| {
                SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK
            });
            CheckpointDirError::Unsafe {
                path: path.to_string(),
                why: if link {
                    "is a symbolic link, which the agent does not follow".into()
                } else {
                    "is not a directory".into()
                },
            }
        }
        source => CheckpointDirError::Make {
            path: path.to_string(),
            source,
        },
    })
}
