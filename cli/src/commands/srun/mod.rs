//! `srun`: inside a job, asks the node's agent (over `CORRAL_STEP_SOCKET`) to
//! run the command on the allocation's nodes; from a login node, the job's
//! batch host's agent over QUIC (`--jobid`, or salloc's `SLURM_JOB_ID`), or,
//! outside any job, a new allocation that lasts as long as the step
//! ([`super::allocation`]). It prints the tasks' output as it
//! streams in, forwards the signals it gets (SIGINT, SIGTERM, SIGHUP, SIGQUIT,
//! SIGUSR1, SIGUSR2) to every task, and exits with the worst task's status.
//! The step itself runs in the agents: `srun` dying aborts it.

mod files;
mod output;
mod request;
mod terminal;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use corral_proto::agent::{read_frame, write_frame};
use corral_proto::step::{OutputStream, STEP_SOCKET_ENV, SrunRequest, StepControl, StepEvent};
use corral_state::slurm::signal::Signal;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::UnixStream;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use super::allocation::{self, Allocated, AllocationRequest, agent_link};
use crate::connection::{Cluster, Retry};
use crate::exit;
use crate::srun_args::SrunArgs;
use output::{NOT_STARTED, OutputPrinter, failure_message, task_code};
use request::InputSource;

/// srun's exit status for a refused option (getopt's, as sbatch's).
const SRUN_OPTION_ERROR: u8 = 255;

/// The signals srun passes on to the tasks.
const FORWARDED: [Signal; 6] = [
    Signal::HUP,
    Signal::INT,
    Signal(3),
    Signal::USR1,
    Signal::USR2,
    Signal::TERM,
];

/// Runs the step; the exit status is the worst task's. Inside a job the
/// node's agent takes it over the step socket; with `--jobid` (or
/// `SLURM_JOB_ID` from salloc) elsewhere, the job's batch host's agent over
/// QUIC; with neither, srun first creates an allocation for it.
pub async fn run(
    args: SrunArgs,
    connect: impl FnOnce() -> anyhow::Result<Cluster>,
) -> anyhow::Result<ExitCode> {
    let mut env: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let cwd = std::env::current_dir()
        .context("srun: the current directory is unreadable; pass --chdir")?
        .display()
        .to_string();
    let job_here = env
        .get("SLURM_JOB_ID")
        .and_then(|id| id.parse::<u64>().ok());
    let socket = env
        .get(STEP_SOCKET_ENV)
        .filter(|_| args.jobid.is_none() || args.jobid == job_here)
        .cloned();
    let in_job = args.jobid.or(job_here).is_some();
    match crate::srun_slurm_options::decide(&args.slurm_options, in_job) {
        Ok(decided) => {
            for warning in decided.warnings {
                eprintln!("{warning}");
            }
        }
        Err(refusal) => {
            eprintln!("{refusal}");
            return Ok(ExitCode::from(SRUN_OPTION_ERROR));
        }
    }
    if !in_job {
        return allocate_and_run(args, env, &cwd, connect).await;
    }
    if args.allocation.test_only {
        eprintln!(
            "srun: error: --test-only asks where a new allocation would start; this srun runs in job {}, so nothing is allocated (run it outside a job)",
            args.jobid.or(job_here).unwrap_or_default()
        );
        return Ok(ExitCode::from(exit::USAGE));
    }
    if args.jobid.is_some() && args.jobid != job_here {
        // This shell's attempt is another job's.
        env.remove("CORRAL_ATTEMPT");
    }
    let request = match request::build(&args, &env, &cwd) {
        Ok(request) => request,
        Err(message) => {
            eprintln!("srun: error: {message}");
            return Ok(ExitCode::from(exit::USAGE));
        }
    };
    for warning in args.ignored(true) {
        eprintln!("{warning}");
    }
    if let Some(socket) = socket {
        let stream = UnixStream::connect(&socket)
            .await
            .with_context(|| format!("srun: cannot reach this node's agent at {socket}"))?;
        let (reader, writer) = stream.into_split();
        let worst = drive(reader, writer, request, &args, "this node's agent").await?;
        return Ok(ExitCode::from(worst));
    }
    // A running job reached from outside it (a login node, or salloc's shell).
    let cluster = connect()?;
    let (job, _) = super::jobs::fetch(&cluster, request.job.0).await?;
    let node = match agent_link::batch_host(&job) {
        Ok(node) => node.to_string(),
        Err(e) => {
            eprintln!("srun: error: {e:#}");
            return Ok(ExitCode::from(exit::REFUSED));
        }
    };
    let link = agent_link::connect(&cluster, &node).await?;
    let (send, recv) = link.open().await?;
    let what = format!("the agent of {node}");
    let worst = drive(recv, send, request, &args, &what).await?;
    Ok(ExitCode::from(worst))
}

