//! Waiting for an ending attempt's processes to be gone: its batch script
//! reaped, its process groups (the script's and the steps' tasks') empty, no
//! task still starting, no escaped process left (none with its environment
//! markers, none in its cgroup); then its cgroup is removed. From the attempt's SIGKILL
//! time on, whatever is left is SIGKILLed at every look (escaped processes may
//! fork more). Processes still there the unkillable timeout after that (stuck
//! in the kernel, say, on a dead file system) are given up on, as Slurm does
//! after UnkillableStepTimeout: the leader drains the node, naming the job and
//! the pids, and fails the attempt over; the agent goes on trying to kill them.

use std::time::Duration;

use corral_proto::agent::AgentReport;
use corral_state::slurm::signal::Signal;
use nix::sys::signal::{Signal as NixSignal, killpg};
use nix::unistd::Pid;
use tokio::time::Instant;

use super::attempt::{AttemptKey, Phase};
use super::{Supervisor, send_pid};
use crate::job::process::process_group_alive;

/// Between two looks at processes that survived the unkillable timeout.
const LINGERING_EVERY: Duration = Duration::from_secs(5);

/// Longest one look for escaped processes may take before it counts as
/// "some may be left" (reading a process stuck in the kernel hangs).
const ESCAPED_LOOK_LIMIT: Duration = Duration::from_secs(5);

impl Supervisor {
    /// Waits, on a task of its own, until attempt `key` (ending) has nothing
    /// left here, then reports its end.
    pub(super) fn tear_down(&self, key: AttemptKey) {
        let this = self.clone();
        tokio::spawn(async move { this.wait_until_gone(key).await });
    }

    async fn wait_until_gone(&self, key: AttemptKey) {
        let mut pause = Duration::from_millis(2);
        loop {
            let (kill_at, groups, settled, launching) = {
                let attempts = self.table();
                let Some(attempt) = attempts.get(&key) else {
                    return;
                };
                let Phase::Ending { kill_at, .. } = attempt.phase else {
                    return;
                };
                (
                    kill_at,
                    attempt.groups(),
                    attempt.gone(false, false),
                    attempt.launch_pending,
                )
            };
            let live: Vec<i32> = groups
                .into_iter()
                .filter(|g| process_group_alive(*g))
                .collect();
            // Looking for escaped processes reads every process's environment:
            // only once the groups are gone (a SIGKILL of a live group comes
            // first anyway), and off the runtime.
            let escaped = if live.is_empty() {
                self.find_escaped(key).await
            } else {
                Some(Vec::new())
            };
            let clear = escaped.as_ref().is_some_and(Vec::is_empty);
            if settled && live.is_empty() && clear {
                if let Some(cgroup) = self.attempt_cgroup(key) {
                    let _ = cgroup.remove();
                }
                self.finish(key);
                return;
            }
            let now = Instant::now();
            if now >= kill_at {
                // The whole cgroup at once: what its processes fork while
                // they are killed one by one is in it too.
                if let Some(cgroup) = self.attempt_cgroup(key)
                    && let Err(e) = cgroup.kill()
                {
                    tracing::debug!(job = %key.0, attempt = key.1, "cannot kill the attempt's cgroup: {e}");
                }
                for group in &live {
                    let _ = killpg(Pid::from_raw(*group), NixSignal::SIGKILL);
                }
                for pid in escaped.iter().flatten() {
                    send_pid(*pid, Signal::KILL);
                }
            }
            // Processes that outlive SIGKILL, or a start that never returns
            // (a hung file system), are given up on alike.
            if now >= kill_at + self.settings.unkillable_timeout
                && (!live.is_empty() || !clear || launching)
            {
                let escaped = escaped.unwrap_or_default();
                self.give_up(key, &live, &escaped);
                return;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// The processes of attempt `key` that escaped its groups, found on a
    /// blocking thread; `None` when the look did not end in time.
    async fn find_escaped(&self, key: AttemptKey) -> Option<Vec<i32>> {
        let find = self.escaped_finder(key, true)?;
        tokio::time::timeout(ESCAPED_LOOK_LIMIT, tokio::task::spawn_blocking(find))
            .await
            .ok()?
            .ok()
    }

    /// The attempt's processes outlived the unkillable timeout: report them
    /// (the leader drains the node and fails the attempt over) and keep
    /// trying to kill them in the background.
    fn give_up(&self, key: AttemptKey, groups: &[i32], escaped: &[i32]) {
        let mut pids: Vec<i32> = groups
            .iter()
            .flat_map(|g| crate::job::process::group_members(*g))
            .chain(escaped.iter().copied())
            .collect();
        pids.sort_unstable();
        pids.dedup();
        let timeout = self.settings.unkillable_timeout;
        tracing::error!(
            job = %key.0,
            attempt = key.1,
            ?pids,
            "processes survived SIGKILL for {} s (unkillable): draining the node and giving the attempt up",
            timeout.as_secs()
        );
        let report = AgentReport::Unkillable {
            job: key.0,
            attempt: key.1,
            pids: pids.clone(),
            after_s: timeout.as_secs(),
        };
        {
            let mut attempts = self.table();
            // Only an attempt still ending: another look may have found it
            // gone and reported it meanwhile.
            let Some(attempt) = attempts
                .get_mut(&key)
                .filter(|a| matches!(a.phase, Phase::Ending { .. }))
            else {
                return;
            };
            let id = self.outbox.push(report.clone());
            attempt.ended(id);
        }
        if let Err(e) = self.journal.ended(key, &self.settings.agent_id, &report) {
            tracing::warn!(job = %key.0, attempt = key.1, "cannot record the attempt's end: {e}");
        }
        // Looked for again by their environment each time, never by the pids
        // and groups seen now: those may be reused by unrelated processes.
        // Not on the GPUs: the end is reported, and the node (drained for
        // these processes) may be resumed and its GPUs given to another
        // attempt of the same user, whose processes are not these.
        let Some(find) = self.escaped_finder(key, false) else {
            return;
        };
        let find = std::sync::Arc::new(find);
        let cgroup = self.attempt_cgroup(key);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(LINGERING_EVERY).await;
                let look = std::sync::Arc::clone(&find);
                let Ok(left) = tokio::task::spawn_blocking(move || look()).await else {
                    return;
                };
                if left.is_empty() {
                    if let Some(cgroup) = &cgroup {
                        let _ = cgroup.remove();
                    }
                    tracing::info!(job = %key.0, attempt = key.1, "the unkillable processes are gone at last; resume the node when it is healthy");
                    return;
                }
                for pid in &left {
                    send_pid(*pid, Signal::KILL);
                }
            }
        });
    }
}
