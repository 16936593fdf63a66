//! The attempts this node runs. A launch starts the batch script on the batch
//! host (its own process group, the job's user, Slurm's environment) and only
//! records the allocation on the other nodes of a gang; the tasks of job steps
//! (`srun`, see [`crate::step`]) register their process groups here under their
//! attempt. A kill signals the batch group and the tasks and SIGKILLs them after
//! the grace period; an XID kills at once the attempts using the GPU; fencing
//! kills everything. Every outcome becomes a report, and an attempt leaves this
//! table only when its processes (batch script and tasks) are all gone.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use corral_proto::agent::{AgentReport, Launch, SignalScope};
use corral_state::ids::{AttemptNumber, JobId};
use corral_state::job::ExitStatus;
use corral_state::slurm::signal::Signal;
use nix::sys::signal::{Signal as NixSignal, killpg};
use nix::unistd::Pid;

use crate::job::environment::{LaunchContext, batch_environment};
use crate::job::process::{
    AGENT_ID_ENV, JobProcess, ProcessSpec, RunAs, attempt_processes, output_paths,
    process_group_alive, resolve_user, write_script,
};
use crate::outbox::Outbox;

/// An attempt on this node.
pub type AttemptKey = (JobId, AttemptNumber);

/// Where the agent keeps things and who it is.
#[derive(Debug, Clone)]
pub struct SupervisorSettings {
    /// This node.
    pub node: String,
    /// Batch scripts are written here.
    pub scripts_dir: PathBuf,
    /// `CORRAL_CHECKPOINT_DIR` is `<root>/<job id>` (shared storage on a real cluster).
    pub checkpoint_root: PathBuf,
    /// Run jobs as their users (the agent runs as root) or as the agent's user.
    pub run_as_job_user: bool,
    /// The socket `srun` reaches this agent on (`CORRAL_STEP_SOCKET` in jobs).
    pub step_socket: Option<PathBuf>,
    /// This agent (node and start), `CORRAL_AGENT_ID` in every job process it
    /// starts: how it finds the processes that left their process groups.
    pub agent_id: String,
}

#[derive(Debug)]
struct Running {
    /// The launch: the job record, its script, where the other nodes' agents are.
    launch: Arc<Launch>,
    batch: bool,
    gpus: Vec<u32>,
    /// The batch script's process group, on the batch host.
    group: Option<i32>,
    checkpoint_dir: PathBuf,
    last_checkpoint_step: Option<u64>,
    killing: bool,
    /// Killed because the lease lapsed: its end is not reported. The next hello
    /// leaves it out of the running attempts, so the leader fails it over (a
    /// node failure: requeued) rather than recording an exit.
    fenced: bool,
    /// Process groups of the steps' tasks running here.
    tasks: BTreeSet<i32>,
    /// Tasks being started, whose groups are not known yet.
    starting: u32,
    /// The number the next step coordinated here gets.
    next_step: u32,
    /// When a kill under way SIGKILLs what is left.
    kill_at: Option<Instant>,
    /// Ending (its batch script exited, a GPU it used failed, or a kill came):
    /// no step task starts in it any more.
    ending: bool,
    /// The uid the attempt's processes run as (to find those that escaped
    /// their process groups).
    uid: u32,
}

impl Running {
    /// Whether a step task may start in the attempt.
    fn takes_steps(&self) -> bool {
        !self.ending && !self.killing && !self.fenced
    }

    /// Every process group of the attempt here: the batch script's and the tasks'.
    fn groups(&self) -> Vec<i32> {
        self.group.iter().chain(&self.tasks).copied().collect()
    }
}

/// The attempts of this node.
#[derive(Debug, Clone)]
pub struct Supervisor {
    settings: Arc<SupervisorSettings>,
    cluster_name: Arc<Mutex<String>>,
    attempts: Arc<Mutex<HashMap<AttemptKey, Running>>>,
    outbox: Outbox,
}

