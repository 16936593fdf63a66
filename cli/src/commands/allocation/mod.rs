//! Allocations from a login node, for `srun` outside a job and `salloc`: a
//! job is submitted with the allocation's options and a batch script that only
//! holds it (`corral allocation-hold`, [`holder`]); once it runs, the command
//! attaches to its batch host's agent over QUIC ([`agent_link`]), runs its
//! steps or its shell, and releases the allocation with its exit status, which
//! the holder exits with: the job ends COMPLETED, or FAILED with that exit
//! code, as Slurm ends an interactive job.
//!
//! It prints what srun and salloc print (`job N queued and waiting for
//! resources`, ...). An interrupt while the job waits cancels it; the job
//! ending under the command (cancelled, time limit, node failure) revokes the
//! allocation.

pub mod agent_link;
pub mod holder;

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{Context, anyhow};
use corral_proto::agent::{read_frame, write_frame};
use corral_proto::api::{CancelJobsRequest, SubmitJobRequest};
use corral_proto::step::{StepControl, StepEvent};
use corral_state::ids::{AttemptNumber, JobId};
use corral_state::job::{Job, JobState};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use crate::connection::{Cluster, Retry};
use agent_link::AgentLink;

/// What to allocate.
#[derive(Debug, Clone)]
pub struct AllocationRequest {
    /// `srun` or `salloc`: the prefix of every line printed.
    pub program: &'static str,
    /// The allocation's options, in sbatch's words (`--nodes=2`, ...).
    pub options: Vec<String>,
    /// What the allocation runs, shown as the job's command.
    pub command: String,
    /// `-Q/--quiet`: print errors only.
    pub quiet: bool,
}

/// A running allocation this command holds.
pub struct Allocation {
    /// The job as it was when it started.
    pub job: Job,
    /// The attempt held.
    pub attempt: AttemptNumber,
    /// The job-wide `SLURM_*` variables, as the batch script has them.
    pub environment: BTreeMap<String, String>,
    /// The batch host's agent.
    pub link: AgentLink,
    /// The hold: releasing writes the exit status on it.
    hold: quinn::SendStream,
    /// Becomes `Some(why)` when the allocation ends under the command.
    pub revoked: watch::Receiver<Option<String>>,
    program: &'static str,
}

/// What came of asking for an allocation.
pub enum Allocated {
    /// It runs, held by this command.
    Running(Box<Allocation>),
    /// It did not start (refused, cancelled, interrupted): exit with this
    /// status; what happened was printed.
    NotStarted(ExitCode),
}

/// Submits the allocation, waits for it to start and attaches to it.
pub async fn create(cluster: &Cluster, request: AllocationRequest) -> anyhow::Result<Allocated> {
    let program = request.program;
    // Caught from before the job exists, so an interrupt never leaves one behind.
    let mut interrupts = Interrupts::catch()?;
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    // The holder prints nothing worth a file in the user's directory, and
    // runs where every node has a directory.
    let mut options = request.options.clone();
    options.extend(["--output=/dev/null".to_string(), "--chdir=/".to_string()]);
    let submission = SubmitJobRequest {
        args: options,
        script_path: request.command.clone(),
        script_text: holder::script(),
        // scontrol's Command=: srun's program; salloc's is (null), as Slurm's.
        command: match program {
            "srun" => request
                .command
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string(),
            _ => String::new(),
        },
        ..super::submit::from_this_shell(&cwd)
    };
    let reply = match cluster
        .call(Retry::Idempotent, |mut client| {
            let submission = submission.clone();
            async move { client.submit_job(submission).await }
        })
        .await
    {
        Ok(reply) => reply,
        Err(error) if crate::exit::code_for(&error) == crate::exit::REFUSED => {
            let what = if program == "salloc" {
                "Job submit/allocate failed"
            } else {
                "Unable to allocate resources"
            };
            eprintln!("{program}: error: {what}: {error:#}");
            return Ok(Allocated::NotStarted(ExitCode::from(1)));
        }
        Err(error) => return Err(error),
    };
    for warning in &reply.warnings {
        eprintln!("{program}: warning: {warning}");
    }
    let id = reply.first_job_id;
    let say = |line: String| {
        if !request.quiet {
            eprintln!("{program}: {line}");
        }
    };
    if program == "salloc" {
        say(format!("Pending job allocation {id}"));
    }
    say(format!("job {id} queued and waiting for resources"));
    let started = tokio::select! {
        job = super::wait::until(cluster, id, |j| j.state == JobState::Running) => match job {
            Ok(job) => job,
            Err(error) => {
                give_up(cluster, program, id).await;
                return Err(error);
            }
        },
        () = interrupts.recv() => {
            give_up(cluster, program, id).await;
            return Ok(Allocated::NotStarted(ExitCode::from(1)));
        }
    };
    if started.state != JobState::Running {
        eprintln!(
            "{program}: error: Job allocation {id} has been revoked: the job is {} (`scontrol show job {id}` says why)",
            started.state.slurm_name(),
        );
        return Ok(Allocated::NotStarted(ExitCode::from(1)));
    }
    say(format!("job {id} has been allocated resources"));
    let attached = tokio::select! {
        attached = attach(cluster, started, program) => attached,
        () = interrupts.recv() => {
            give_up(cluster, program, id).await;
            return Ok(Allocated::NotStarted(ExitCode::from(1)));
        }
    };
    match attached {
        Ok(allocation) => {
            if program == "salloc" {
                say(format!("Granted job allocation {id}"));
            }
            Ok(Allocated::Running(Box::new(allocation)))
        }
        Err(error) => {
            eprintln!("{program}: error: {error:#}");
            give_up(cluster, program, id).await;
            Ok(Allocated::NotStarted(ExitCode::from(1)))
        }
    }
}

