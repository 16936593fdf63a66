//! The fencing watchdog: a small process the agent starts beside itself (the
//! same program, `corral-agent fence-watch AGENT_ID`), in a session of its
//! own so that it outlives the agent. The agent feeds it the end of its lease
//! after every renewal, through a pipe; when the pipe closes (the agent
//! exited, crashed or was SIGKILLed), the watchdog waits until that lease
//! runs out and then kills every process the agent started (found by its
//! `CORRAL_AGENT_ID`). So a node whose agent died and never returns runs
//! nothing beyond the lease, exactly as a partitioned agent fences itself,
//! before the leader declares the node down and runs the jobs elsewhere. An
//! agent that comes back kills its predecessors' processes itself, at once
//! ([`crate::recovery`]).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::time::{ClockId, clock_gettime};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;

use crate::job::process::agent_processes;
use crate::lease::Lease;

/// The agent's hidden subcommand that runs the watchdog.
pub const SUBCOMMAND: &str = "fence-watch";

/// How long the watchdog goes on killing what is left of the agent's jobs.
const KILL_PATIENCE: Duration = Duration::from_secs(60);

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
/// input; once it closes, waits for the last one and kills `agent_id`'s
/// processes.
pub fn run(agent_id: &str) -> ExitCode {
    let mut last = 0u64;
    let mut frame = [0u8; 8];
    let mut stdin = std::io::stdin().lock();
    while stdin.read_exact(&mut frame).is_ok() {
        last = u64::from_le_bytes(frame);
    }
    let now = monotonic_ns();
    if last > now {
        std::thread::sleep(Duration::from_nanos(last - now));
    }
    let deadline = std::time::Instant::now() + KILL_PATIENCE;
    let mut announced = false;
    loop {
        let left = agent_processes(agent_id);
        if left.is_empty() {
            return ExitCode::SUCCESS;
        }
        if !announced {
            announced = true;
            eprintln!(
                "corral-agent fence-watch: agent {agent_id} is gone and its lease ran out: killing the {} processes of its jobs",
                left.len()
            );
        }
        if std::time::Instant::now() > deadline {
            eprintln!(
                "corral-agent fence-watch: {} processes of agent {agent_id} survived SIGKILL for {} s",
                left.len(),
                KILL_PATIENCE.as_secs()
            );
            return ExitCode::FAILURE;
        }
        for process in left {
            let _ = kill(Pid::from_raw(process.pid), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
