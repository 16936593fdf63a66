//! The simulated GPU backend through its real control socket: XIDs injected from
//! outside arrive as events and make the GPU unhealthy, `heal` restores it, bad
//! commands are answered with errors, and the socket's file is managed (stale
//! file replaced, live socket left alone, file removed on drop).
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use corral_agent::gpu::{
    FaultCommand, GpuBackend, GpuError, SimulatedGpus, XidAction, backend_from_spec, classify_xid,
    control_socket, inject,
};
use corral_state::mig::MigLayout;

fn socket_in(dir: &tempfile::TempDir) -> PathBuf {
    control_socket(dir.path())
}

/// Sends raw lines on one connection and returns the answers.
fn exchange(path: &Path, lines: &[&str]) -> Vec<String> {
    let mut stream = UnixStream::connect(path).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    lines
        .iter()
        .map(|line| {
            stream.write_all(format!("{line}\n").as_bytes()).unwrap();
            let mut answer = String::new();
            reader.read_line(&mut answer).unwrap();
            answer.trim_end().to_string()
        })
        .collect()
}

#[test]
fn an_injected_xid_arrives_as_an_event_and_makes_the_gpu_unhealthy_until_healed() {
    let dir = tempfile::tempdir().unwrap();
    let path = socket_in(&dir);
    let gpus = SimulatedGpus::new(8, "h100", &MigLayout::default(), path.clone()).unwrap();
    let mut events = gpus.xid_events();
    assert_eq!(gpus.kind(), "simulated");
    assert_eq!(gpus.gpus().len(), 8);
    assert!(gpus.gpus().iter().all(|gpu| gpu.model == "h100"));
    assert!(gpus.sample().iter().all(|sample| sample.healthy));

    inject(&path, &FaultCommand::Xid { gpu: 3, xid: 79 }).unwrap();

    // The agent publishes the event before it answers `ok`.
    let event = events.try_recv().unwrap();
    assert_eq!((event.gpu, event.xid), (3, 79));
    assert_eq!(classify_xid(event.xid).action, XidAction::DrainNode);
    let samples = gpus.sample();
    assert!(!samples[3].healthy);
    assert_eq!(
        samples[3].problem.as_deref(),
        Some("XID 79: GPU has fallen off the bus")
    );
    assert!(samples.iter().filter(|s| s.index != 3).all(|s| s.healthy));

    inject(&path, &FaultCommand::Heal { gpu: 3 }).unwrap();
    assert!(gpus.sample()[3].healthy);
    assert!(events.try_recv().is_err(), "heal raises no event");
}

#[test]
fn temperature_is_set_through_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = socket_in(&dir);
    let gpus = SimulatedGpus::new(2, "a100", &MigLayout::default(), path.clone()).unwrap();
    inject(
        &path,
        &FaultCommand::Temperature {
            gpu: 1,
            celsius: 97,
        },
    )
    .unwrap();
    let sample = &gpus.sample()[1];
    assert_eq!(sample.temperature_c, Some(97));
    assert!(!sample.healthy);
}

#[test]
fn events_raised_before_anyone_subscribes_are_kept_for_the_first_receiver() {
    let dir = tempfile::tempdir().unwrap();
    let path = socket_in(&dir);
    let gpus = SimulatedGpus::new(1, "h100", &MigLayout::default(), path.clone()).unwrap();
    inject(&path, &FaultCommand::Xid { gpu: 0, xid: 48 }).unwrap();
    let mut events = gpus.xid_events();
    assert_eq!(events.try_recv().unwrap().xid, 48);
}

#[test]
fn bad_commands_are_answered_with_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = socket_in(&dir);
    let gpus = SimulatedGpus::new(8, "h100", &MigLayout::default(), path.clone()).unwrap();

    let refused = inject(&path, &FaultCommand::Xid { gpu: 8, xid: 79 }).unwrap_err();
    assert!(matches!(refused, GpuError::InjectionRefused { .. }));
    assert_eq!(
        refused.to_string(),
        "the agent refused `xid 8 79`: GPU 8 is out of range: this node has 8 simulated GPUs (0-7)"
    );

    let answers = exchange(&path, &["reboot 1", "xid 1", "heal x", "heal 1", ""]);
    assert!(answers[0].starts_with("error: ") && answers[0].contains("unknown command `reboot`"));
    assert!(
        answers[1].contains("wrong number of arguments for `xid`"),
        "{}",
        answers[1]
    );
    assert!(answers[2].contains("not a whole number"), "{}", answers[2]);
    assert_eq!(answers[3], "ok");
    assert!(answers[4].contains("empty"), "{}", answers[4]);
    assert!(gpus.sample().iter().all(|sample| sample.healthy));
}