impl Supervisor {
    /// An empty supervisor reporting into `outbox`.
    pub fn new(settings: SupervisorSettings, outbox: Outbox) -> Self {
        Supervisor {
            settings: Arc::new(settings),
            cluster_name: Arc::new(Mutex::new(String::new())),
            attempts: Arc::new(Mutex::new(HashMap::new())),
            outbox,
        }
    }

    /// `SLURM_CLUSTER_NAME`, from the leader's welcome.
    pub fn set_cluster_name(&self, name: &str) {
        if let Ok(mut current) = self.cluster_name.lock() {
            *current = name.to_string();
        }
    }

    /// Attempts with processes (or an allocation) here.
    pub fn running(&self) -> Vec<AttemptKey> {
        let mut keys: Vec<AttemptKey> = self
            .attempts
            .lock()
            .map(|a| a.keys().copied().collect())
            .unwrap_or_default();
        keys.sort();
        keys
    }

    /// Attempts this node holds, as a hello or heartbeat tells the leader.
    pub fn held(&self) -> Vec<AttemptKey> {
        self.running()
    }

    /// Starts an attempt (once).
    pub fn launch(&self, launch: Launch) {
        let key = (launch.job.id, launch.attempt);
        if self.attempts.lock().is_ok_and(|a| a.contains_key(&key)) {
            return;
        }
        let Some(attempt) = launch
            .job
            .attempts
            .iter()
            .find(|a| a.number == launch.attempt)
            .cloned()
        else {
            tracing::warn!(job = %key.0, attempt = key.1, "launch without its attempt record");
            return;
        };
        let node = &self.settings.node;
        let Some(here) = attempt.allocation.iter().find(|a| &a.node == node) else {
            tracing::warn!(job = %key.0, "launch for an allocation without this node");
            return;
        };
        let batch = attempt.batch_host() == Some(node.as_str());
        let checkpoint_dir = self.checkpoint_dir(key.0);
        let launch = Arc::new(launch);
        let mut running = Running {
            launch: Arc::clone(&launch),
            batch,
            gpus: here.gpus.clone(),
            group: None,
            checkpoint_dir: checkpoint_dir.clone(),
            last_checkpoint_step: launch.job.last_checkpoint.as_ref().map(|c| c.step),
            killing: false,
            fenced: false,
            tasks: BTreeSet::new(),
            starting: 0,
            next_step: 0,
            kill_at: None,
            ending: false,
            uid: if self.settings.run_as_job_user {
                launch.job.spec.uid
            } else {
                nix::unistd::geteuid().as_raw()
            },
        };
        if !batch {
            // Other ranks start through steps (srun); the allocation is ready.
            self.insert(key, running);
            self.outbox.push(AgentReport::Started {
                job: key.0,
                attempt: key.1,
            });
            return;
        }
        match self.spawn_batch(&launch, &attempt, &checkpoint_dir) {
            Ok(process) => {
                running.group = Some(process.pid() as i32);
                self.insert(key, running);
                self.outbox.push(AgentReport::Started {
                    job: key.0,
                    attempt: key.1,
                });
                self.watch_batch(key, process);
            }
            Err(reason) => {
                tracing::error!(job = %key.0, attempt = key.1, "cannot start the batch script: {reason}");
                self.outbox.push(AgentReport::BatchExited {
                    job: key.0,
                    attempt: key.1,
                    status: ExitStatus {
                        code: 1,
                        signal: None,
                    },
                });
            }
        }
    }

