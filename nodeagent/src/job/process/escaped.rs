//! Processes of an attempt that left its process groups: a `setsid` in a batch
//! script, or torchrun, which starts every worker in a session of its own.
//! Process groups miss them; their environment does not, since every process
//! of a job inherits `SLURM_JOB_ID`, `CORRAL_ATTEMPT` and the `CORRAL_AGENT_ID`
//! of the agent that started it (several agents may share a machine: a local
//! cluster). The agent finds them in `/proc` so that the end of an attempt
//! ends them too.
//!
//! Only processes of the job's user are considered (a process of another user
//! that copies the variables is not the job's), zombies do not count, and a
//! process that clears its environment is not found here: on a node with
//! cgroup v2 it is found in its attempt's cgroup ([`super::cgroup`]).

use super::proc_table::{ProcessEntry, own_pid, processes};

/// The variable naming the agent (node and start) that started a process.
pub const AGENT_ID_ENV: &str = "CORRAL_AGENT_ID";

/// Live processes of user `uid` whose environment holds `SLURM_JOB_ID=job`,
/// `CORRAL_ATTEMPT=attempt` and `CORRAL_AGENT_ID=agent`, other than this process.
pub fn attempt_processes(job: u64, attempt: u32, agent: &str, uid: u32) -> Vec<i32> {
    let job_var = format!("SLURM_JOB_ID={job}");
    let attempt_var = format!("CORRAL_ATTEMPT={attempt}");
    let agent_var = format!("{AGENT_ID_ENV}={agent}");
    let me = own_pid();
    processes()
        .into_iter()
        .flatten()
        .filter(|p| p.pid != me && p.uid() == Some(uid))
        .filter(|p| {
            p.environ().is_some_and(|environ| {
                holds(&environ, &job_var)
                    && holds(&environ, &attempt_var)
                    && holds(&environ, &agent_var)
            })
        })
        .filter(ProcessEntry::is_live)
        .map(|p| p.pid)
        .collect()
}

/// Of `pids` (the processes a GPU lists), the live ones of user `uid` that
/// may be job `job`'s attempt `attempt`'s, other than this process: a job's
/// processes on its GPUs, whatever group, cgroup or environment they left.
/// Another user's, a monitoring daemon's, and one whose environment names
/// another job or attempt (the same user's other job) are never its.
pub fn live_processes_of(
    pids: impl IntoIterator<Item = u32>,
    uid: u32,
    (job, attempt): (u64, u32),
) -> Vec<i32> {
    let me = own_pid();
    let job_var = format!("SLURM_JOB_ID={job}");
    let attempt_var = format!("CORRAL_ATTEMPT={attempt}");
    let another = |environ: &[u8]| {
        environ.split(|b| *b == 0).any(|entry| {
            (entry.starts_with(b"SLURM_JOB_ID=") && entry != job_var.as_bytes())
                || (entry.starts_with(b"CORRAL_ATTEMPT=") && entry != attempt_var.as_bytes())
        })
    };
    pids.into_iter()
        .filter_map(|pid| i32::try_from(pid).ok())
        .filter(|pid| *pid != me)
        .map(ProcessEntry::of)
        .filter(|p| p.uid() == Some(uid) && p.is_live())
        .filter(|p| !p.environ().is_some_and(|environ| another(&environ)))
        .map(|p| p.pid)
        .collect()
}

/// True when this process runs in a PID namespace below the machine's
/// (`NSpid` names more than one pid): the pids NVML lists are the host's,
/// not what this process's kill would reach.
pub fn in_child_pid_namespace() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .is_some_and(|pids| pids.split_whitespace().count() > 1)
    })
}

/// A job process an earlier agent of this node started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leftover {
    /// The process.
    pub pid: i32,
    /// Its `SLURM_JOB_ID`.
    pub job: u64,
    /// Its `CORRAL_ATTEMPT`.
    pub attempt: u32,
}

/// Live processes, of any user, started by one of `agents` (their
/// `CORRAL_AGENT_ID`).
pub fn agents_processes(agents: &std::collections::BTreeSet<String>) -> Vec<Leftover> {
    processes_of_agents(|agent| agents.contains(agent))
}

/// Live job processes, of any user, started by agent `agent`.
pub fn agent_processes(agent: &str) -> Vec<Leftover> {
    processes_of_agents(|started_by| started_by == agent)
}

