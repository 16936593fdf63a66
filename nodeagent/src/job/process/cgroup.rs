//! Attempt cgroups (cgroup v2): every process of an attempt on this node, the
//! batch script and every step task with all they start, lives in a cgroup of
//! the attempt's own, so ending the attempt ends them all: a process that
//! calls `setsid` and clears its environment leaves the process groups and
//! the environment markers ([`super::escaped`]) behind, never its cgroup (only
//! root may move a process out). `cgroup.kill` kills the whole cgroup at once
//! (Linux 5.14; older kernels get a SIGKILL per listed process), and an
//! attempt's processes are gone when the cgroup is no longer populated.
//!
//! Layout: `MOUNT/AGENT_CGROUP/corral-AGENT_ID/job-JOB.ATTEMPT`, below the
//! agent's own cgroup (under systemd, its service's, with `Delegate=yes`) and
//! named by the agent that made it, so a restarted agent kills an earlier
//! agent's whole subtree at once. No controller is enabled: the groups contain
//! and kill, they do not limit.
//!
//! A process is put in its attempt's cgroup by the agent right after the
//! spawn; the `task-exec` wrapper it starts through does not exec the job's
//! program before it sees itself there, so no job code runs outside.

use std::io::{self, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The agent's subtree of cgroups.
#[derive(Debug, Clone)]
pub struct Cgroups {
    /// The subtree's directory.
    dir: PathBuf,
    /// Its path as `/proc/PID/cgroup` names it.
    name: String,
    /// False once a move into one of its cgroups failed: processes are then
    /// no longer made to wait for one (see [`AttemptCgroup::waits`]).
    moves: Arc<AtomicBool>,
}

impl PartialEq for Cgroups {
    fn eq(&self, other: &Self) -> bool {
        self.dir == other.dir
    }
}

impl Eq for Cgroups {}

/// One attempt's cgroup.
#[derive(Debug, Clone)]
pub struct AttemptCgroup {
    dir: PathBuf,
    name: String,
    moves: Arc<AtomicBool>,
}

impl PartialEq for AttemptCgroup {
    fn eq(&self, other: &Self) -> bool {
        self.dir == other.dir
    }
}

impl Eq for AttemptCgroup {}

/// Writes `text` to the cgroup file `path`, which must exist (kernfs answers
/// a create of a file it lacks with EACCES, hiding the ENOENT that says an
/// older kernel has no `cgroup.kill`).
fn write_control(path: &Path, text: &str) -> io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// The cgroup v2 hierarchy this process sees: where it is mounted and this
/// process's own cgroup in it. `None` without cgroup v2.
pub fn own_cgroup() -> Option<(PathBuf, String)> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = cgroup2_mount(&mountinfo)?;
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    Some((mount, unified_path(&cgroup)?))
}

/// The mount point of the first cgroup2 file system in `mountinfo`, when its
/// root is the hierarchy's root.
fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (fields, after) = line.split_once(" - ")?;
        if after.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let mut fields = fields.split_whitespace();
        let root = fields.nth(3)?;
        let mount = fields.next()?;
        (root == "/").then(|| PathBuf::from(unescape_mount(mount)))
    })
}

/// `/proc/self/mountinfo` writes spaces and a few others as octal escapes.
fn unescape_mount(text: &str) -> String {
    text.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// The `0::PATH` line of a `/proc/PID/cgroup`.
fn unified_path(cgroup: &str) -> Option<String> {
    cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::to_string)
}