    fn spawn_batch(
        &self,
        launch: &Launch,
        attempt: &corral_state::job::Attempt,
        checkpoint_dir: &std::path::Path,
    ) -> Result<JobProcess, String> {
        let job = &launch.job;
        let user = self.job_user(job)?;
        std::fs::create_dir_all(checkpoint_dir)
            .map_err(|e| format!("cannot create {}: {e}", checkpoint_dir.display()))?;
        if let Some(user) = &user {
            let _ = nix::unistd::chown(
                checkpoint_dir,
                Some(nix::unistd::Uid::from_raw(user.uid)),
                Some(nix::unistd::Gid::from_raw(user.gid)),
            );
        }
        let cluster_name = self.cluster_name();
        let checkpoint_dir_text = checkpoint_dir.display().to_string();
        let mut env = batch_environment(&LaunchContext {
            job,
            attempt,
            node: &self.settings.node,
            cluster_name: &cluster_name,
            checkpoint_dir: &checkpoint_dir_text,
            base_env: &launch.script.environment,
        });
        self.add_agent_vars(&mut env);
        let program = write_script(
            &self.settings.scripts_dir,
            job.id,
            attempt.number,
            &launch.script.script,
            user.as_ref(),
        )
        .map_err(|e| e.to_string())?;
        let workdir = PathBuf::from(&job.spec.workdir);
        let (stdout, stderr) = output_paths(job, &self.settings.node, &workdir);
        let spec = ProcessSpec {
            program,
            args: launch.script.argv.clone(),
            env,
            workdir,
            stdout,
            stderr,
            stdin: job.spec.stdin.as_ref().map(PathBuf::from),
            user,
        };
        JobProcess::spawn(&spec).map_err(|e| e.to_string())
    }

    /// Waits for the batch script, then ends what is left of the attempt here
    /// (the rest of its group, the tasks of steps still running, processes that
    /// escaped them: they end with the batch script, as in Slurm), then reports.
    fn watch_batch(&self, key: AttemptKey, mut process: JobProcess) {
        let this = self.clone();
        tokio::spawn(async move {
            let status = match process.wait().await {
                Ok(status) => status,
                Err(e) => {
                    tracing::error!(job = %key.0, "waiting for the batch script: {e}");
                    ExitStatus {
                        code: 1,
                        signal: None,
                    }
                }
            };
            // Nothing new starts in the attempt from here on. A kill already
            // under way keeps its grace period; otherwise what is left goes now.
            let kill_from = this.mark_ending(key).unwrap_or_else(Instant::now);
            this.wait_until_gone(key, kill_from).await;
            let fenced = this.take(key).is_some_and(|r| r.fenced);
            if !fenced {
                this.outbox.push(AgentReport::BatchExited {
                    job: key.0,
                    attempt: key.1,
                    status,
                });
            }
        });
    }

    /// Sends `signal` to the attempt's processes that `scope` names.
    pub fn signal(&self, key: AttemptKey, signal: Signal, scope: SignalScope) {
        let groups = self
            .attempts
            .lock()
            .ok()
            .and_then(|a| {
                a.get(&key).map(|r| {
                    let mut groups = Vec::new();
                    if scope.includes_batch() {
                        groups.extend(r.group);
                    }
                    if scope.includes_steps() {
                        groups.extend(&r.tasks);
                    }
                    groups
                })
            })
            .unwrap_or_default();
        for group in groups {
            send(group, signal);
        }
    }