/// Live job processes, of any user, whose `CORRAL_AGENT_ID` `agent` accepts.
fn processes_of_agents(agent: impl Fn(&str) -> bool) -> Vec<Leftover> {
    let me = own_pid();
    let mut found = Vec::new();
    for process in processes().into_iter().flatten() {
        if process.pid == me {
            continue;
        }
        let Some(environ) = process.environ() else {
            continue;
        };
        let mut started_by = None;
        let mut job = None;
        let mut attempt = None;
        for var in environ.split(|b| *b == 0) {
            let Ok(var) = std::str::from_utf8(var) else {
                continue;
            };
            if let Some(value) = var
                .strip_prefix(AGENT_ID_ENV)
                .and_then(|v| v.strip_prefix('='))
            {
                started_by = Some(value);
            } else if let Some(value) = var.strip_prefix("SLURM_JOB_ID=") {
                job = value.parse().ok();
            } else if let Some(value) = var.strip_prefix("CORRAL_ATTEMPT=") {
                attempt = value.parse().ok();
            }
        }
        if !started_by.is_some_and(&agent) || !process.is_live() {
            continue;
        }
        if let (Some(job), Some(attempt)) = (job, attempt) {
            found.push(Leftover {
                pid: process.pid,
                job,
                attempt,
            });
        }
    }
    found
}

/// Whether the NUL-separated `environ` has the exact entry `entry`.
fn holds(environ: &[u8], entry: &str) -> bool {
    environ.split(|b| *b == 0).any(|e| e == entry.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// A `sleep` whose environment says it is a process of job `job`'s
    /// attempt `attempt`, started by `agent`.
    fn job_process(job: u64, attempt: u32, agent: &str) -> (std::process::Child, i32) {
        let child = Command::new("sleep")
            .arg("30")
            .env("SLURM_JOB_ID", job.to_string())
            .env("CORRAL_ATTEMPT", attempt.to_string())
            .env(AGENT_ID_ENV, agent)
            .stdout(Stdio::null())
            .spawn()
            .expect("sleep runs");
        let pid = i32::try_from(child.id()).expect("pid");
        (child, pid)
    }

    #[test]
    fn a_gpus_process_of_the_same_user_but_another_job_is_not_the_attempts() {
        let uid = nix::unistd::geteuid().as_raw();
        let (mut ours, our_pid) = job_process(7, 1, "n1:a");
        let (mut other_job, other_job_pid) = job_process(8, 1, "n1:a");
        let (mut other_attempt, other_attempt_pid) = job_process(7, 2, "n1:a");
        let mut bare = Command::new("sleep")
            .arg("30")
            .env_clear()
            .spawn()
            .expect("sleep runs");
        let pids = [our_pid, other_job_pid, other_attempt_pid, bare.id() as i32];
        let mut found = live_processes_of(pids.iter().map(|p| *p as u32), uid, (7, 1));
        found.sort_unstable();
        let mut expected = vec![our_pid, bare.id() as i32];
        expected.sort_unstable();
        let someone_else = live_processes_of(pids.iter().map(|p| *p as u32), uid + 1, (7, 1));
        for child in [&mut ours, &mut other_job, &mut other_attempt, &mut bare] {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert_eq!(found, expected);
        assert!(someone_else.is_empty(), "another user's uid matched");
    }

    #[test]
    fn finds_the_processes_of_the_agents_named_only() {
        let (mut child, pid) = job_process(987_654_322, 3, "leftover-node:old");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let found = |agents: &[&str]| {
            let agents = agents.iter().map(|a| a.to_string()).collect();
            agents_processes(&agents)
                .iter()
                .any(|l| l.pid == pid && l.job == 987_654_322 && l.attempt == 3)
        };
        while !found(&["leftover-node:old", "leftover-node:older"]) {
            assert!(std::time::Instant::now() < deadline, "never found {pid}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!found(&["leftover-node:new"]), "another start's");
        assert!(!found(&["leftover-node:ol"]), "a prefix");
        assert!(
            agent_processes("leftover-node:old")
                .iter()
                .any(|l| l.pid == pid)
        );
        let _ = child.kill();
        let _ = child.wait();
        assert!(!found(&["leftover-node:old"]));
    }

    #[test]
    fn finds_a_process_by_its_jobs_variables_and_not_by_a_prefix() {
        let uid = nix::unistd::geteuid().as_raw();
        let (mut child, pid) = job_process(987_654_321, 7, "n1:b1");
        // The child execs `sleep` right away; look until its environment shows.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !attempt_processes(987_654_321, 7, "n1:b1", uid).contains(&pid) {
            assert!(std::time::Instant::now() < deadline, "never found {pid}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!attempt_processes(98_765_432, 7, "n1:b1", uid).contains(&pid));
        assert!(!attempt_processes(987_654_321, 8, "n1:b1", uid).contains(&pid));
        assert!(!attempt_processes(987_654_321, 7, "n2:b1", uid).contains(&pid));
        assert!(!attempt_processes(987_654_321, 7, "n1:b1", uid.wrapping_add(1)).contains(&pid));
        let _ = child.kill();
        let _ = child.wait();
        assert!(!attempt_processes(987_654_321, 7, "n1:b1", uid).contains(&pid));
        assert!(holds(b"A=1\0SLURM_JOB_ID=5\0", "SLURM_JOB_ID=5"));
        assert!(!holds(b"SLURM_JOB_ID=55\0", "SLURM_JOB_ID=5"));
    }
}
