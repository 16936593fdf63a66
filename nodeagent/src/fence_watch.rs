//! The fencing watchdog: a small process the agent starts beside itself (the
//! same program, `corral-agent fence-watch AGENT_ID`), in a session of its
//! own so that it outlives the agent. The agent feeds it the end of its lease
//! after every renewal, through a pipe; when the pipe closes (the agent
//! exited, crashed or was SIGKILLed), the watchdog waits until that lease
//! runs out and then kills every process the agent started (found by its
//! `CORRAL_AGENT_ID`, and in its attempts' cgroups where the node has them). So a node whose agent died and never returns runs
//! nothing beyond the lease, exactly as a partitioned agent fences itself,
//! before the leader declares the node down and runs the jobs elsewhere. An
//! agent that is still there but renews nothing (stopped, deadlocked, stuck in
//! the kernel) is fenced the same way: its jobs are killed [`HUNG_GRACE`]
//! after the lease it last renewed ran out. An agent that comes back kills its
//! predecessors' processes itself, at once ([`crate::recovery`]).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::time::{ClockId, clock_gettime};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;

use crate::job::process::{AttemptCgroup, Cgroups, agent_processes};
use crate::lease::Lease;

/// The agent's hidden subcommand that runs the watchdog.
pub const SUBCOMMAND: &str = "fence-watch";

/// How long the watchdog goes on killing what is left of the agent's jobs.
const KILL_PATIENCE: Duration = Duration::from_secs(60);

/// How long past its lease end an agent that is still there but renews
/// nothing is given before the watchdog kills its jobs itself: a live agent
/// fences at the lease end, and the leader requeues the jobs at lease end plus
/// its down margin (5 s), by when they must be dead.
pub const HUNG_GRACE: Duration = Duration::from_secs(1);

/// How often the watchdog looks at the lease.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// Now on the system-wide monotonic clock, ns (shared by the agent and the
/// watchdog: it does not jump with the wall clock).
fn monotonic_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        u64::try_from(t.tv_sec())
            .unwrap_or(0)
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::try_from(t.tv_nsec()).unwrap_or(0))
    })
}

/// In the agent: starts the watchdog for the processes of `agent_id` and feeds
/// it the end of `lease` (0: no lease held) whenever it changes.
pub fn start(agent_id: &str, lease: &Lease) -> std::io::Result<()> {
    let exe = std::env::current_exe()?;
    let mut command = std::process::Command::new(exe);
    command
        .arg(SUBCOMMAND)
        .arg(agent_id)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .process_group(0);
    let mut child = tokio::process::Command::from(command).spawn()?;
    let Some(mut feed) = child.stdin.take() else {
        return Err(std::io::Error::other("the watchdog's pipe is missing"));
    };
    let mut expiry = lease.expiry();
    tokio::spawn(async move {
        loop {
            let end = expiry.borrow_and_update().map_or(0, |end| {
                let left = end.saturating_duration_since(tokio::time::Instant::now());
                monotonic_ns().saturating_add(u64::try_from(left.as_nanos()).unwrap_or(u64::MAX))
            });
            if let Err(e) = feed.write_all(&end.to_le_bytes()).await {
                tracing::error!(
                    "the fencing watchdog is gone ({e}); if this agent dies, its jobs run on until it starts again"
                );
                let _ = child.wait().await;
                return;
            }
            if expiry.changed().await.is_err() {
                return;
            }
        }
    });
    Ok(())
}

/// The watchdog process: follows the lease ends the agent writes on standard
/// input, and kills `agent_id`'s processes when the lease runs out without a
/// renewal: once the pipe closes (the agent is gone), at the last lease end;
/// while it is open (the agent lives but is hung: stopped, deadlocked,
/// swapping), [`HUNG_GRACE`] after it, and then again after every renewal
/// that lapses the same way.
pub fn run(agent_id: &str) -> ExitCode {
    let feed = Arc::new(Feed::default());
    let reader = {
        let feed = Arc::clone(&feed);
        std::thread::spawn(move || {
            let mut frame = [0u8; 8];
            let mut stdin = std::io::stdin().lock();
            while stdin.read_exact(&mut frame).is_ok() {
                feed.last.store(u64::from_le_bytes(frame), Ordering::SeqCst);
            }
            feed.closed.store(true, Ordering::SeqCst);
        })
    };
    // The lease end this watchdog already fenced for, so one lapse kills once.
    let mut fenced_for = 0u64;
    loop {
        if feed.closed.load(Ordering::SeqCst) {
            break;
        }
        let last = feed.last.load(Ordering::SeqCst);
        let hung_since = u64::try_from(HUNG_GRACE.as_nanos()).unwrap_or(u64::MAX);
        if last != 0 && last != fenced_for && monotonic_ns() > last.saturating_add(hung_since) {
            fenced_for = last;
            eprintln!(
                "corral-agent fence-watch: agent {agent_id} runs but has not renewed its lease, \
                 which ran out {} ms ago (hung?): killing the processes of its jobs",
                (monotonic_ns() - last) / 1_000_000
            );
            kill_all(agent_id);
        }
        std::thread::sleep(LOOK_EVERY);
    }
    let _ = reader.join();
    let last = feed.last.load(Ordering::SeqCst);
    let now = monotonic_ns();
    if last > now {
        std::thread::sleep(Duration::from_nanos(last - now));
    }
    if agent_processes(agent_id).is_empty() {
        return ExitCode::SUCCESS;
    }
    eprintln!(
        "corral-agent fence-watch: agent {agent_id} is gone and its lease ran out: killing the processes of its jobs"
    );
    kill_all(agent_id)
}

/// What the reader thread has seen of the agent's pipe.
#[derive(Default)]
struct Feed {
    /// The last lease end written (monotonic ns; 0: no lease held).
    last: AtomicU64,
    /// The pipe closed: the agent is gone.
    closed: AtomicBool,
}

/// SIGKILLs `agent_id`'s processes of now until none is left, for up to
/// [`KILL_PATIENCE`]. Only those: an agent that recovers meanwhile may start
/// new jobs under a new lease.
fn kill_all(agent_id: &str) -> ExitCode {
    let deadline = std::time::Instant::now() + KILL_PATIENCE;
    // The attempts' cgroups of now, whole (a process that cleared its
    // environment is there too); not the agent's subtree, where an agent that
    // recovers may start new attempts.
    let cgroups: Vec<AttemptCgroup> = Cgroups::existing(agent_id)
        .map(|tree| tree.attempts())
        .unwrap_or_default();
    for cgroup in &cgroups {
        let _ = cgroup.kill();
    }
    let in_cgroups = || cgroups.iter().flat_map(AttemptCgroup::pids_below);
    let mut targets: Vec<i32> = agent_processes(agent_id).iter().map(|p| p.pid).collect();
    targets.extend(in_cgroups());
    loop {
        // Everything in the attempts' cgroups is theirs (what was forked
        // since too); of the rest, only the processes of then.
        let mut left: Vec<i32> = agent_processes(agent_id)
            .into_iter()
            .map(|process| process.pid)
            .filter(|pid| targets.contains(pid))
            .chain(in_cgroups())
            .collect();
        left.sort_unstable();
        left.dedup();
        if left.is_empty() {
            return ExitCode::SUCCESS;
        }
        if std::time::Instant::now() > deadline {
            eprintln!(
                "corral-agent fence-watch: {} processes of agent {agent_id} survived SIGKILL for {} s",
                left.len(),
                KILL_PATIENCE.as_secs()
            );
            return ExitCode::FAILURE;
        }
        for pid in left {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
