//! The attempts this node runs. A launch starts the batch script on the batch
//! host (its own process group, the job's user, Slurm's environment) and only
//! records the allocation on the other nodes of a gang; the tasks of job steps
//! (`srun`, see [`crate::step`]) register their process groups here under their
//! attempt. Each attempt's life is an explicit state machine
//! ([`attempt::Phase`]); this module does the signalling and waiting around it:
//!
//! - a launch is taken at once and its processes start off the runtime
//!   ([`launching`]), so a slow user lookup or shared file system never holds
//!   up heartbeats;
//! - a kill signals the batch group, the tasks and escaped processes and
//!   SIGKILLs them after the grace period; an XID kills at once the attempts
//!   using the GPU; fencing and stopping kill everything ([`teardown`] waits
//!   until every process is gone, and gives up on unkillable ones after the
//!   unkillable timeout);
//! - every end becomes exactly one report, and the attempt stays held (in
//!   hellos and heartbeats) until the leader acknowledges it;
//! - every attempt is recorded in the [`crate::attempt_journal`] before its
//!   processes start, so an attempt never runs twice, across agent restarts
//!   too.

pub mod attempt;
mod gpu_holders;
mod launching;
mod teardown;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use corral_proto::agent::{AgentReport, Launch, SignalScope};
use corral_state::ids::JobId;
use corral_state::slurm::signal::Signal;
use nix::sys::signal::{Signal as NixSignal, killpg};
use nix::unistd::Pid;
use tokio::time::Instant;

use crate::attempt_journal::Journal;
use crate::job::process::{AGENT_ID_ENV, RunAs, attempt_processes, resolve_user};
use crate::outbox::Outbox;
use attempt::{Attempt, Begun, Phase, Why};
pub use attempt::{AttemptKey, TaskId};
pub use gpu_holders::GpuHolders;

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
    /// How long processes may survive SIGKILL before the attempt is given up
    /// on and the node drained (Slurm's UnkillableStepTimeout).
    pub unkillable_timeout: Duration,
    /// The lease this node's jobs run under. A batch script SIGKILLed while it
    /// is lapsed was fenced (by this agent, or by its watchdog while the agent
    /// hung), so its attempt is reported lost and requeued, not failed.
    pub lease: Option<crate::lease::Lease>,
    /// Fault injection (tests, the chaos suite): every launch first waits this
    /// long on its blocking thread, as when the job's shared storage or the
    /// user database hangs. Zero in service.
    pub launch_stall: Duration,
    /// The controller address jobs are told in `SLURM_WORKING_CLUSTER`
    /// (the first the agent was given, as Slurm names its primary).
    pub working_controller: Option<String>,
    /// By GPU slot, what `CUDA_VISIBLE_DEVICES` names it by (a MIG instance by
    /// its UUID: [`crate::gpu::GpuSlots::devices`]); empty: by slot number.
    pub gpu_devices: Vec<String>,
    /// This agent's cgroups, where the node has cgroup v2 and the agent may
    /// make them: every attempt's processes in one of its own.
    pub cgroups: Option<crate::job::process::Cgroups>,
    /// The node's GPUs (slots), whose listed processes of an attempt's user
    /// on the attempt's GPUs are the attempt's too; `None`: not looked at.
    pub gpus: Option<GpuHolders>,
}

/// The attempts of this node.
#[derive(Debug, Clone)]
pub struct Supervisor {
    settings: Arc<SupervisorSettings>,
    cluster_name: Arc<Mutex<String>>,
    attempts: Arc<Mutex<HashMap<AttemptKey, Attempt>>>,
    /// Attempts of earlier agents of this node, held until the leader
    /// acknowledges their end reports (outbox ids), which [`crate::recovery`]
    /// queued again.
    recovered: Arc<Mutex<BTreeMap<AttemptKey, u64>>>,
    outbox: Outbox,
    journal: Arc<Journal>,
}

impl Supervisor {
    /// An empty supervisor reporting into `outbox` and recording attempts in
    /// `journal`.
    pub fn new(settings: SupervisorSettings, outbox: Outbox, journal: Arc<Journal>) -> Self {
        Supervisor {
            settings: Arc::new(settings),
            cluster_name: Arc::new(Mutex::new(String::new())),
            attempts: Arc::new(Mutex::new(HashMap::new())),
            recovered: Arc::new(Mutex::new(BTreeMap::new())),
            outbox,
            journal,
        }
    }