/// Cancels job `id`, which this command no longer waits for, and says so
/// (or how to cancel it, when the cluster could not be told).
async fn give_up(cluster: &Cluster, program: &str, id: u64) {
    if cancel(cluster, id).await {
        eprintln!("{program}: Job allocation {id} has been revoked.");
    } else {
        eprintln!(
            "{program}: error: could not cancel job {id}, which may still be queued: run `scancel {id}`"
        );
    }
}

/// Attaches to the running job's batch host.
async fn attach(cluster: &Cluster, job: Job, program: &'static str) -> anyhow::Result<Allocation> {
    let node = agent_link::batch_host(&job)?.to_string();
    let link = agent_link::connect(cluster, &node).await?;
    let (mut hold, mut events) = link.open().await?;
    write_frame(&mut hold, &StepControl::Attach { job: job.id }).await?;
    let (attempt, environment) = match read_frame::<_, StepEvent>(&mut events).await {
        Ok(Some(StepEvent::Attached {
            attempt,
            environment,
        })) => (attempt, environment),
        Ok(Some(StepEvent::Refused(reason))) => {
            return Err(anyhow!(
                "the agent of {node} refused the allocation: {reason}"
            ));
        }
        Ok(other) => {
            return Err(anyhow!(
                "the agent of {node} answered the allocation with {other:?}"
            ));
        }
        Err(e) => return Err(anyhow!("lost the agent of {node}: {e}")),
    };
    let (revoke, revoked) = watch::channel(None);
    tokio::spawn(async move {
        let why = match read_frame::<_, StepEvent>(&mut events).await {
            Ok(Some(StepEvent::Released(_, why))) => why,
            Ok(None) => return, // released by us
            _ => None,
        };
        let _ = revoke.send(Some(why.unwrap_or_else(|| "its agent went away".into())));
    });
    Ok(Allocation {
        job,
        attempt,
        environment,
        link,
        hold,
        revoked,
        program,
    })
}

impl Allocation {
    /// The job's id.
    pub fn id(&self) -> JobId {
        self.job.id
    }

    /// Ends the allocation with the command's exit status and waits (a little)
    /// for the job to end, so that squeue and sacct show it ended as soon as
    /// this command returns.
    pub async fn release(mut self, cluster: &Cluster, code: u8) {
        let id = self.job.id.0;
        if self.revoked.borrow().is_none() {
            let sent = write_frame(&mut self.hold, &StepControl::Release(code)).await;
            let _ = self.hold.finish();
            // Closing the connection drops what the agent has not acknowledged.
            let _ = tokio::time::timeout(RELEASE_PATIENCE, self.hold.stopped()).await;
            if let Err(e) = sent {
                eprintln!(
                    "{}: error: could not release job {id} on {}: {e}; it ends with its time limit, or `scancel {id}`",
                    self.program, self.link.node
                );
                return;
            }
        }
        let ended = super::wait::until(cluster, id, |j| j.state.is_terminal());
        let _ = tokio::time::timeout(RELEASE_PATIENCE, ended).await;
        self.link.connection.close(0u32.into(), b"released");
    }
}

/// How long a released allocation's command waits for its job to end.
const RELEASE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// SIGINT, SIGTERM, SIGHUP (the terminal closed) and SIGQUIT, caught while
/// the allocation is being made: each gives it up.
struct Interrupts {
    signals: Vec<tokio::signal::unix::Signal>,
}

impl Interrupts {
    fn catch() -> anyhow::Result<Interrupts> {
        let kinds = [
            ("SIGINT", SignalKind::interrupt()),
            ("SIGTERM", SignalKind::terminate()),
            ("SIGHUP", SignalKind::hangup()),
            ("SIGQUIT", SignalKind::quit()),
        ];
        let signals = kinds
            .into_iter()
            .map(|(name, kind)| signal(kind).with_context(|| format!("cannot catch {name}")))
            .collect::<anyhow::Result<_>>()?;
        Ok(Interrupts { signals })
    }

    /// The next one.
    async fn recv(&mut self) {
        let waits = self.signals.iter_mut().map(|s| Box::pin(s.recv()));
        let mut waits: Vec<_> = waits.collect();
        std::future::poll_fn(|cx| {
            for wait in &mut waits {
                if wait.as_mut().poll(cx).is_ready() {
                    return std::task::Poll::Ready(());
                }
            }
            std::task::Poll::Pending
        })
        .await;
    }
}

/// Cancels job `id`; whether the cluster took it (cancelling twice is
/// harmless, so it is retried like a read).
async fn cancel(cluster: &Cluster, id: u64) -> bool {
    let request = CancelJobsRequest {
        jobs: vec![id.to_string()],
        ..CancelJobsRequest::default()
    };
    cluster
        .call(Retry::Idempotent, |mut c| {
            let request = request.clone();
            async move { c.cancel_jobs(request).await }
        })
        .await
        .is_ok_and(|reply| reply.errors.is_empty())
}
