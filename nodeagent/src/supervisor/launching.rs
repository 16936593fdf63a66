//! Starting an attempt's processes, off the runtime: the journal record, the
//! user lookup, the checkpoint directory (often on shared storage), the
//! script file and the fork run on a blocking thread, so that none of them
//! can hold up heartbeats. Then the batch script is watched until it exits.

use std::path::PathBuf;
use std::sync::Arc;

use corral_proto::agent::{AgentReport, Launch};
use corral_state::job::ExitStatus;
use corral_state::slurm::signal::Signal;
use tokio::time::Instant;

use super::attempt::{AttemptKey, Begun, Phase, Why};

/// Why an attempt's processes did not start.
enum Failed {
    /// Because of the job (its user, directory, script).
    Job(String),
    /// Because of the agent.
    Agent(String),
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Job(reason) | Failed::Agent(reason) => f.write_str(reason),
        }
    }
}
use super::{Supervisor, send};
use crate::job::checkpoint_dir::{CheckpointDirError, make_checkpoint_dir};
use crate::job::environment::{LaunchContext, batch_environment, login_vars};
use crate::job::process::{JobProcess, ProcessSpec, login_account, output_paths, write_script};

impl Supervisor {
    /// Starts the processes of attempt `key` (already in the table, launching)
    /// and moves it on: running, or (if it began ending meanwhile) killed at
    /// once; a batch script that cannot start ends the attempt with exit 1.
    pub(super) async fn start(&self, key: AttemptKey, launch: Arc<Launch>, batch: bool) {
        let this = self.clone();
        let work = Arc::clone(&launch);
        let started = tokio::task::spawn_blocking(move || {
            let stall = this.settings.launch_stall;
            if !stall.is_zero() {
                tracing::warn!(job = %key.0, attempt = key.1, ?stall, "fault injected: the launch stalls");
                std::thread::sleep(stall);
            }
            let hold = this.gpu_hold(key);
            this.journal
                .started(key, &this.settings.agent_id, hold)
                .map_err(|e| {
                    Failed::Agent(format!(
                        "cannot record the attempt in the agent's journal: {e}"
                    ))
                })?;
            if batch {
                this.spawn_batch(&work).map(Some)
            } else {
                Ok(None)
            }
        })
        .await
        .unwrap_or_else(|e| Err(Failed::Agent(format!("starting the attempt panicked: {e}"))));
        match started {
            Ok(process) => {
                let group = process.as_ref().map(|p| p.pid() as i32);
                let running = self.table().get_mut(&key).is_some_and(|attempt| {
                    attempt.launched(group);
                    let running = attempt.phase == Phase::Running;
                    if running {
                        // Under the table's lock: before any end report.
                        self.outbox.push(AgentReport::Started {
                            job: key.0,
                            attempt: key.1,
                        });
                    }
                    running
                });
                if !running && let Some(group) = group {
                    // Killed (or fenced) while it was being started.
                    send(group, Signal::KILL);
                }
                if let Some(process) = process {
                    self.watch_batch(key, process);
                }
            }
            Err(failed) => {
                tracing::error!(job = %key.0, attempt = key.1, "cannot start the attempt: {failed}");
                let begun = self.table().get_mut(&key).map(|attempt| {
                    attempt.launched(None);
                    match failed {
                        // The job's own fault (no such user, directory or
                        // interpreter): a script that never started exits 1.
                        Failed::Job(_) => attempt.batch_exited(
                            ExitStatus {
                                code: 1,
                                signal: None,
                            },
                            Instant::now(),
                        ),
                        // The agent's: the attempt is lost here, and runs
                        // elsewhere.
                        Failed::Agent(_) => attempt.begin_ending(Why::AgentFailure, Instant::now()),
                    }
                });
                if begun == Some(Begun::Now) {
                    self.tear_down(key);
                }
            }
        }
    }

    fn spawn_batch(&self, launch: &Launch) -> Result<JobProcess, Failed> {
        let job = &launch.job;
        let attempt = job
            .attempts
            .iter()
            .find(|a| a.number == launch.attempt)
            .ok_or_else(|| {
                Failed::Agent(format!("job {} has no attempt {}", job.id, launch.attempt))
            })?;
        let checkpoint_dir = self.checkpoint_dir(job.id);
        let user = self.job_user(job).map_err(Failed::Job)?;
        make_checkpoint_dir(
            &self.settings.checkpoint_root,
            &job.id.to_string(),
            user.as_ref(),
        )
        .map_err(|e| match e {
            // This node's fault: the attempt runs elsewhere.
            CheckpointDirError::Root { .. } => Failed::Agent(e.to_string()),
            CheckpointDirError::Unsafe { .. } | CheckpointDirError::Make { .. } => {
                Failed::Job(e.to_string())
            }
        })?;
        let cluster_name = self.cluster_name();
        let checkpoint_dir_text = checkpoint_dir.display().to_string();
        let mut env = batch_environment(&LaunchContext {
            job,
            attempt,
            node: &self.settings.node,
            cluster_name: &cluster_name,
            checkpoint_dir: &checkpoint_dir_text,
            base_env: &launch.script.environment,
            dispatched_by: launch.dispatched_by,
            topology: launch.topology.get(&self.settings.node),
        });
        self.add_agent_vars(&mut env);
        if login_vars::wants_login_environment(&env) {
            match login_account(&job.spec.user) {
                Some(account) => login_vars::add(&mut env, &account),
                None => tracing::warn!(
                    job = %job.id,
                    user = %job.spec.user,
                    "the job asked for its user's login environment, but this node does not know the user"
                ),
            }
        }
        let program = write_script(
            &self.settings.scripts_dir,
            job.id,
            attempt.number,
            &launch.script.script,
            user.as_ref(),
        )
        .map_err(|e| Failed::Job(e.to_string()))?;
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
            cgroup: self.made_attempt_cgroup((job.id, attempt.number)),
        };
        JobProcess::spawn(&spec).map_err(|e| Failed::Job(e.to_string()))
    }

    /// Waits for the batch script; its exit ends the attempt (what is left of
    /// it here, the tasks of steps still running and processes that escaped
    /// them, ends with it, as in Slurm) unless something else already was.
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
            let fenced = status.signal == Some(Signal::KILL)
                && this
                    .settings
                    .lease
                    .as_ref()
                    .is_some_and(|lease| lease.lapsed());
            let begun = this.table().get_mut(&key).map(|attempt| {
                if fenced {
                    attempt.batch_fenced(status, Instant::now())
                } else {
                    attempt.batch_exited(status, Instant::now())
                }
            });
            // Also when something else ended it first: its teardown waits for
            // this status, and looks again only after a pause that grows; a
            // second look now finishes it at once (only one look can finish).
            if matches!(begun, Some(Begun::Now | Begun::Already)) {
                this.tear_down(key);
            }
        });
    }
}
