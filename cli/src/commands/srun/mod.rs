//! `srun` inside a job: asks the node's agent (over `CORRAL_STEP_SOCKET`) to
//! run the command on the allocation's nodes, prints the tasks' output as it
//! streams in, forwards the signals it gets (SIGINT, SIGTERM, SIGHUP, SIGQUIT,
//! SIGUSR1, SIGUSR2) to every task, and exits with the worst task's status.
//! The step itself runs in the agents: `srun` dying aborts it.

mod output;
mod request;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use corral_proto::agent::{read_frame, write_frame};
use corral_proto::step::{STEP_SOCKET_ENV, StepControl, StepEvent};
use corral_state::slurm::signal::Signal;
use tokio::net::UnixStream;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use crate::exit;
use crate::srun_args::SrunArgs;
use output::{NOT_STARTED, OutputPrinter, failure_message, task_code};

/// The signals srun passes on to the tasks.
const FORWARDED: [Signal; 6] = [
    Signal::HUP,
    Signal::INT,
    Signal(3),
    Signal::USR1,
    Signal::USR2,
    Signal::TERM,
];

/// Runs the step; the exit status is the worst task's.
pub async fn run(args: SrunArgs) -> anyhow::Result<ExitCode> {
    let env: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let cwd = std::env::current_dir()
        .context("srun: the current directory is unreadable; pass --chdir")?
        .display()
        .to_string();
    let request = match request::build(&args, &env, &cwd) {
        Ok(request) => request,
        Err(message) => {
            eprintln!("srun: error: {message}");
            return Ok(ExitCode::from(exit::USAGE));
        }
    };
    for warning in args.ignored() {
        eprintln!("{warning}");
    }
    let Some(socket) = env.get(STEP_SOCKET_ENV) else {
        eprintln!(
            "srun: error: {STEP_SOCKET_ENV} is not set; srun runs inside a job that a corral agent started"
        );
        return Ok(ExitCode::from(exit::USAGE));
    };
    let stream = UnixStream::connect(socket)
        .await
        .with_context(|| format!("srun: cannot reach this node's agent at {socket}"))?;
    let (mut reader, mut writer) = stream.into_split();
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
    let (mut stdout, mut stderr) = (std::io::stdout(), std::io::stderr());
    let finished = loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { break false };
                let mut bad_exit = false;
                match event {
                    StepEvent::Started(layout) => {
                        printer = OutputPrinter::new(args.label, layout.ntasks());
                    }
                    StepEvent::Output { task, stream, data } => {
                        let out: &mut dyn Write = match stream {
                            corral_proto::step::OutputStream::Stdout => &mut stdout,
                            corral_proto::step::OutputStream::Stderr => &mut stderr,
                        };
                        let _ = printer.write(task, stream, &data, out);
                    }
                    StepEvent::TaskExited { task, node, status } => {
                        let _ = printer.finish(task, corral_proto::step::OutputStream::Stdout, &mut stdout);
                        let _ = printer.finish(task, corral_proto::step::OutputStream::Stderr, &mut stderr);
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
                        return Ok(ExitCode::from(exit::REFUSED));
                    }
                    StepEvent::Finished => break true,
                    // Answers checkpoint reports only; never part of a step.
                    StepEvent::Accepted | StepEvent::Held(_) => {}
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
        }
    };
    if !finished {
        eprintln!("srun: error: lost this node's agent before the step finished");
        worst = worst.max(1);
    }
    Ok(ExitCode::from(
        u8::try_from(worst.clamp(0, 255)).unwrap_or(u8::MAX),
    ))
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