    /// Ends an attempt: `signal` to all its processes here (batch script,
    /// tasks, escaped processes), SIGKILL after `grace`, then (once every
    /// process is gone) the report. An attempt this node does not run is
    /// released at once.
    pub fn kill(&self, key: AttemptKey, signal: Signal, grace: Duration) {
        let kill_from = Instant::now() + grace;
        let state = self.attempts.lock().ok().and_then(|mut a| {
            a.get_mut(&key).map(|r| {
                let first = !r.killing;
                r.killing = true;
                r.ending = true;
                if first {
                    r.kill_at = Some(kill_from);
                }
                (r.batch && r.group.is_some(), r.groups(), first)
            })
        });
        let Some((batch, groups, first)) = state else {
            self.outbox.push(AgentReport::Released {
                job: key.0,
                attempt: key.1,
            });
            return;
        };
        if !first {
            return;
        }
        for group in &groups {
            send(*group, signal);
        }
        for pid in self.escaped(key) {
            send_pid(pid, signal);
        }
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(kill_from).await;
            this.kill_everything(key);
        });
        if batch {
            // The batch watcher reports BatchExited when everything is gone.
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            this.wait_until_gone(key, kill_from).await;
            let fenced = this.take(key).is_some_and(|r| r.fenced);
            if !fenced {
                this.outbox.push(AgentReport::Released {
                    job: key.0,
                    attempt: key.1,
                });
            }
        });
    }

    /// A GPU failed: SIGKILL at once every attempt using it (nothing new starts
    /// in them). `report` makes the report of the failure from the attempts
    /// hit; it is queued before any of them is killed, so that it reaches the
    /// leader before the batch script's exit does (the exit of a job killed for
    /// an XID is not the job's own failure).
    pub fn kill_users_of_gpu(&self, gpu: u32, report: impl FnOnce(Vec<AttemptKey>) -> AgentReport) {
        let hit: Vec<AttemptKey> = self
            .attempts
            .lock()
            .map(|mut a| {
                a.iter_mut()
                    .filter(|(_, r)| r.gpus.contains(&gpu))
                    .map(|(k, r)| {
                        r.ending = true;
                        *k
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.outbox.push(report(hit.clone()));
        for key in &hit {
            self.kill_everything(*key);
        }
    }

    /// The lease lapsed: kill everything (the leader will declare this node down
    /// and requeue its jobs; they must not run twice).
    pub fn fence(&self) {
        let (keys, waiting): (Vec<AttemptKey>, Vec<AttemptKey>) = self
            .attempts
            .lock()
            .map(|mut a| {
                let mut keys = Vec::new();
                let mut waiting = Vec::new();
                for (key, r) in a.iter_mut() {
                    if !r.fenced && !r.batch && (!r.tasks.is_empty() || r.starting > 0) {
                        waiting.push(*key);
                    }
                    r.fenced = true;
                    r.killing = true;
                    r.ending = true;
                    keys.push(*key);
                }
                (keys, waiting)
            })
            .unwrap_or_default();
        for key in keys {
            self.kill_everything(key);
        }
        // Ranks without processes here are simply forgotten (not reported);
        // ranks with tasks once the tasks are gone.
        if let Ok(mut attempts) = self.attempts.lock() {
            attempts.retain(|_, r| r.group.is_some() || !r.tasks.is_empty() || r.starting > 0);
        }
        for key in waiting {
            let this = self.clone();
            tokio::spawn(async move {
                this.wait_until_gone(key, Instant::now()).await;
                this.take(key);
            });
        }
    }

    /// SIGKILL to every process of attempt `key` here: its process groups and
    /// what escaped them.
    fn kill_everything(&self, key: AttemptKey) {
        let groups = self
            .attempts
            .lock()
            .ok()
            .and_then(|a| a.get(&key).map(Running::groups))
            .unwrap_or_default();
        for group in groups {
            let _ = killpg(Pid::from_raw(group), NixSignal::SIGKILL);
        }
        for pid in self.escaped(key) {
            send_pid(pid, Signal::KILL);
        }
    }

    /// Marks attempt `key` as ending (no task starts in it any more); returns
    /// when a kill under way will SIGKILL what is left, if one is.
    fn mark_ending(&self, key: AttemptKey) -> Option<Instant> {
        let mut attempts = self.attempts.lock().ok()?;
        let running = attempts.get_mut(&key)?;
        running.ending = true;
        running.kill_at
    }

    /// Processes of attempt `key` that left its process groups (see
    /// [`attempt_processes`]).
    fn escaped(&self, key: AttemptKey) -> Vec<i32> {
        let uid = self
            .attempts
            .lock()
            .ok()
            .and_then(|a| a.get(&key).map(|r| r.uid));
        uid.map(|uid| attempt_processes(key.0.0, key.1, &self.settings.agent_id, uid))
            .unwrap_or_default()
    }

    /// Returns once attempt `key` has nothing left here (or is gone): no task
    /// starting, no live process group (the batch script's or a task's), no
    /// escaped process. From `kill_from` on, whatever is left is SIGKILLed at
    /// every look, since escaped processes may fork more.
    async fn wait_until_gone(&self, key: AttemptKey, kill_from: Instant) {
        let mut pause = Duration::from_millis(2);
        loop {
            let pending = self
                .attempts
                .lock()
                .ok()
                .and_then(|a| a.get(&key).map(|r| (r.starting, r.groups())));
            let Some((starting, groups)) = pending else {
                return;
            };
            let live: Vec<i32> = groups
                .into_iter()
                .filter(|g| process_group_alive(*g))
                .collect();
            // Looking for escaped processes reads every process's environment:
            // only once the groups are gone (a SIGKILL of a live group comes
            // first anyway).
            let escaped = if live.is_empty() {
                self.escaped(key)
            } else {
                Vec::new()
            };
            if starting == 0 && live.is_empty() && escaped.is_empty() {
                return;
            }
            if Instant::now() >= kill_from {
                for group in &live {
                    let _ = killpg(Pid::from_raw(*group), NixSignal::SIGKILL);
                }
                for pid in escaped {
                    send_pid(pid, Signal::KILL);
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    // ---- job steps -------------------------------------------------------

    /// The live attempt of `job` here that a step may run in, with its launch.
    pub fn step_attempt_of_job(&self, job: JobId) -> Option<(AttemptKey, Arc<Launch>)> {
        let attempts = self.attempts.lock().ok()?;
        attempts
            .iter()
            .find(|(key, r)| key.0 == job && r.takes_steps())
            .map(|(key, r)| (*key, Arc::clone(&r.launch)))
    }

    /// The launch of attempt `key` when it runs here and may run steps.
    pub fn step_attempt(&self, key: AttemptKey) -> Option<Arc<Launch>> {
        let attempts = self.attempts.lock().ok()?;
        let running = attempts.get(&key)?;
        running.takes_steps().then(|| Arc::clone(&running.launch))
    }

    /// The next step number of attempt `key` (steps are numbered by the node
    /// that coordinates them, the batch host in practice).
    pub fn next_step(&self, key: AttemptKey) -> Option<u32> {
        let mut attempts = self.attempts.lock().ok()?;
        let running = attempts.get_mut(&key)?;
        let step = running.next_step;
        running.next_step += 1;
        Some(step)
    }

    /// A task of attempt `key` is about to start; false when the attempt is
    /// gone or ending (start nothing then). Every true must be followed by
    /// [`Supervisor::task_started`] or [`Supervisor::task_not_started`].
    pub fn begin_task(&self, key: AttemptKey) -> bool {
        let Ok(mut attempts) = self.attempts.lock() else {
            return false;
        };
        match attempts.get_mut(&key) {
            Some(running) if running.takes_steps() => {
                running.starting += 1;
                true
            }
            _ => false,
        }
    }

    /// A task started as process group `group`. False when the attempt began
    /// ending meanwhile: the caller kills the group at once (the attempt waits
    /// for it either way).
    pub fn task_started(&self, key: AttemptKey, group: i32) -> bool {
        let Ok(mut attempts) = self.attempts.lock() else {
            return false;
        };
        let Some(running) = attempts.get_mut(&key) else {
            return false;
        };
        running.starting = running.starting.saturating_sub(1);
        running.tasks.insert(group);
        running.takes_steps()
    }

    /// A task announced by [`Supervisor::begin_task`] did not start.
    pub fn task_not_started(&self, key: AttemptKey) {
        if let Ok(mut attempts) = self.attempts.lock()
            && let Some(running) = attempts.get_mut(&key)
        {
            running.starting = running.starting.saturating_sub(1);
        }
    }

    /// Sends `signal` to those of `groups` that are still task groups of
    /// attempt `key` (a group that ended is never signalled: its id may be
    /// reused).
    pub fn signal_tasks(&self, key: AttemptKey, groups: &[i32], signal: Signal) {
        let live: Vec<i32> = self
            .attempts
            .lock()
            .ok()
            .and_then(|a| {
                a.get(&key).map(|r| {
                    groups
                        .iter()
                        .copied()
                        .filter(|g| r.tasks.contains(g))
                        .collect()
                })
            })
            .unwrap_or_default();
        for group in live {
            send(group, signal);
        }
    }

    /// A task's process group is empty.
    pub fn task_gone(&self, key: AttemptKey, group: i32) {
        if let Ok(mut attempts) = self.attempts.lock()
            && let Some(running) = attempts.get_mut(&key)
        {
            running.tasks.remove(&group);
        }
    }

    /// Who a job's processes run as: its user, looked up here, when the agent
    /// runs as root (refusing a uid that disagrees with the job's claim); the
    /// agent's own user otherwise (`None`).
    pub fn job_user(&self, job: &corral_state::job::Job) -> Result<Option<RunAs>, String> {
        if !self.settings.run_as_job_user {
            return Ok(None);
        }
        let found = resolve_user(&job.spec.user).map_err(|e| e.to_string())?;
        if found.uid != job.spec.uid {
            return Err(format!(
                "user '{}' is uid {} on this node but the job claims uid {}; refusing to run it",
                job.spec.user, found.uid, job.spec.uid
            ));
        }
        Ok(Some(found))
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.settings.node
    }

    /// `SLURM_CLUSTER_NAME`.
    pub fn cluster_name(&self) -> String {
        self.cluster_name
            .lock()
            .map(|n| n.clone())
            .unwrap_or_default()
    }

    /// `CORRAL_CHECKPOINT_DIR` of `job`.
    pub fn checkpoint_dir(&self, job: JobId) -> PathBuf {
        self.settings.checkpoint_root.join(job.to_string())
    }

    /// Sets the agent's variables in a job process's environment:
    /// `CORRAL_AGENT_ID`, and `CORRAL_STEP_SOCKET` when steps are served.
    pub fn add_agent_vars(&self, env: &mut std::collections::BTreeMap<String, String>) {
        env.insert(AGENT_ID_ENV.to_string(), self.settings.agent_id.clone());
        if let Some(socket) = &self.settings.step_socket {
            env.insert(
                corral_proto::step::STEP_SOCKET_ENV.to_string(),
                socket.display().to_string(),
            );
        }
    }

    /// Checkpoint markers written since the last look (`corral checkpoint` inside
    /// the job writes `CORRAL_CHECKPOINT_DIR/.corral-checkpoint`).
    pub fn poll_checkpoints(&self) {
        let watched: Vec<(AttemptKey, PathBuf, Option<u64>)> = self
            .attempts
            .lock()
            .map(|a| {
                a.iter()
                    .filter(|(_, r)| r.batch && !r.killing)
                    .map(|(k, r)| (*k, r.checkpoint_dir.clone(), r.last_checkpoint_step))
                    .collect()
            })
            .unwrap_or_default();
        for (key, dir, last) in watched {
            let Some(marker) = corral_proto::checkpoint_marker::read(&dir) else {
                continue;
            };
            if last.is_some_and(|step| marker.step <= step) {
                continue;
            }
            if let Ok(mut attempts) = self.attempts.lock()
                && let Some(running) = attempts.get_mut(&key)
            {
                running.last_checkpoint_step = Some(marker.step);
            }
            self.outbox.push(AgentReport::Checkpoint {
                job: key.0,
                attempt: key.1,
                step: marker.step,
                path: marker.path,
            });
        }
    }

    fn insert(&self, key: AttemptKey, running: Running) {
        if let Ok(mut attempts) = self.attempts.lock() {
            attempts.insert(key, running);
        }
    }

    fn take(&self, key: AttemptKey) -> Option<Running> {
        self.attempts.lock().ok()?.remove(&key)
    }
}

fn send(group: i32, signal: Signal) {
    match NixSignal::try_from(i32::from(signal.0)) {
        Ok(signal) => {
            let _ = killpg(Pid::from_raw(group), signal);
        }
        Err(_) => tracing::warn!(signal = signal.0, "not a signal this system knows"),
    }
}

fn send_pid(pid: i32, signal: Signal) {
    if let Ok(signal) = NixSignal::try_from(i32::from(signal.0)) {
        let _ = nix::sys::signal::kill(Pid::from_raw(pid), signal);
    }
}