#[test]
fn an_overlong_command_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = socket_in(&dir);
    let _gpus = SimulatedGpus::new(1, "h100", &MigLayout::default(), path.clone()).unwrap();
    let long = "x".repeat(4096);
    let answers = exchange(&path, &[&long]);
    assert!(answers[0].contains("longer than"), "{}", answers[0]);
}

#[test]
fn injecting_without_an_agent_says_the_agent_is_not_running() {
    let dir = tempfile::tempdir().unwrap();
    let path = socket_in(&dir);
    let error = inject(&path, &FaultCommand::Heal { gpu: 0 }).unwrap_err();
    assert!(matches!(error, GpuError::AgentNotRunning { .. }));
    let message = error.to_string();
    assert!(message.contains("not running"), "{message}");
    assert!(message.contains(&path.display().to_string()), "{message}");
}

#[test]
fn a_stale_socket_file_is_replaced_and_dropping_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = socket_in(&dir);
    drop(UnixListener::bind(&path).unwrap());
    assert!(path.exists(), "a dropped listener leaves its file behind");

    let gpus = SimulatedGpus::new(1, "h100", &MigLayout::default(), path.clone()).unwrap();
    inject(&path, &FaultCommand::Heal { gpu: 0 }).unwrap();
    drop(gpus);

    assert!(!path.exists());
    let error = inject(&path, &FaultCommand::Heal { gpu: 0 }).unwrap_err();
    assert!(matches!(error, GpuError::AgentNotRunning { .. }));
}

#[test]
fn a_live_socket_is_not_stolen() {
    let dir = tempfile::tempdir().unwrap();
    let path = socket_in(&dir);
    let first = SimulatedGpus::new(1, "h100", &MigLayout::default(), path.clone()).unwrap();
    let error = SimulatedGpus::new(1, "h100", &MigLayout::default(), path.clone()).unwrap_err();
    assert!(matches!(error, GpuError::ControlSocket { .. }));
    assert!(
        error.to_string().contains("another agent is listening"),
        "{error}"
    );
    inject(&path, &FaultCommand::Heal { gpu: 0 }).unwrap();
    drop(first);
}

#[test]
fn a_file_in_the_way_is_not_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let path = socket_in(&dir);
    std::fs::write(&path, "not a socket").unwrap();
    let error = SimulatedGpus::new(1, "h100", &MigLayout::default(), path.clone()).unwrap_err();
    assert!(error.to_string().contains("not a socket"), "{error}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "not a socket");
}

#[test]
fn bad_counts_and_types_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (count, model, expected) in [
        (0, "h100", "at least one GPU"),
        (65, "h100", "more than the 64"),
        (1, "h1 00", "must be letters"),
        (1, "100", "not a number"),
    ] {
        let error =
            SimulatedGpus::new(count, model, &MigLayout::default(), socket_in(&dir)).unwrap_err();
        assert!(
            error.to_string().contains(expected),
            "{count} {model}: {error}"
        );
    }
    let upper = SimulatedGpus::new(1, "H100", &MigLayout::default(), socket_in(&dir)).unwrap();
    assert_eq!(upper.gpus()[0].model, "h100");
}

#[test]
fn backends_open_from_the_gpus_option() {
    let dir = tempfile::tempdir().unwrap();
    let simulated = backend_from_spec("simulated:4:l40s", dir.path()).unwrap();
    assert_eq!(simulated.kind(), "simulated");
    assert_eq!(simulated.gpus().len(), 4);
    assert_eq!(simulated.gpus()[0].name, "NVIDIA L40S");
    assert!(control_socket(dir.path()).exists());
    inject(&control_socket(dir.path()), &FaultCommand::Heal { gpu: 3 }).unwrap();

    let none = backend_from_spec("none", dir.path()).unwrap();
    assert_eq!(none.kind(), "none");
    assert!(none.gpus().is_empty() && none.sample().is_empty());
    assert!(none.xid_events().try_recv().is_err());

    let error = backend_from_spec("simulated:x:h100", dir.path())
        .err()
        .unwrap();
    assert!(
        error.to_string().contains("invalid --gpus value"),
        "{error}"
    );
}