    /// The attempt table. A panic elsewhere while it was held does not lose
    /// it: an empty answer would make the leader take every attempt for lost.
    fn table(&self) -> MutexGuard<'_, HashMap<AttemptKey, Attempt>> {
        self.attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `SLURM_CLUSTER_NAME`, from the leader's welcome.
    pub fn set_cluster_name(&self, name: &str) {
        if let Ok(mut current) = self.cluster_name.lock() {
            *current = name.to_string();
        }
    }

    /// Attempts this node holds, as a hello or heartbeat tells the leader:
    /// every attempt launching, running or ending here, and every ended one
    /// whose end report the leader has not acknowledged yet. Ended attempts
    /// whose report was acknowledged are forgotten here (the journal keeps
    /// them).
    pub fn held(&self) -> Vec<AttemptKey> {
        let mut acknowledged = Vec::new();
        let mut keys: Vec<AttemptKey> = {
            let mut attempts = self.table();
            attempts.retain(|key, a| match a.phase {
                Phase::Ended { report } if !self.outbox.is_pending(report) => {
                    acknowledged.push(*key);
                    false
                }
                _ => true,
            });
            attempts.keys().copied().collect()
        };
        if let Ok(mut recovered) = self.recovered.lock() {
            recovered.retain(|key, report| {
                let pending = self.outbox.is_pending(*report);
                if !pending {
                    acknowledged.push(*key);
                }
                pending
            });
            keys.extend(recovered.keys());
        }
        if !acknowledged.is_empty() {
            // Off the caller's task: heartbeats call this.
            let (journal, agent_id) = (Arc::clone(&self.journal), self.settings.agent_id.clone());
            tokio::task::spawn_blocking(move || {
                for key in acknowledged {
                    if let Err(e) = journal.acknowledged(key, &agent_id) {
                        tracing::warn!(job = %key.0, attempt = key.1, "cannot record an acknowledged end: {e}");
                    }
                }
            });
        }
        keys.sort();
        keys
    }

    /// Holds attempt `key` of an earlier agent of this node until its end
    /// report `report` (queued again in the outbox) is acknowledged.
    pub fn hold_recovered(&self, key: AttemptKey, report: u64) {
        if let Ok(mut recovered) = self.recovered.lock() {
            recovered.insert(key, report);
        }
    }

    /// Starts an attempt: once, and never one this node ran before (a leader
    /// whose state lags may ask again).
    pub fn launch(&self, launch: Launch) {
        let key = (launch.job.id, launch.attempt);
        if self.table().contains_key(&key) {
            return;
        }
        if self.journal.ran(key) {
            tracing::warn!(
                job = %key.0,
                attempt = key.1,
                "refusing to run an attempt this node has already run (or a newer attempt of its job)"
            );
            return;
        }
        let Some(record) = launch
            .job
            .attempts
            .iter()
            .find(|a| a.number == launch.attempt)
        else {
            tracing::warn!(job = %key.0, attempt = key.1, "launch without its attempt record");
            return;
        };
        let node = &self.settings.node;
        let Some(here) = record.allocation.iter().find(|a| &a.node == node) else {
            tracing::warn!(job = %key.0, "launch for an allocation without this node");
            return;
        };
        let batch = record.batch_host() == Some(node.as_str());
        let gpus = here.gpus.clone();
        let uid = if self.settings.run_as_job_user {
            launch.job.spec.uid
        } else {
            nix::unistd::geteuid().as_raw()
        };
        let launch = Arc::new(launch);
        self.table().insert(
            key,
            Attempt::launching(Arc::clone(&launch), batch, gpus, uid),
        );
        let this = self.clone();
        tokio::spawn(async move { this.start(key, launch, batch).await });
    }

    /// Sends `signal` to the attempt's processes that `scope` names.
    pub fn signal(&self, key: AttemptKey, signal: Signal, scope: SignalScope) {
        let groups = self
            .table()
            .get(&key)
            .map(|r| {
                let mut groups = Vec::new();
                if scope.includes_batch() {
                    groups.extend(r.group);
                }
                if scope.includes_steps() {
                    groups.extend(r.tasks.keys());
                }
                groups
            })
            .unwrap_or_default();
        for group in groups {
            send(group, signal);
        }
    }

