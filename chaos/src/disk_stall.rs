//! A disk stall without FUSE or device-mapper: the process is moved into a
//! cgroup whose block-I/O throttle lets it write a few bytes a second to the
//! disk under its data directory (cgroup v1 `blkio.throttle.write_bps_device`,
//! or v2 `io.max`). Reads and the network are untouched; every `fsync` of its
//! write-ahead log then waits, as on a failing or saturated disk. Healing
//! moves the process back and removes the cgroup.
//!
//! Needs root, a cgroup hierarchy with the blkio (v1) or io (v2) controller,
//! and a data directory on a block device (not tmpfs or overlay); the error
//! says which is missing.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Bytes per second the stalled process may still write: low enough that a
/// log append's fsync takes far longer than any election timeout.
const TRICKLE_BYTES_PER_S: u64 = 1024;

/// A process whose disk writes are throttled until [`Stall::heal`].
pub struct Stall {
    group: PathBuf,
    root: PathBuf,
    pid: i32,
}

/// Throttles `pid`'s writes to the disk that holds `data_dir`.
pub fn begin(pid: i32, data_dir: &Path) -> anyhow::Result<Stall> {
    let device = disk_of(data_dir)?;
    let (root, limit_file, limit) = if Path::new("/sys/fs/cgroup/blkio").is_dir() {
        (
            PathBuf::from("/sys/fs/cgroup/blkio"),
            "blkio.throttle.write_bps_device",
            format!("{device} {TRICKLE_BYTES_PER_S}"),
        )
    } else if std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
        .is_ok_and(|c| c.split_whitespace().any(|x| x == "io"))
    {
        (
            PathBuf::from("/sys/fs/cgroup"),
            "io.max",
            format!("{device} wbps={TRICKLE_BYTES_PER_S}"),
        )
    } else {
        bail!("no cgroup hierarchy with the blkio (v1) or io (v2) controller to throttle a disk");
    };
    let group = root.join(format!("corral-chaos-stall-{pid}"));
    std::fs::create_dir_all(&group)
        .with_context(|| format!("creating the cgroup {} (needs root)", group.display()))?;
    let stall = Stall { group, root, pid };
    let limit_path = stall.group.join(limit_file);
    std::fs::write(&limit_path, &limit)
        .with_context(|| format!("writing {limit} to {}", limit_path.display()))?;
    std::fs::write(stall.group.join("cgroup.procs"), pid.to_string())
        .with_context(|| format!("moving pid {pid} into {}", stall.group.display()))?;
    Ok(stall)
}

impl Stall {
    /// Lets the process write again.
    pub fn heal(self) -> anyhow::Result<()> {
        // The process may have died meanwhile; the cgroup goes either way.
        let moved = std::fs::write(self.root.join("cgroup.procs"), self.pid.to_string());
        std::fs::remove_dir(&self.group)
            .with_context(|| format!("removing the cgroup {}", self.group.display()))?;
        if let Err(e) = moved
            && std::path::Path::new(&format!("/proc/{}", self.pid)).exists()
        {
            bail!("moving pid {} back: {e}", self.pid);
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

/// Linux's `dev_t` as major and minor numbers (glibc's encoding).
fn split_dev(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major, minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_split_as_glibc_does() {
        // makedev(254, 0), makedev(8, 17), makedev(259, 65537).
        assert_eq!(split_dev(0xfe00), (254, 0));
        assert_eq!(split_dev(0x0811), (8, 17));
        let big = (259u64 << 8) | ((65537u64 & 0xff) | ((65537u64 & !0xff) << 12));
        assert_eq!(split_dev(big), (259, 65537));
    }
}