/// `text` as one cgroup name (no `/`, no whitespace).
fn name_part(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Cgroups {
    /// Makes (or finds) agent `agent_id`'s subtree below this process's own
    /// cgroup. `Ok(None)` without cgroup v2; an error where it is there but
    /// the agent may not make cgroups in it.
    pub fn open(agent_id: &str) -> io::Result<Option<Cgroups>> {
        let Some((mount, own)) = own_cgroup() else {
            return Ok(None);
        };
        Self::open_below(&mount, &own, agent_id).map(Some)
    }

    /// Agent `agent_id`'s subtree below this process's own cgroup, if the
    /// node has cgroup v2 and the subtree is there (the fencing watchdog,
    /// started by the agent in its cgroup, finds the agent's this way).
    pub fn existing(agent_id: &str) -> Option<Cgroups> {
        let (mount, own) = own_cgroup()?;
        let cgroups = Self::of_agent(&mount, &own, agent_id);
        cgroups.dir.is_dir().then_some(cgroups)
    }

    /// The attempt cgroups in the subtree now.
    pub fn attempts(&self) -> Vec<AttemptCgroup> {
        let Ok(children) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        children
            .flatten()
            .filter(|c| c.path().is_dir())
            .filter_map(|c| {
                let leaf = c.file_name().into_string().ok()?;
                Some(AttemptCgroup {
                    dir: c.path(),
                    name: format!("{}/{leaf}", self.name),
                    moves: Arc::clone(&self.moves),
                })
            })
            .collect()
    }

    /// Makes (or finds) agent `agent_id`'s subtree below cgroup `parent` of
    /// the hierarchy mounted at `mount`.
    pub fn open_below(mount: &Path, parent: &str, agent_id: &str) -> io::Result<Cgroups> {
        let cgroups = Self::of_agent(mount, parent, agent_id);
        make_dir(&cgroups.dir)?;
        Ok(cgroups)
    }

    /// Agent `agent_id`'s subtree (made or not).
    pub fn of_agent(mount: &Path, parent: &str, agent_id: &str) -> Cgroups {
        let parent = parent.trim_end_matches('/');
        let name = format!("{parent}/corral-{}", name_part(agent_id));
        Cgroups {
            dir: mount.join(name.trim_start_matches('/')),
            name,
            moves: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Another agent's subtree beside this one (an earlier agent of this node).
    pub fn sibling(&self, agent_id: &str) -> Cgroups {
        let parent = self.name.rsplit_once('/').map_or("", |(parent, _)| parent);
        let mount = mount_of(&self.dir, &self.name);
        Self::of_agent(&mount, parent, agent_id)
    }

    /// The subtree's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes the empty subtrees earlier agents of node `node` left beside
    /// this one (an agent that was killed leaves its subtree). A cgroup with
    /// a process in it cannot be removed, so what still runs stays.
    pub fn remove_stale_siblings(&self, node: &str) -> usize {
        let Some(parent) = self.dir.parent() else {
            return 0;
        };
        let prefix = format!("corral-{}:", name_part(node));
        let own = self.dir.file_name();
        let Ok(entries) = std::fs::read_dir(parent) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            if Some(name.as_os_str()) == own || !name.to_string_lossy().starts_with(&prefix) {
                continue;
            }
            if let Ok(children) = std::fs::read_dir(entry.path()) {
                for child in children.flatten().filter(|c| c.path().is_dir()) {
                    let _ = std::fs::remove_dir(child.path());
                }
            }
            if std::fs::remove_dir(entry.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }

    /// The cgroup of attempt `attempt` of job `job` (made by [`AttemptCgroup::make`]).
    pub fn attempt(&self, job: u64, attempt: u32) -> AttemptCgroup {
        let leaf = format!("job-{job}.{attempt}");
        AttemptCgroup {
            dir: self.dir.join(&leaf),
            name: format!("{}/{leaf}", self.name),
            moves: Arc::clone(&self.moves),
        }
    }

    /// Kills everything in the subtree and waits up to `patience` for it to
    /// empty; then removes its cgroups. Returns the processes still there.
    pub fn kill_all(&self, patience: Duration) -> Vec<i32> {
        let whole = AttemptCgroup {
            dir: self.dir.clone(),
            name: self.name.clone(),
            moves: Arc::clone(&self.moves),
        };
        if !whole.dir.exists() {
            return Vec::new();
        }
        let _ = whole.kill();
        let deadline = Instant::now() + patience;
        let mut pause = Duration::from_millis(2);
        while whole.populated() && Instant::now() < deadline {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(100));
            let _ = whole.kill();
        }
        let left = whole.pids_below();
        if left.is_empty() {
            if let Ok(children) = std::fs::read_dir(&self.dir) {
                for child in children.flatten().filter(|c| c.path().is_dir()) {
                    let _ = std::fs::remove_dir(child.path());
                }
            }
            let _ = std::fs::remove_dir(&self.dir);
        }
        left
    }
}

/// The mount point of a cgroup whose directory is `dir` and name `name`.
fn mount_of(dir: &Path, name: &str) -> PathBuf {
    let depth = name
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .count();
    let mut mount = dir.to_path_buf();
    for _ in 0..depth {
        mount.pop();
    }
    mount
}

fn make_dir(dir: &Path) -> io::Result<()> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() != ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

impl AttemptCgroup {
    /// Makes the cgroup, and the agent's subtree if it went (finding it is
    /// fine: an attempt's tasks share it).
    pub fn make(&self) -> io::Result<()> {
        std::fs::create_dir_all(&self.dir)
    }

    /// Its path as `/proc/PID/cgroup` names it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it is there (made and not removed).
    pub fn dir_exists(&self) -> bool {
        self.dir.is_dir()
    }

    /// Moves process `pid` (and, from then on, all it starts) into the cgroup.
    /// A failure also stops later processes from waiting to be moved.
    pub fn add(&self, pid: u32) -> io::Result<()> {
        let moved = write_control(&self.dir.join("cgroup.procs"), &format!("{pid}\n"));
        if moved.is_err() {
            self.moves.store(false, Ordering::Relaxed);
        }
        moved
    }

    /// Whether a process about to start should wait to be moved in (the
    /// `task-exec` wrapper's `--cgroup`): not once a move has failed here, so
    /// a node where moves fail does not delay every start.
    pub fn waits(&self) -> bool {
        self.moves.load(Ordering::Relaxed)
    }

    /// SIGKILLs every process in the cgroup and below.
    pub fn kill(&self) -> io::Result<()> {
        match write_control(&self.dir.join("cgroup.kill"), "1") {
            Err(e) if e.kind() == ErrorKind::NotFound && self.dir.exists() => {
                // Before Linux 5.14: one by one.
                for pid in self.pids_below() {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    /// Whether any process is in the cgroup or below (`false` once removed).
    pub fn populated(&self) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.events"))
            .is_ok_and(|events| events.lines().any(|l| l.trim() == "populated 1"))
    }

    /// The processes in the cgroup and below.
    pub fn pids_below(&self) -> Vec<i32> {
        let mut pids = Vec::new();
        let mut dirs = vec![self.dir.clone()];
        while let Some(dir) = dirs.pop() {
            if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
                pids.extend(procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
            }
            if let Ok(children) = std::fs::read_dir(&dir) {
                dirs.extend(children.flatten().map(|c| c.path()).filter(|p| p.is_dir()));
            }
        }
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Removes the cgroup once empty (gone already is fine).
    pub fn remove(&self) -> io::Result<()> {
        match std::fs::remove_dir(&self.dir) {
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

/// In the `task-exec` wrapper: waits until this process is in cgroup `name`
/// (the agent moves it right after the spawn), for at most `patience`.
/// Whether it is.
pub fn wait_until_in(name: &str, patience: Duration) -> bool {
    let deadline = Instant::now() + patience;
    loop {
        let here = std::fs::read_to_string("/proc/self/cgroup")
            .ok()
            .and_then(|c| unified_path(&c));
        if here.as_deref() == Some(name) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_and_the_own_cgroup_are_read_as_the_kernel_writes_them() {
        let hybrid = "25 21 0:22 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu\n\
                      33 21 0:30 / /sys/fs/cgroup/unified rw,relatime shared:17 - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup2_mount(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let bind = "40 21 0:30 /some/where /mnt/cg rw - cgroup2 cgroup2 rw\n";
        assert_eq!(cgroup2_mount(bind), None);
        assert_eq!(
            unified_path("4:memory:/x\n0::/system.slice/corral-agent.service\n"),
            Some("/system.slice/corral-agent.service".to_string())
        );
        assert_eq!(unified_path("4:memory:/x\n"), None);
    }

    #[test]
    fn an_agents_subtree_and_its_attempts_are_named_below_its_own_cgroup() {
        let mount = Path::new("/sys/fs/cgroup");
        let tree = Cgroups::of_agent(
            mount,
            "/system.slice/corral-agent.service",
            "gpu01:boot 7/x",
        );
        assert_eq!(
            tree.dir(),
            Path::new("/sys/fs/cgroup/system.slice/corral-agent.service/corral-gpu01:boot_7_x")
        );
        let attempt = tree.attempt(42, 3);
        assert_eq!(
            attempt.name(),
            "/system.slice/corral-agent.service/corral-gpu01:boot_7_x/job-42.3"
        );
        let earlier = tree.sibling("gpu01:boot 6");
        assert_eq!(
            earlier.dir(),
            Path::new("/sys/fs/cgroup/system.slice/corral-agent.service/corral-gpu01:boot_6")
        );
        let at_root = Cgroups::of_agent(mount, "/", "n1");
        assert_eq!(at_root.dir(), Path::new("/sys/fs/cgroup/corral-n1"));
        assert_eq!(at_root.attempt(1, 1).name(), "/corral-n1/job-1.1");
        assert_eq!(
            at_root.sibling("n0").dir(),
            Path::new("/sys/fs/cgroup/corral-n0")
        );
    }

    #[test]
    fn only_the_empty_subtrees_of_earlier_agents_of_the_same_node_are_removed() {
        // Plain directories stand for cgroups: a file in one stands for a
        // process (the kernel refuses to remove a populated cgroup, as a
        // directory with a file cannot be).
        let mount = tempfile::tempdir().expect("tempdir");
        let own = Cgroups::open_below(mount.path(), "/", "n1:now").expect("own");
        let stale = Cgroups::open_below(mount.path(), "/", "n1:before").expect("stale");
        stale.attempt(1, 1).make().expect("attempt");
        let busy = Cgroups::open_below(mount.path(), "/", "n1:busy").expect("busy");
        std::fs::write(busy.dir().join("cgroup.procs"), "42\n").expect("procs");
        let other = Cgroups::open_below(mount.path(), "/", "n10:x").expect("other");
        assert_eq!(own.remove_stale_siblings("n1"), 1);
        assert!(!stale.dir().exists());
        assert!(busy.dir().exists() && own.dir().exists() && other.dir().exists());
        // An attempt of an agent whose subtree went is made again.
        stale.attempt(2, 1).make().expect("made again");
    }
}
