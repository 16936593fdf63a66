//! A disk stall without FUSE or device-mapper: the process is moved into a
//! cgroup whose block-I/O throttle lets it write a few bytes a second to the
//! disk under its data directory (cgroup v1 `blkio.throttle.write_bps_device`,
//! or v2 `io.max`). Reads and the network are untouched; every `fsync` of its
//! write-ahead log then waits, as on a failing or saturated disk
//! ([`TRICKLE_BYTES_PER_S`]: seconds), or on a slow one ([`SLOW_BYTES_PER_S`]:
//! most syncs take 0.4-0.8 s). Healing moves the process back and removes
//! the cgroup.
//!
//! Needs root, a cgroup hierarchy with the blkio (v1) or io (v2) controller,
//! and a data directory on a block device (not tmpfs or overlay); the error
//! says which is missing.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Bytes per second the stalled process may still write: low enough that a
/// log append's fsync takes far longer than any election timeout.
pub const TRICKLE_BYTES_PER_S: u64 = 1024;

/// Bytes per second a slow disk writes: a sync of the few pages a commit
/// touches takes 0.4-0.8 s (measured on ext4), longer than the followers'
/// lease and shorter than the core-hold limit.
pub const SLOW_BYTES_PER_S: u64 = 20 * 1024;

/// A process whose disk writes are throttled until [`Stall::heal`].
pub struct Stall {
    group: PathBuf,
    /// The cgroup it was in, to go back to.
    home: PathBuf,
    pid: i32,
}

/// Throttles `pid`'s writes to the disk that holds `data_dir` to
/// `bytes_per_s`.
pub fn begin(pid: i32, data_dir: &Path, bytes_per_s: u64) -> anyhow::Result<Stall> {
    let device = disk_of(data_dir)?;
    let (root, hierarchy, limit_file, limit) = if Path::new("/sys/fs/cgroup/blkio").is_dir() {
        (
            PathBuf::from("/sys/fs/cgroup/blkio"),
            Hierarchy::V1("blkio"),
            "blkio.throttle.write_bps_device",
            format!("{device} {bytes_per_s}"),
        )
    } else if std::fs::read_to_string("/sys/fs/cgroup/cgroup.subtree_control")
        .is_ok_and(|c| c.split_whitespace().any(|x| x == "io"))
    {
        (
            PathBuf::from("/sys/fs/cgroup"),
            Hierarchy::V2,
            "io.max",
            format!("{device} wbps={bytes_per_s}"),
        )
    } else {
        bail!(
            "no cgroup hierarchy to throttle a disk with: mount the blkio controller (cgroup v1), \
             or enable io for child cgroups (cgroup v2: echo +io > /sys/fs/cgroup/cgroup.subtree_control)"
        );
    };
    let home = root.join(current_cgroup(pid, hierarchy)?);
    let group = root.join(format!("corral-chaos-stall-{pid}"));
    std::fs::create_dir_all(&group)
        .with_context(|| format!("creating the cgroup {} (needs root)", group.display()))?;
    let stall = Stall { group, home, pid };
    let limit_path = stall.group.join(limit_file);
    let throttled = std::fs::write(&limit_path, &limit)
        .with_context(|| format!("writing {limit} to {}", limit_path.display()))
        .and_then(|()| {
            std::fs::write(stall.group.join("cgroup.procs"), pid.to_string())
                .with_context(|| format!("moving pid {pid} into {}", stall.group.display()))
        });
    match throttled {
        Ok(()) => Ok(stall),
        Err(e) => {
            // Leave nothing behind.
            let _ = stall.heal();
            Err(e)
        }
    }
}

/// Which cgroup hierarchy a process's membership is read from.
#[derive(Debug, Clone, Copy)]
enum Hierarchy {
    /// A v1 hierarchy with this controller.
    V1(&'static str),
    /// The unified hierarchy.
    V2,
}

/// The cgroup `pid` is in, relative to the hierarchy's root (from
/// `/proc/PID/cgroup`).
fn current_cgroup(pid: i32, hierarchy: Hierarchy) -> anyhow::Result<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .with_context(|| format!("reading the cgroups of pid {pid}"))?;
    let path = text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let ours = match hierarchy {
            Hierarchy::V1(controller) => controllers.split(',').any(|c| c == controller),
            Hierarchy::V2 => id == "0" && controllers.is_empty(),
        };
        ours.then(|| path.trim_start_matches('/').to_string())
    });
    path.map(PathBuf::from)
        .with_context(|| format!("pid {pid} is in no {hierarchy:?} cgroup"))
}

impl Stall {
    /// Lets the process write again: back to its own cgroup, and the
    /// throttled one removed.
    pub fn heal(self) -> anyhow::Result<()> {
        // The process may have died meanwhile; the cgroup goes either way.
        let moved = std::fs::write(self.home.join("cgroup.procs"), self.pid.to_string());
        std::fs::remove_dir(&self.group)
            .with_context(|| format!("removing the cgroup {}", self.group.display()))?;
        if let Err(e) = moved
            && std::path::Path::new(&format!("/proc/{}", self.pid)).exists()
        {
            bail!(
                "moving pid {} back to {}: {e}",
                self.pid,
                self.home.display()
            );
        }
        Ok(())
    }
}

/// `MAJOR:MINOR` of the whole disk that holds `path` (a partition's disk).
fn disk_of(path: &Path) -> anyhow::Result<String> {
    let dev = std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .dev();
    let (major, minor) = split_dev(dev);
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if !sys.exists() {
        bail!(
            "{} is not on a block device ({major}:{minor}: tmpfs or overlay?): its disk cannot be throttled",
            path.display()
        );
    }
    if sys.join("partition").exists() {
        let parent = std::fs::read_to_string(sys.join("../dev"))
            .with_context(|| format!("finding the disk of partition {major}:{minor}"))?;
        return Ok(parent.trim().to_string());
    }
    Ok(format!("{major}:{minor}"))
}

/// Linux's `dev_t` as major and minor numbers (glibc's encoding: the major's
/// low 12 bits at 8..20 and high bits at 44..64, the minor's low 8 bits at
/// 0..8 and high bits at 20..44).
fn split_dev(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000);
    let minor = (dev & 0xff) | ((dev >> 12) & 0xffff_ff00);
    (major, minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// glibc's `makedev`.
    fn makedev(major: u64, minor: u64) -> u64 {
        ((major & 0xfff) << 8)
            | ((major & 0xffff_f000) << 32)
            | (minor & 0xff)
            | ((minor & 0xffff_ff00) << 12)
    }

    #[test]
    fn device_numbers_split_as_glibc_does() {
        assert_eq!(split_dev(0xfe00), (254, 0));
        assert_eq!(split_dev(0x0811), (8, 17));
        for (major, minor) in [(259, 65537), (4096, 3), (0x0fff_ffff, 0xffff_ffff), (1, 0)] {
            let (major, minor) = (major & 0xffff_ffff, minor & 0xffff_ffff);
            assert_eq!(split_dev(makedev(major, minor)), (major, minor));
        }
    }
}
