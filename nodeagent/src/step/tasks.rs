//! Running one node's share of a step: its tasks, each in its own process group
//! under the attempt (so a kill, an XID or fencing ends them with the job), as
//! the job's user, with `srun`'s environment overlaid with the task's `SLURM_*`
//! values; their output and exits become [`StepEvent`]s.
//!
//! The share ends with exactly one terminal event: `Finished` once every task
//! has ended and its group is empty, or `NodeLost` when the attempt no longer
//! runs here. Closing the control channel aborts the share: SIGTERM to every
//! task, SIGKILL [`ABORT_GRACE`] later (`srun` went away, or the coordinating
//! agent did).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_proto::step::{OutputStream, StepEvent, StepLaunch, TaskFiles, TerminalSize};
use corral_state::job::ExitStatus;
use corral_state::slurm::signal::Signal;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

use crate::job::environment::layout::placements;
use crate::job::environment::{LaunchContext, task_environment};
use crate::job::process::{JobProcess, TaskIo, TaskOutput, TaskSpec, task_output_paths};
use crate::supervisor::{AttemptKey, Supervisor, TaskId};

/// Between SIGTERM and SIGKILL when a step is aborted.
pub const ABORT_GRACE: Duration = Duration::from_secs(5);

/// How long a task's output may keep flowing after its process group is gone.
const DRAIN: Duration = Duration::from_secs(2);

/// How much output one event carries at most.
const CHUNK_BYTES: usize = 64 * 1024;

/// `srun`'s standard input as it reaches a node's share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputPiece {
    /// A piece of it.
    Data(Vec<u8>),
    /// Its end.
    End,
    /// `srun --pty`'s terminal has this size now.
    Resize(TerminalSize),
}