/// `srun` outside a job: an allocation with the step's options, the step in
/// it, and the allocation ended with the step's status.
async fn allocate_and_run(
    args: SrunArgs,
    mut env: BTreeMap<String, String>,
    cwd: &str,
    connect: impl FnOnce() -> anyhow::Result<Cluster>,
) -> anyhow::Result<ExitCode> {
    // Refuse what the step cannot do before allocating anything.
    let mut probe = env.clone();
    probe.insert("SLURM_JOB_ID".into(), "0".into());
    if let Err(message) = request::build(&args, &probe, cwd) {
        eprintln!("srun: error: {message}");
        return Ok(ExitCode::from(exit::USAGE));
    }
    for warning in args.ignored(false) {
        eprintln!("{warning}");
    }
    // The allocation's options, refused here as sbatch would refuse them.
    if let Err(e) = corral_state::slurm::sbatch::parse_args(&args.allocation_options()) {
        let (text, status) = super::submit::option_error("srun", &e);
        eprintln!("{text}");
        return Ok(ExitCode::from(status));
    }
    let cluster = connect()?;
    if args.allocation.test_only {
        return test_only(&cluster, &args).await;
    }
    let request = AllocationRequest {
        program: "srun",
        options: args.allocation_options(),
        command: args.command.join(" "),
        quiet: args.allocation.quiet,
    };
    let allocation = match allocation::create(&cluster, request).await? {
        Allocated::Running(allocation) => allocation,
        Allocated::NotStarted(code) => return Ok(code),
    };
    // The step's defaults are the allocation's, as in a batch script.
    env.extend(allocation.environment.clone());
    env.insert("CORRAL_ATTEMPT".into(), allocation.attempt.to_string());
    let worst = match request::build(&args, &env, cwd) {
        Ok(request) => {
            let node = allocation.link.node.clone();
            match allocation.link.open().await {
                Ok((send, recv)) => {
                    let what = format!("the agent of {node}");
                    drive(recv, send, request, &args, &what).await?
                }
                Err(e) => {
                    eprintln!("srun: error: {e:#}");
                    1
                }
            }
        }
        Err(message) => {
            eprintln!("srun: error: {message}");
            1
        }
    };
    allocation.release(&cluster, worst).await;
    Ok(ExitCode::from(worst))
}

/// `srun --test-only` outside a job: where and when the allocation would
/// start, in Slurm's words; nothing is submitted.
async fn test_only(cluster: &Cluster, args: &SrunArgs) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let request = corral_proto::api::SubmitJobRequest {
        args: args.allocation_options(),
        script_path: args.command.join(" "),
        script_text: allocation::holder::script(),
        test_only: true,
        ..super::submit::from_this_shell(&cwd)
    };
    let reply = match cluster
        .call(Retry::Idempotent, |mut client| {
            let request = request.clone();
            async move { client.submit_job(request).await }
        })
        .await
    {
        Ok(reply) => reply,
        Err(error) if exit::code_for(&error) == exit::REFUSED => {
            eprintln!("srun: error: Unable to allocate resources: {error:#}");
            return Ok(ExitCode::from(1));
        }
        Err(error) => return Err(error),
    };
    match &reply.test_only {
        Some(estimate) => eprintln!("srun: {}", super::submit::test_only_line(estimate)),
        None => eprintln!("srun: {}", reply.test_only_report),
    }
    Ok(ExitCode::SUCCESS)
}