    /// Ends an attempt: SIGCONT and `signal` to all its processes here (batch
    /// script, tasks, escaped processes), SIGKILL after `grace`, then (once every
    /// process is gone) the report. An attempt this node does not hold is
    /// released at once; one already ending or ended is left alone.
    pub fn kill(&self, key: AttemptKey, signal: Signal, grace: Duration) {
        let begun = self
            .table()
            .get_mut(&key)
            .map(|r| r.begin_ending(Why::Killed, Instant::now() + grace));
        match begun {
            None if self.recovered.lock().is_ok_and(|r| r.contains_key(&key)) => {}
            None => {
                self.outbox.push(AgentReport::Released {
                    job: key.0,
                    attempt: key.1,
                });
            }
            Some(Begun::Now) => {
                self.signal_everything(key, &ending_signals(signal));
                self.tear_down(key);
            }
            Some(Begun::Already | Begun::Over) => {}
        }
    }

    /// A GPU failed: SIGKILL at once every attempt using it (nothing new starts
    /// in them). `report` makes the report of the failure from the attempts
    /// hit; it is queued before any of them is killed, so that it reaches the
    /// leader before their end reports do (the exit of a job killed for an XID
    /// is not the job's own failure).
    pub fn kill_users_of_gpu(&self, gpu: u32, report: impl FnOnce(Vec<AttemptKey>) -> AgentReport) {
        let now = Instant::now();
        let mut hit = Vec::new();
        let mut begun = Vec::new();
        {
            let mut attempts = self.table();
            for (key, a) in attempts.iter_mut() {
                if !a.gpus.contains(&gpu) || matches!(a.phase, Phase::Ended { .. }) {
                    continue;
                }
                hit.push(*key);
                if a.begin_ending(Why::GpuFault, now) == Begun::Now {
                    begun.push(*key);
                }
            }
            // Only the attempts the XID ended are named: one already ending
            // (its script exited, or the leader killed it) ends as it would
            // have, though its processes die now too.
            let mut ended_by_it = begun.clone();
            ended_by_it.sort();
            // Queued under the table's lock: no end report can overtake it.
            self.outbox.push(report(ended_by_it));
        }
        for key in &hit {
            self.signal_everything(*key, &[Signal::KILL]);
        }
        for key in begun {
            self.tear_down(key);
        }
    }

    /// The lease lapsed: kill everything at once (the leader will declare this
    /// node down and requeue its jobs; they must not run twice). Each attempt
    /// is reported lost once its processes are gone. Calling it again ends the
    /// attempts launched since; those already ending are SIGKILLed by their
    /// teardown, from now on.
    pub fn fence(&self) {
        self.end_everything(Why::Fenced, Duration::ZERO, Signal::KILL);
    }