/// Runs this node's tasks of `launch` in attempt `key`, sending their output
/// and exits to `events`, forwarding the signals received on `control`, and
/// writing `input` to the tasks the step's input reaches.
pub async fn run_node_share(
    supervisor: Supervisor,
    key: AttemptKey,
    launch: StepLaunch,
    events: mpsc::Sender<StepEvent>,
    mut control: mpsc::Receiver<Signal>,
    input: mpsc::UnboundedReceiver<InputPiece>,
) {
    let node = supervisor.node().to_string();
    let lost = |message: String| StepEvent::NodeLost {
        node: node.clone(),
        message,
    };
    let Some(attempt_launch) = supervisor.step_attempt(key) else {
        let message = format!(
            "job {} attempt {} no longer runs on {node} (it ended or was requeued)",
            key.0, key.1
        );
        let _ = events.send(lost(message)).await;
        return;
    };
    let job = &attempt_launch.job;
    let Some(attempt) = job.attempts.iter().find(|a| a.number == key.1) else {
        let _ = events
            .send(lost(format!("job {} has no attempt {}", key.0, key.1)))
            .await;
        return;
    };
    let failed = |task: u32, message: String| StepEvent::TaskFailed {
        task,
        node: node.clone(),
        message,
    };
    let user = supervisor.job_user(job);
    let cgroup = supervisor.made_attempt_cgroup(key);
    let cluster_name = supervisor.cluster_name();
    let checkpoint_dir = supervisor.checkpoint_dir(job.id).display().to_string();
    let mut running: JoinSet<(u32, ExitStatus)> = JoinSet::new();
    // Live tasks' groups, by rank.
    let mut groups: BTreeMap<u32, i32> = BTreeMap::new();
    let mut stdins = Vec::new();
    // Task 0's terminal (`srun --pty`), to resize.
    let mut terminal = None;
    for task in placements(&launch.layout, &node) {
        let user = match &user {
            Ok(user) => user.clone(),
            Err(message) => {
                let _ = events.send(failed(task.procid, message.clone())).await;
                continue;
            }
        };
        let Some((program, args)) = launch.argv.split_first() else {
            let _ = events
                .send(failed(task.procid, "no command to run".into()))
                .await;
            continue;
        };
        let ctx = LaunchContext {
            job,
            attempt,
            node: &node,
            cluster_name: &cluster_name,
            checkpoint_dir: &checkpoint_dir,
            base_env: &launch.env,
            dispatched_by: attempt_launch.dispatched_by,
            topology: attempt_launch.topology.get(&node),
        };
        let mut env = task_environment(&ctx, &launch.layout, task);
        supervisor.add_agent_vars(&mut env);
        let spec = TaskSpec {
            program: PathBuf::from(program),
            args: args.to_vec(),
            env,
            workdir: PathBuf::from(&launch.workdir),
            user,
            cgroup: cgroup.clone(),
            io: match launch.pty {
                Some(size) if task.procid == 0 => TaskIo::Terminal(size),
                Some(_) => TaskIo::Discarded,
                None if launch.files == TaskFiles::default() => TaskIo::Pipes {
                    input: launch.input.reaches(task.procid),
                },
                None => {
                    let (stdout, stderr) = task_output_paths(
                        job,
                        &launch.files,
                        (&node, launch.layout.step, task.procid),
                        Path::new(&launch.workdir),
                    );
                    TaskIo::Files {
                        stdout,
                        stderr,
                        input: launch.input.reaches(task.procid),
                    }
                }
            },
        };
        if !supervisor.begin_task(key) {
            let message = format!("job {} is ending; the task was not started", key.0);
            let _ = events.send(failed(task.procid, message)).await;
            continue;
        }
        // Off the runtime: opening output files as the user runs a helper
        // process, and an open may wait (a hung mount).
        let spawned = {
            let task_spec = spec.clone();
            tokio::task::spawn_blocking(move || JobProcess::spawn_task(&task_spec))
                .await
                .unwrap_or_else(|e| {
                    Err(crate::job::process::ProcessError::Spawn {
                        program: spec.program.clone(),
                        workdir: spec.workdir.clone(),
                        source: std::io::Error::other(format!("starting the task panicked: {e}")),
                    })
                })
        };
        match spawned {
            Err(e) => {
                supervisor.task_not_started(key);
                let _ = events.send(failed(task.procid, e.to_string())).await;
            }
            Ok((process, mut output)) => {
                if let Some(stdin) = output.stdin.take() {
                    stdins.push(Box::new(stdin) as TaskStdin);
                }
                if let Some(master) = &output.terminal {
                    terminal = master.try_clone().ok();
                    match master.try_clone() {
                        Ok(writer) => {
                            stdins.push(Box::new(tokio::fs::File::from_std(writer)) as TaskStdin)
                        }
                        Err(e) => {
                            tracing::warn!(job = %key.0, "the task's terminal takes no input: {e}")
                        }
                    }
                }
                let group = process.pid() as i32;
                let id = TaskId {
                    step: launch.layout.step,
                    rank: task.procid,
                    local: task.localid,
                };
                if !supervisor.task_started(key, group, id) {
                    let _ = process.kill();
                }
                groups.insert(task.procid, group);
                let readers = read_output(output, task.procid, &events);
                running.spawn(watch_task(
                    supervisor.clone(),
                    key,
                    process,
                    readers,
                    task.procid,
                ));
            }
        }
    }
    let writer = tokio::spawn(write_input(input, stdins, terminal));
    let mut control_open = true;
    loop {
        tokio::select! {
            done = running.join_next() => match done {
                None => break,
                Some(Ok((task, status))) => {
                    groups.remove(&task);
                    let _ = events
                        .send(StepEvent::TaskExited { task, node: node.clone(), status })
                        .await;
                }
                Some(Err(e)) => tracing::error!(job = %key.0, "a task watcher failed: {e}"),
            },
            signal = control.recv(), if control_open => match signal {
                Some(signal) => {
                    let live: Vec<i32> = groups.values().copied().collect();
                    supervisor.signal_tasks(key, &live, signal);
                }
                None => {
                    control_open = false;
                    abort(&supervisor, key, groups.values().copied().collect());
                }
            },
        }
    }
    writer.abort();
    let _ = events.send(StepEvent::Finished).await;
}

/// Gives a task's terminal a new size; the kernel tells its foreground
/// programs (SIGWINCH).
fn resize(terminal: &std::fs::File, size: TerminalSize) {
    let winsize = rustix::termios::Winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    if let Err(e) = rustix::termios::tcsetwinsize(terminal, winsize) {
        tracing::warn!("cannot resize a task's terminal: {e}");
    }
}

/// Where a task's input is written: its stdin pipe, or its terminal.
type TaskStdin = Box<dyn tokio::io::AsyncWrite + Unpin + Send>;

/// How much input may wait for one task that does not read it; past this,
/// more input to that task is dropped (and said in the agent's log), so that
/// a task ignoring its input never holds up the step's signals or srun.
const TASK_INPUT_CAP: usize = 16 << 20;