/// Sends the step request on `writer`, prints its output and exits as they
/// stream in on `reader`, and forwards srun's signals; returns the worst
/// task's status. `agent` names the agent in errors.
async fn drive<R, W>(
    mut reader: R,
    mut writer: W,
    mut request: SrunRequest,
    args: &SrunArgs,
    agent: &str,
) -> anyhow::Result<u8>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin,
{
    // The input's source is opened before anything starts, and read once the
    // step has (a refused step consumes none of it).
    let source: Option<Box<dyn std::io::Read + Send>> =
        match request::input(args.input.as_deref()).1 {
            InputSource::Stdin if in_background() => None,
            InputSource::Stdin => Some(Box::new(std::io::stdin())),
            InputSource::File(path) => match std::fs::File::open(&path) {
                Ok(file) => Some(Box::new(file)),
                Err(e) => {
                    eprintln!("srun: error: Could not open stdin file {path}: {e}");
                    return Ok(exit::USAGE);
                }
            },
            InputSource::Nothing => None,
        };
    let mut source = source;
    let mut input = None;
    // `--pty`: task 0's terminal takes this one's size, and this one's keys
    // as typed until the step ends.
    let mut raw_terminal = None;
    let mut resized = None;
    if request.pty.is_some() {
        request.pty = Some(terminal::size());
        raw_terminal = terminal::RawTerminal::enter();
        if raw_terminal.is_some() {
            resized =
                Some(signal(SignalKind::window_change()).context("srun: cannot catch SIGWINCH")?);
        }
    }
    let job_id = request.job.0;
    let local = files::redirection(args.output.as_deref(), args.error.as_deref()).local;
    write_frame(&mut writer, &StepControl::Run(Box::new(request))).await?;
    let (events_tx, mut events) = mpsc::channel::<StepEvent>(256);
    tokio::spawn(async move {
        while let Ok(Some(event)) = read_frame::<_, StepEvent>(&mut reader).await {
            if events_tx.send(event).await.is_err() {
                return;
            }
        }
    });
    let mut signals = forward_signals()?;
    let kill_on_bad_exit = args.kill_on_bad_exit.unwrap_or(0) != 0;
    let mut printer = OutputPrinter::new(args.label, 1);
    let mut worst = 0i32;
    let mut killing = false;
    let (mut stdout, mut stderr): (Box<dyn Write>, Box<dyn Write>) =
        (Box::new(std::io::stdout()), Box::new(std::io::stderr()));
    let finished = loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { break false };
                let mut bad_exit = false;
                match event {
                    StepEvent::Started(layout) => {
                        printer = OutputPrinter::new(args.label, layout.ntasks());
                        input = source.take().map(read_input);
                        let env: BTreeMap<String, String> = std::env::vars().collect();
                        match files::open_local(&local, (job_id, layout.step), &env) {
                            Ok((out, err)) => {
                                if let Some(file) = out {
                                    stdout = Box::new(file);
                                }
                                if let Some(file) = err {
                                    stderr = Box::new(file);
                                }
                            }
                            Err(message) => {
                                eprintln!("srun: error: {message}");
                                let _ = write_frame(&mut writer, &StepControl::Signal(Signal::KILL)).await;
                                return Ok(1);
                            }
                        }
                    }
                    StepEvent::Output { task, stream, data } => {
                        let out: &mut dyn Write = match stream {
                            OutputStream::Stdout => &mut stdout,
                            OutputStream::Stderr => &mut stderr,
                        };
                        let _ = printer.write(task, stream, &data, out);
                    }
                    StepEvent::TaskExited { task, node, status } => {
                        let _ = printer.finish(task, OutputStream::Stdout, &mut stdout);
                        let _ = printer.finish(task, OutputStream::Stderr, &mut stderr);
                        if let Some(message) = failure_message(&node, task, &status) {
                            eprintln!("{message}");
                            bad_exit = true;
                        }
                        worst = worst.max(task_code(&status));
                    }
                    StepEvent::TaskFailed { task, node, message } => {
                        eprintln!("srun: error: {node}: task {task}: {message}");
                        worst = worst.max(NOT_STARTED);
                        bad_exit = true;
                    }
                    StepEvent::NodeLost { node, message } => {
                        eprintln!("srun: error: {node}: {message}");
                        worst = worst.max(1);
                        bad_exit = true;
                    }
                    StepEvent::Refused(reason) => {
                        eprintln!("srun: error: {reason}");
                        return Ok(exit::REFUSED);
                    }
                    StepEvent::Finished => break true,
                    // Answers to checkpoints, allocation holds and other
                    // agents; never part of a step.
                    StepEvent::Accepted
                    | StepEvent::Held(_)
                    | StepEvent::Attached { .. }
                    | StepEvent::Usage(_)
                    | StepEvent::Released(..)
                    | StepEvent::Reach { .. } => {}
                }
                if bad_exit && kill_on_bad_exit && !killing {
                    killing = true;
                    eprintln!("srun: error: a task failed and --kill-on-bad-exit is set; killing the others");
                    let _ = write_frame(&mut writer, &StepControl::Signal(Signal::KILL)).await;
                }
            }
            Some(signal) = signals.recv() => {
                if write_frame(&mut writer, &StepControl::Signal(signal)).await.is_err() {
                    break false;
                }
            }
            Some(()) = next_resize(&mut resized) => {
                let frame = StepControl::Resize(terminal::size());
                if write_frame(&mut writer, &frame).await.is_err() {
                    break false;
                }
            }
            piece = next_piece(&mut input), if input.is_some() => {
                let frame = match piece {
                    Some(piece) => StepControl::Stdin(piece),
                    None => {
                        input = None;
                        StepControl::StdinEnd
                    }
                };
                if write_frame(&mut writer, &frame).await.is_err() {
                    break false;
                }
            }
        }
    };
    drop(raw_terminal);
    if !finished {
        eprintln!("srun: error: lost {agent} before the step finished");
        worst = worst.max(1);
    }
    Ok(u8::try_from(worst.clamp(0, 255)).unwrap_or(u8::MAX))
}