    /// The agent is stopping: every attempt gets SIGTERM, then SIGKILL after
    /// `grace`, and is reported lost once its processes are gone. Returns once
    /// every attempt has ended (or the unkillable timeout gave up on it).
    pub async fn stop_all(&self, grace: Duration) {
        self.end_everything(Why::Stopping, grace, Signal::TERM);
        let deadline = Instant::now() + grace + self.settings.unkillable_timeout;
        let mut pause = Duration::from_millis(5);
        loop {
            let ending = self
                .table()
                .values()
                .any(|r| !matches!(r.phase, Phase::Ended { .. }));
            if !ending || Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// Ends every attempt for `why`: those running get `signal` and their
    /// teardown; those already ending only have their SIGKILL brought forward
    /// to `grace` from now, which their teardown carries out.
    fn end_everything(&self, why: Why, grace: Duration, signal: Signal) {
        let kill_at = Instant::now() + grace;
        let begun: Vec<AttemptKey> = self
            .table()
            .iter_mut()
            .filter_map(|(key, a)| (a.begin_ending(why, kill_at) == Begun::Now).then_some(*key))
            .collect();
        for key in begun {
            self.signal_everything(key, &ending_signals(signal));
            self.tear_down(key);
        }
    }

    /// `signals`, in order, to every process of attempt `key` here: its
    /// process groups at once, and what escaped them from a blocking thread
    /// (finding those reads every process's environment, which hangs on a
    /// process stuck in the kernel: never on the caller's task, which may be
    /// the heartbeat's).
    fn signal_everything(&self, key: AttemptKey, signals: &[Signal]) {
        let groups = self
            .table()
            .get(&key)
            .map(Attempt::groups)
            .unwrap_or_default();
        for signal in signals {
            for group in &groups {
                send(*group, *signal);
            }
        }
        if let Some(find) = self.escaped_finder(key, true) {
            let signals = signals.to_vec();
            tokio::task::spawn_blocking(move || {
                let pids = find();
                for signal in signals {
                    for pid in &pids {
                        send_pid(*pid, signal);
                    }
                }
            });
        }
    }

    /// What finds the processes of attempt `key` that left its process groups
    /// (see [`attempt_processes`]), to run on a blocking thread (as often as
    /// needed): by their environment, in the attempt's cgroup, and on the
    /// attempt's GPUs (what the GPUs list of its user's processes), so that
    /// its GPUs are reported free only once nothing of it holds them.
    /// `on_gpus` false leaves the GPUs out: once the attempt's end is
    /// reported, its GPUs may go to another attempt of the same user.
    fn escaped_finder(
        &self,
        key: AttemptKey,
        on_gpus: bool,
    ) -> Option<impl Fn() -> Vec<i32> + Send + Sync + 'static> {
        let (uid, slots) = {
            let attempts = self.table();
            let attempt = attempts.get(&key)?;
            (attempt.uid, attempt.gpus.clone())
        };
        let agent_id = self.settings.agent_id.clone();
        let cgroup = self.attempt_cgroup(key);
        let gpus = self
            .settings
            .gpus
            .clone()
            .filter(|_| on_gpus && !slots.is_empty());
        Some(move || {
            let mut pids = attempt_processes(key.0.0, key.1, &agent_id, uid);
            if let Some(cgroup) = &cgroup {
                pids.extend(cgroup.pids_below());
            }
            if let Some(gpus) = &gpus {
                pids.extend(gpus.of(&slots, uid, key));
            }
            pids.sort_unstable();
            pids.dedup();
            pids
        })
    }

    /// What the journal records of attempt `key`'s GPUs, for a restarted
    /// agent to look for its processes on them.
    fn gpu_hold(&self, key: AttemptKey) -> Option<crate::attempt_journal::GpuHold> {
        let gpus = self.settings.gpus.as_ref()?;
        let (uid, slots) = {
            let attempts = self.table();
            let attempt = attempts.get(&key)?;
            (attempt.uid, attempt.gpus.clone())
        };
        let uuids = gpus.uuids(&slots);
        (!uuids.is_empty()).then_some(crate::attempt_journal::GpuHold { uid, uuids })
    }

    /// Attempt `key`'s cgroup, when this agent has cgroups (made or not).
    pub fn attempt_cgroup(&self, key: AttemptKey) -> Option<crate::job::process::AttemptCgroup> {
        let cgroups = self.settings.cgroups.as_ref()?;
        Some(cgroups.attempt(key.0.0, key.1))
    }

    /// Makes attempt `key`'s cgroup for a process about to start there;
    /// `None` (logged) when this agent has no cgroups or cannot make it.
    pub fn made_attempt_cgroup(
        &self,
        key: AttemptKey,
    ) -> Option<crate::job::process::AttemptCgroup> {
        let cgroup = self.attempt_cgroup(key)?;
        match cgroup.make() {
            Ok(()) => Some(cgroup),
            Err(e) => {
                tracing::warn!(
                    job = %key.0,
                    attempt = key.1,
                    cgroup = cgroup.name(),
                    "cannot make the attempt's cgroup: {e}; its processes are fenced by process group and environment only"
                );
                None
            }
        }
    }

    /// Every process of attempt `key` is gone: its end report is queued and
    /// recorded, and the attempt is held until the leader acknowledges it.
    fn finish(&self, key: AttemptKey) {
        let report = {
            let mut attempts = self.table();
            let Some(attempt) = attempts.get_mut(&key) else {
                return;
            };
            let Some(report) = attempt.end_report(key) else {
                return;
            };
            let id = self.outbox.push(report.clone());
            attempt.ended(id);
            report
        };
        if let Err(e) = self.journal.ended(key, &self.settings.agent_id, &report) {
            tracing::warn!(job = %key.0, attempt = key.1, "cannot record the attempt's end: {e}");
        }
    }

    // ---- job steps -------------------------------------------------------

    /// The live attempt of `job` here that a step may run in, with its launch.
    pub fn step_attempt_of_job(&self, job: JobId) -> Option<(AttemptKey, Arc<Launch>)> {
        let attempts = self.table();
        attempts
            .iter()
            .find(|(key, r)| key.0 == job && r.takes_steps())
            .map(|(key, r)| (*key, Arc::clone(&r.launch)))
    }

    /// The launch of attempt `key` when it runs here and may run steps.
    pub fn step_attempt(&self, key: AttemptKey) -> Option<Arc<Launch>> {
        let attempts = self.table();
        let running = attempts.get(&key)?;
        running.takes_steps().then(|| Arc::clone(&running.launch))
    }

    /// Queues a report about a step this agent coordinates (its start or its
    /// end), resent until the leader commits it.
    pub fn report_step(&self, report: AgentReport) {
        self.outbox.push(report);
    }

    /// The next step number of attempt `key` (steps are numbered by the node
    /// that coordinates them, the batch host in practice).
    pub fn next_step(&self, key: AttemptKey) -> Option<u32> {
        let mut attempts = self.table();
        let running = attempts.get_mut(&key)?;
        let step = running.next_step;
        running.next_step += 1;
        Some(step)
    }

    /// A task of attempt `key` is about to start; false when the attempt is
    /// gone or ending (start nothing then). Every true must be followed by
    /// [`Supervisor::task_started`] or [`Supervisor::task_not_started`].
    pub fn begin_task(&self, key: AttemptKey) -> bool {
        match self.table().get_mut(&key) {
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
    pub fn task_started(&self, key: AttemptKey, group: i32, task: TaskId) -> bool {
        let mut attempts = self.table();
        let Some(running) = attempts.get_mut(&key) else {
            return false;
        };
        running.starting = running.starting.saturating_sub(1);
        running.tasks.insert(group, task);
        running.takes_steps()
    }

    /// A task announced by [`Supervisor::begin_task`] did not start.
    pub fn task_not_started(&self, key: AttemptKey) {
        if let Some(running) = self.table().get_mut(&key) {
            running.starting = running.starting.saturating_sub(1);
        }
    }

    /// Sends `signal` to those of `groups` that are still task groups of
    /// attempt `key` (a group that ended is never signalled: its id may be
    /// reused).
    pub fn signal_tasks(&self, key: AttemptKey, groups: &[i32], signal: Signal) {
        let live: Vec<i32> = self
            .table()
            .get(&key)
            .map(|r| {
                groups
                    .iter()
                    .copied()
                    .filter(|g| r.tasks.contains_key(g))
                    .collect()
            })
            .unwrap_or_default();
        for group in live {
            send(group, signal);
        }
    }

    /// What runs here of job `job`'s running attempt, for `sstat`: the
    /// attempt, the batch script's process group (on the batch host), the
    /// tasks' groups with their steps and ranks, and the GPUs it holds here.
    pub fn usage_targets(&self, job: JobId) -> Option<UsageTargets> {
        let attempts = self.table();
        let (key, running) = attempts
            .iter()
            .find(|(key, r)| key.0 == job && r.takes_steps())?;
        Some(UsageTargets {
            key: *key,
            user: running.launch.job.spec.user.clone(),
            uid: running.launch.job.spec.uid,
            batch: running.group.filter(|_| running.batch),
            tasks: running.tasks.iter().map(|(g, t)| (*g, *t)).collect(),
            gpus: running.gpus.clone(),
        })
    }

    /// A task's process group is empty.
    pub fn task_gone(&self, key: AttemptKey, group: i32) {
        if let Some(running) = self.table().get_mut(&key) {
            running.tasks.remove(&group);
        }
    }

    // ---- checkpoints -----------------------------------------------------

    /// A checkpoint written by attempt `key` (`corral checkpoint` inside the
    /// job, through the step socket, by `caller`). Refused unless the attempt
    /// runs here now and `caller` may act for its job; queued for the leader
    /// otherwise, with the report's id to wait on (a step not newer than one
    /// already reported is not sent again: the newest report's id, still to
    /// wait on, or `None` for a step the job's record already holds).
    pub fn record_checkpoint(
        &self,
        key: AttemptKey,
        caller: u32,
        step: u64,
        path: String,
    ) -> Result<Option<u64>, String> {
        let node = &self.settings.node;
        {
            let mut attempts = self.table();
            let Some(attempt) = attempts.get_mut(&key) else {
                return Err(format!(
                    "job {} attempt {} does not run on {node}; its checkpoint is not recorded",
                    key.0, key.1
                ));
            };
            let job = &attempt.launch.job;
            let own = nix::unistd::geteuid().as_raw();
            if caller != 0 && caller != own && caller != job.spec.uid {
                return Err(format!(
                    "uid {caller} may not report checkpoints of job {}, which belongs to {}",
                    job.id, job.spec.user
                ));
            }
            if attempt.phase != Phase::Running {
                return Err(format!(
                    "job {} attempt {} is ending on {node}; its checkpoint is not recorded",
                    key.0, key.1
                ));
            }
            if attempt.checkpoint_step.is_some_and(|s| step <= s) {
                return Ok(attempt.checkpoint_report);
            }
            attempt.checkpoint_step = Some(step);
            // Under the table's lock: queued before the attempt's end report.
            let report = self.outbox.push_awaited(AgentReport::Checkpoint {
                job: key.0,
                attempt: key.1,
                step,
                path,
            });
            attempt.checkpoint_report = Some(report);
            Ok(Some(report))
        }
    }

    /// Waits up to `patience` for the leader to settle report `id`: whether
    /// it committed it, or `None` while it is pending.
    pub async fn report_settled(&self, id: u64, patience: std::time::Duration) -> Option<bool> {
        self.outbox.settled(id, patience).await
    }

    // ---- the node and its jobs -------------------------------------------

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

    /// `SLURM_WORKING_CLUSTER` for this node's jobs, when the agent knows a
    /// controller.
    pub fn working_cluster(&self) -> Option<String> {
        let controller = self.settings.working_controller.as_deref()?;
        Some(working_cluster(&self.cluster_name(), controller))
    }

    /// Sets the agent's variables in a job process's environment:
    /// `CORRAL_AGENT_ID`, `SLURM_WORKING_CLUSTER`, and `CORRAL_STEP_SOCKET`
    /// when steps are served.
    pub fn add_agent_vars(&self, env: &mut std::collections::BTreeMap<String, String>) {
        env.insert(AGENT_ID_ENV.to_string(), self.settings.agent_id.clone());
        crate::job::environment::name_gpu_devices(env, &self.settings.gpu_devices);
        if let Some(value) = self.working_cluster() {
            env.insert("SLURM_WORKING_CLUSTER".to_string(), value);
        }
        if let Some(socket) = &self.settings.step_socket {
            env.insert(
                corral_proto::step::STEP_SOCKET_ENV.to_string(),
                socket.display().to_string(),
            );
        }
    }
}

/// Slurm 22.05's protocol version (`(38 << 8) | 0`), as
/// `SLURM_WORKING_CLUSTER` carries it.
const SLURM_22_05_PROTOCOL_VERSION: u32 = 38 << 8;
/// Slurm's id of select/cons_tres, the selection corral's matches.
const SELECT_PLUGIN_CONS_TRES: u32 = 109;

/// `SLURM_WORKING_CLUSTER`: `CLUSTER:HOST:PORT:RPC_VERSION:SELECT_PLUGIN`,
/// the controller given as `host:port` (`[v6]:port`).
fn working_cluster(cluster: &str, controller: &str) -> String {
    let (host, port) = match controller.rsplit_once(':') {
        Some((host, port)) => (host.trim_start_matches('[').trim_end_matches(']'), port),
        None => (controller, "6817"),
    };
    format!("{cluster}:{host}:{port}:{SLURM_22_05_PROTOCOL_VERSION}:{SELECT_PLUGIN_CONS_TRES}")
}

/// What [`Supervisor::usage_targets`] finds.
#[derive(Debug, Clone)]
pub struct UsageTargets {
    /// The attempt.
    pub key: AttemptKey,
    /// The job's user (name), who may look.
    pub user: String,
    /// And uid.
    pub uid: u32,
    /// The batch script's process group, on the batch host.
    pub batch: Option<i32>,
    /// The step tasks' process groups.
    pub tasks: Vec<(i32, TaskId)>,
    /// The GPUs the attempt holds here.
    pub gpus: Vec<u32>,
}

/// What ends an attempt with `signal`, as Slurm ends a job: SIGCONT first,
/// so that a stopped process receives the signal now (not for SIGKILL,
/// which needs none).
fn ending_signals(signal: Signal) -> Vec<Signal> {
    if signal == Signal::KILL {
        vec![signal]
    } else {
        vec![Signal::CONT, signal]
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

#[cfg(test)]
mod tests {
    use super::working_cluster;

    #[test]
    fn the_working_cluster_is_said_as_slurm_says_it() {
        assert_eq!(
            working_cluster("local", "10.0.0.5:6817"),
            "local:10.0.0.5:6817:9728:109"
        );
        assert_eq!(
            working_cluster("c", "[fd00::1]:7000"),
            "c:fd00::1:7000:9728:109"
        );
    }
}