/// Hands each piece of `input` to a writer per task of `stdins`, each with a
/// queue of its own, so a task that does not read holds up no other; a
/// task's input is closed at the input's end. Dropping the returned set (the
/// share ended) stops the writers, even one blocked on a pipe that a process
/// outside the task still holds.
async fn write_input(
    mut input: mpsc::UnboundedReceiver<InputPiece>,
    stdins: Vec<TaskStdin>,
    terminal: Option<std::fs::File>,
) {
    let mut writers = JoinSet::new();
    let mut queues = Vec::new();
    for stdin in stdins {
        let (tx, rx) = mpsc::unbounded_channel::<std::sync::Arc<[u8]>>();
        let queued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        writers.spawn(feed_task(stdin, rx, std::sync::Arc::clone(&queued)));
        queues.push((tx, queued, false));
    }
    while let Some(piece) = input.recv().await {
        let piece: std::sync::Arc<[u8]> = match piece {
            InputPiece::Data(data) => data.into(),
            InputPiece::End => break,
            InputPiece::Resize(size) => {
                if let Some(terminal) = &terminal {
                    resize(terminal, size);
                }
                continue;
            }
        };
        for (tx, queued, warned) in &mut queues {
            let waiting = queued.load(std::sync::atomic::Ordering::Relaxed);
            if waiting.saturating_add(piece.len()) > TASK_INPUT_CAP {
                if !*warned {
                    *warned = true;
                    tracing::warn!(
                        "a task does not read its input; more than {TASK_INPUT_CAP} bytes wait for it, and further input to it is dropped"
                    );
                }
                continue;
            }
            queued.fetch_add(piece.len(), std::sync::atomic::Ordering::Relaxed);
            let _ = tx.send(std::sync::Arc::clone(&piece));
        }
    }
    // The end of the input: each writer closes its task's input once it has
    // written what is queued.
    drop(queues);
    while writers.join_next().await.is_some() {}
}

/// Writes the pieces queued for one task into its input, then closes it (a
/// terminal's writer only: the terminal stays open for the task's output,
/// and its input ends when the user types Ctrl-D, as in Slurm).
async fn feed_task(
    mut stdin: TaskStdin,
    mut pieces: mpsc::UnboundedReceiver<std::sync::Arc<[u8]>>,
    queued: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use tokio::io::AsyncWriteExt;
    while let Some(piece) = pieces.recv().await {
        queued.fetch_sub(piece.len(), std::sync::atomic::Ordering::Relaxed);
        if stdin.write_all(&piece).await.is_err() {
            return;
        }
    }
    let _ = stdin.flush().await;
}

/// SIGTERM now and SIGKILL after [`ABORT_GRACE`] to those of `groups` that
/// still run then.
fn abort(supervisor: &Supervisor, key: AttemptKey, groups: Vec<i32>) {
    supervisor.signal_tasks(key, &groups, Signal::TERM);
    let supervisor = supervisor.clone();
    tokio::spawn(async move {
        tokio::time::sleep(ABORT_GRACE).await;
        supervisor.signal_tasks(key, &groups, Signal::KILL);
    });
}

/// Waits for a task's leader, ends what it left in its group, waits for the
/// group to be empty (only then does the attempt forget it), lets its output
/// drain for at most [`DRAIN`] (a process that escaped the group may hold the
/// pipes open), and returns its exit.
async fn watch_task(
    supervisor: Supervisor,
    key: AttemptKey,
    mut process: JobProcess,
    readers: Vec<JoinHandle<()>>,
    task: u32,
) -> (u32, ExitStatus) {
    let status = match process.wait().await {
        Ok(status) => status,
        Err(e) => {
            tracing::error!(job = %key.0, task, "waiting for a task: {e}");
            ExitStatus {
                code: 1,
                signal: None,
            }
        }
    };
    let _ = process.kill();
    let mut pause = Duration::from_millis(2);
    while process.group_alive() {
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    supervisor.task_gone(key, process.pid() as i32);
    let deadline = tokio::time::Instant::now() + DRAIN;
    for mut reader in readers {
        if tokio::time::timeout_at(deadline, &mut reader)
            .await
            .is_err()
        {
            reader.abort();
        }
    }
    (task, status)
}

/// Forwards a task's output to `events` until both pipes close.
fn read_output(
    output: TaskOutput,
    task: u32,
    events: &mpsc::Sender<StepEvent>,
) -> Vec<JoinHandle<()>> {
    let mut readers = Vec::new();
    if let Some(stdout) = output.stdout {
        readers.push(tokio::spawn(forward(
            stdout,
            task,
            OutputStream::Stdout,
            events.clone(),
        )));
    }
    if let Some(stderr) = output.stderr {
        readers.push(tokio::spawn(forward(
            stderr,
            task,
            OutputStream::Stderr,
            events.clone(),
        )));
    }
    if let Some(terminal) = output.terminal {
        // One stream: what the terminal shows. Its end reads as an error
        // (EIO) once the task's session has closed it.
        readers.push(tokio::spawn(forward(
            tokio::fs::File::from_std(terminal),
            task,
            OutputStream::Stdout,
            events.clone(),
        )));
    }
    readers
}

/// Reads `pipe` to its end. When nobody listens any more the output is read
/// and dropped, so the task never blocks on a full pipe.
async fn forward<R: AsyncRead + Unpin>(
    mut pipe: R,
    task: u32,
    stream: OutputStream,
    events: mpsc::Sender<StepEvent>,
) {
    let mut buffer = vec![0u8; CHUNK_BYTES];
    let mut listening = true;
    loop {
        let read = match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        if listening {
            let event = StepEvent::Output {
                task,
                stream,
                data: buffer[..read].to_vec(),
            };
            listening = events.send(event).await.is_ok();
        }
    }
}