/// How much input one frame carries at most.
const INPUT_CHUNK: usize = 64 * 1024;

/// The tasks' input (srun's standard input, or the file `--input` names),
/// read on a thread of its own (a read from a terminal blocks, and must not
/// keep the process from exiting), in pieces; the channel closes at its end.
fn read_input(mut source: Box<dyn std::io::Read + Send>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel(4);
    std::thread::spawn(move || {
        let mut buffer = vec![0u8; INPUT_CHUNK];
        loop {
            match source.read(&mut buffer) {
                Ok(0) => return,
                Ok(read) => {
                    if tx.blocking_send(buffer[..read].to_vec()).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    if e.raw_os_error() != Some(nix::libc::EIO) {
                        eprintln!(
                            "srun: error: reading standard input: {e}; the tasks' input ends here"
                        );
                    }
                    return;
                }
            }
        }
    });
    rx
}

/// Whether this srun runs in the background of an interactive shell (its
/// standard input is the terminal, which another process group holds): a
/// read from it would stop srun, so the tasks get no input (Slurm's srun
/// reads an end of input there).
fn in_background() -> bool {
    let stdin = std::io::stdin();
    std::io::IsTerminal::is_terminal(&stdin)
        && nix::unistd::tcgetpgrp(&stdin).is_ok_and(|group| group != nix::unistd::getpgrp())
}

/// The next change of srun's terminal's size (never without `--pty` on a
/// terminal).
async fn next_resize(resized: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match resized {
        Some(signal) => signal.recv().await,
        None => std::future::pending().await,
    }
}

/// The next piece of input; `None` at its end.
async fn next_piece(input: &mut Option<mpsc::Receiver<Vec<u8>>>) -> Option<Vec<u8>> {
    match input {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Listens for the signals srun forwards.
fn forward_signals() -> anyhow::Result<mpsc::Receiver<Signal>> {
    let (tx, rx) = mpsc::channel(16);
    for forwarded in FORWARDED {
        let mut stream = signal(SignalKind::from_raw(i32::from(forwarded.0)))
            .with_context(|| format!("srun: cannot catch {}", forwarded.name()))?;
        let tx = tx.clone();
        tokio::spawn(async move {
            while stream.recv().await.is_some() {
                if tx.send(forwarded).await.is_err() {
                    return;
                }
            }
        });
    }
    Ok(rx)
}
