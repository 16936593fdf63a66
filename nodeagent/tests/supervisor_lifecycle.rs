//! The supervisor with real processes: an attempt runs once, its end is one
//! report, an ended attempt is held until that report is acknowledged, a
//! launch of an attempt the node ran is refused (across a restart: a new
//! supervisor on the same journal), and fenced attempts are reported lost.
#![allow(clippy::unwrap_used)]

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_agent::attempt_journal::Journal;
use corral_agent::gpu::{FaultCommand, GpuBackend, SimulatedGpus};
use corral_agent::job::process::Cgroups;
use corral_agent::job::process::cgroup::own_cgroup;
use corral_agent::outbox::Outbox;
use corral_agent::supervisor::{GpuHolders, Supervisor, SupervisorSettings};
use corral_proto::agent::{AgentReport, Launch};
use corral_state::ids::JobId;
use corral_state::job::BatchScript;
use corral_state::mig::MigLayout;
use corral_state::slurm::signal::Signal;
use corral_state::testkit::{at, cluster, spec, start, submit};

const DEADLINE: Duration = Duration::from_secs(30);

async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < DEADLINE,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A supervisor of node `n1` keeping its journal and files in `dir`.
fn supervisor(dir: &Path, outbox: &Outbox) -> Supervisor {
    supervisor_with(dir, outbox, None)
}

/// [`supervisor`], with attempt cgroups in `cgroups`.
fn supervisor_with(dir: &Path, outbox: &Outbox, cgroups: Option<Cgroups>) -> Supervisor {
    supervisor_of(dir, outbox, cgroups, None)
}

/// [`supervisor_with`], looking for an attempt's processes on `gpus` too.
fn supervisor_of(
    dir: &Path,
    outbox: &Outbox,
    cgroups: Option<Cgroups>,
    gpus: Option<GpuHolders>,
) -> Supervisor {
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    let (journal, _) = Journal::open(&dir.join("attempts")).unwrap();
    Supervisor::new(
        SupervisorSettings {
            node: "n1".into(),
            scripts_dir: dir.join("scripts"),
            checkpoint_root: dir.join("checkpoints"),
            run_as_job_user: false,
            step_socket: None,
            // One per test directory: tests run side by side in one process,
            // and an agent's processes are known by this id.
            agent_id: format!(
                "n1:{}",
                dir.file_name().unwrap_or_default().to_string_lossy()
            ),
            unkillable_timeout: Duration::from_secs(10),
            lease: None,
            launch_stall: Duration::ZERO,
            working_controller: None,
            gpu_devices: Vec::new(),
            cgroups,
            gpus,
        },
        outbox.clone(),
        Arc::new(journal),
    )
}

/// A one-node job placed on `n1`, running `body`, with its files in `dir`.
fn launch(dir: &Path, body: &str) -> Launch {
    let mut state = cluster(1, 8);
    let mut request = spec("alice", 1, 1);
    request.workdir = dir.display().to_string();
    let id = submit(&mut state, request, at(1));
    let nodes = start(&mut state, id, at(2));
    assert_eq!(nodes, vec!["n1".to_string()]);
    Launch {
        job: state.job(id).unwrap().clone(),
        attempt: 1,
        script: BatchScript {
            script: format!("#!/bin/sh\n{body}\n"),
            argv: Vec::new(),
            environment: [("PATH".to_string(), "/usr/bin:/bin".to_string())].into(),
        },
        step_peers: Default::default(),
        dispatched_by: (1, 1),
        topology: Default::default(),
    }
}

/// Waits until `outbox` holds a `Lost` report (`what` names the wait).
async fn lost_reported(outbox: &Outbox, what: &str) {
    eventually(what, || {
        reports(outbox)
            .iter()
            .any(|(_, r)| matches!(r, AgentReport::Lost { .. }))
    })
    .await;
}

fn reports(outbox: &Outbox) -> Vec<(u64, AgentReport)> {
    outbox.reconnected();
    outbox.unsent()
}

#[tokio::test]
async fn an_attempt_runs_once_and_is_held_until_its_end_is_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = Outbox::default();
    let agent = supervisor(dir.path(), &outbox);
    let job = launch(dir.path(), "echo ran >> runs; sleep 30");
    let key = (job.job.id, 1);
    agent.launch(job.clone());
    agent.launch(job.clone());
    eventually("it starts", || {
        reports(&outbox)
            .iter()
            .any(|(_, r)| matches!(r, AgentReport::Started { .. }))
    })
    .await;
    assert_eq!(agent.held(), vec![key]);
    agent.kill(key, Signal::TERM, Duration::from_secs(5));
    eventually("its end is reported", || {
        reports(&outbox)
            .iter()
            .any(|(_, r)| matches!(r, AgentReport::BatchExited { .. }))
    })
    .await;
    // Ended, but the leader has not acknowledged it: still held.
    assert_eq!(agent.held(), vec![key]);
    for (id, _) in reports(&outbox) {
        outbox.settle(id, true);
    }
    assert!(agent.held().is_empty());
    let runs = std::fs::read_to_string(dir.path().join("runs")).unwrap();
    assert_eq!(runs, "ran\n", "the second launch ran it again");

    // A new agent on the same journal (a restart) refuses to run it again.
    let restarted_outbox = Outbox::default();
    let restarted = supervisor(dir.path(), &restarted_outbox);
    restarted.launch(job);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(restarted.held().is_empty());
    assert!(reports(&restarted_outbox).is_empty());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("runs")).unwrap(),
        "ran\n"
    );
}

#[tokio::test]
async fn a_fenced_attempt_is_killed_and_reported_lost_not_as_an_exit() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = Outbox::default();
    let agent = supervisor(dir.path(), &outbox);
    let job = launch(dir.path(), "echo $$ > pid; sleep 30");
    let key = (job.job.id, 1);
    agent.launch(job);
    let pid_file = dir.path().join("pid");
    eventually("it writes its pid", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
    })
    .await;
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    agent.fence();
    lost_reported(&outbox, "its end is reported").await;
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z "),
        "the fenced process still runs"
    );
    let ends: Vec<AgentReport> = reports(&outbox)
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| !matches!(r, AgentReport::Started { .. }))
        .collect();
    assert!(
        matches!(ends.as_slice(), [AgentReport::Lost { job, attempt: 1, .. }] if *job == JobId(key.0.0)),
        "{ends:?}"
    );
    assert_eq!(
        agent.held(),
        vec![key],
        "held until the leader acknowledges"
    );
}

#[tokio::test]
async fn only_the_attempt_that_runs_may_report_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = Outbox::default();
    let agent = supervisor(dir.path(), &outbox);
    let job = launch(dir.path(), "sleep 30");
    let key = (job.job.id, 1);
    let uid = nix::unistd::geteuid().as_raw();
    agent.launch(job);
    eventually("it runs", || agent.step_attempt(key).is_some()).await;
    assert!(
        agent
            .record_checkpoint((key.0, 2), uid, 10, "/ckpt/10".into())
            .is_err(),
        "an attempt that does not run here"
    );
    agent
        .record_checkpoint(key, uid, 10, "/ckpt/10".into())
        .unwrap();
    agent.kill(key, Signal::KILL, Duration::ZERO);
    let refused = agent.record_checkpoint(key, uid, 20, "/ckpt/20".into());
    assert!(
        refused.is_err(),
        "a checkpoint from an ending attempt was taken"
    );
    let checkpoints: Vec<u64> = reports(&outbox)
        .into_iter()
        .filter_map(|(_, r)| match r {
            AgentReport::Checkpoint {
                step, attempt: 1, ..
            } => Some(step),
            _ => None,
        })
        .collect();
    assert_eq!(checkpoints, vec![10]);
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
fn dead(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| stat.contains(") Z "))
}

/// Reads the pid a job wrote to `path`, once it is there.
async fn written_pid(path: &Path) -> i32 {
    eventually("the job writes a pid", || {
        std::fs::read_to_string(path).is_ok_and(|t| t.ends_with('\n'))
    })
    .await;
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A job process that starts a session of its own and clears its
/// environment leaves the process groups and the markers the agent looks
/// for; its attempt's cgroup it cannot leave, and the fence ends it.
#[tokio::test]
async fn a_process_that_leaves_its_group_and_clears_its_environment_is_fenced_through_its_cgroup() {
    let dir = tempfile::tempdir().unwrap();
    let Some((mount, own)) = own_cgroup() else {
        eprintln!("skipped: no cgroup v2 on this machine");
        return;
    };
    let tag = format!("test-{}", dir.path().file_name().unwrap().to_string_lossy());
    let cgroups = match Cgroups::open_below(&mount, &own, &tag) {
        Ok(cgroups) => cgroups,
        Err(e) => {
            eprintln!("skipped: cannot make cgroups here ({e})");
            return;
        }
    };
    // As the agent does: jobs start through its `task-exec`, which waits to
    // be in its cgroup before the job's program runs.
    corral_agent::job::process::task_pid::use_wrapper(
        std::path::PathBuf::from(env!("CARGO_BIN_EXE_corral-agent")),
        false,
    )
    .unwrap();
    let escape = "setsid env -i /bin/sh -c 'echo $$ > escaped; exec sleep 300' \
        </dev/null >/dev/null 2>&1 & sleep 30";

    // The control: without cgroups the escaped process outlives the fence.
    let control_dir = dir.path().join("control");
    std::fs::create_dir(&control_dir).unwrap();
    let control_outbox = Outbox::default();
    let control = supervisor(&control_dir, &control_outbox);
    control.launch(launch(&control_dir, escape));
    let escaped = written_pid(&control_dir.join("escaped")).await;
    control.fence();
    lost_reported(&control_outbox, "the control's end is reported").await;
    let survived = !dead(escaped);
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(escaped),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert!(
        survived,
        "the escape did not escape: the test proves nothing"
    );

    let outbox = Outbox::default();
    let agent = supervisor_with(dir.path(), &outbox, Some(cgroups.clone()));
    let job = launch(dir.path(), escape);
    let key = (job.job.id, 1);
    agent.launch(job);
    let escaped = written_pid(&dir.path().join("escaped")).await;
    let cgroup = cgroups.attempt(key.0.0, key.1);
    assert!(
        cgroup.pids_below().contains(&escaped),
        "{:?}",
        cgroup.pids_below()
    );
    agent.fence();
    lost_reported(&outbox, "its end is reported").await;
    assert!(
        dead(escaped),
        "the escaped process {escaped} outlived the fence"
    );
    assert!(!cgroup.populated());
    assert!(!cgroup.dir_exists(), "the attempt's cgroup was not removed");
    assert!(cgroups.kill_all(Duration::from_secs(5)).is_empty());
    assert!(!cgroups.dir().exists());
}

/// Where no cgroup holds them (a node without cgroup v2, or a process that
/// got out of it), a job process that left its group and cleared its
/// environment still holds a context on its GPU: the GPUs list it (NVML's
/// running processes; here the simulated backend, told by `context GPU
/// PID` as a CUDA program's context would show), the fence ends it, and
/// the attempt ends only once it is gone. Without the GPUs looked at, the
/// same process outlives the fence and the GPU is reported free under it.
#[tokio::test]
async fn a_process_that_escaped_every_other_way_is_found_on_its_gpu_and_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let simulated = Arc::new(
        SimulatedGpus::new(
            8,
            "h100",
            &MigLayout::default(),
            dir.path().join("gpu.sock"),
        )
        .unwrap(),
    );
    let escape = "setsid env -i /bin/sh -c 'echo $$ > escaped; exec sleep 300' \
        </dev/null >/dev/null 2>&1 & sleep 30";
    let holds_its_gpu = |job: &Launch, pid: i32| {
        let gpus = &job.job.attempts[0].allocation[0].gpus;
        assert!(!gpus.is_empty(), "the job holds no GPU");
        for gpu in gpus {
            simulated
                .apply(&FaultCommand::Context {
                    gpu: *gpu,
                    pid: pid as u32,
                })
                .unwrap();
        }
    };

    // The control: not looking at the GPUs, the escaped process survives.
    let control_dir = dir.path().join("control");
    std::fs::create_dir(&control_dir).unwrap();
    let control_outbox = Outbox::default();
    let control = supervisor(&control_dir, &control_outbox);
    let job = launch(&control_dir, escape);
    control.launch(job.clone());
    let escaped = written_pid(&control_dir.join("escaped")).await;
    holds_its_gpu(&job, escaped);
    control.fence();
    lost_reported(&control_outbox, "the control's end is reported").await;
    let survived = !dead(escaped);
    let listed = simulated.processes().unwrap().len();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(escaped),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert!(
        survived,
        "the escape did not escape: the test proves nothing"
    );
    assert_eq!(listed, 1, "the GPU did not list the escaped process");

    let outbox = Outbox::default();
    let holders = GpuHolders::new(Arc::clone(&simulated) as Arc<dyn GpuBackend>);
    let agent = supervisor_of(dir.path(), &outbox, None, Some(holders));
    let job = launch(dir.path(), escape);
    agent.launch(job.clone());
    let escaped = written_pid(&dir.path().join("escaped")).await;
    holds_its_gpu(&job, escaped);
    agent.fence();
    lost_reported(&outbox, "its end is reported").await;
    assert!(
        dead(escaped),
        "the escaped process {escaped} outlived the fence"
    );
    assert!(
        simulated.processes().unwrap().is_empty(),
        "the GPU still lists a process of the ended attempt"
    );
}

/// After an agent restart: a process of an earlier agent's attempt that left
/// its group and its environment, where no cgroup holds it, is found on the
/// GPUs the journal recorded for the attempt, killed before the new agent
/// offers them, and the attempt is reported lost. Without the GPUs looked
/// at, it survives the restart.
#[tokio::test]
async fn a_restarted_agent_finds_an_earlier_attempts_escaped_process_on_its_gpus() {
    use corral_agent::attempt_journal::GpuHold;
    use corral_agent::recovery::recover;

    let dir = tempfile::tempdir().unwrap();
    let simulated = Arc::new(
        SimulatedGpus::new(
            8,
            "h100",
            &MigLayout::default(),
            dir.path().join("gpu.sock"),
        )
        .unwrap(),
    );
    let uuid = simulated.gpus()[3].uuid.clone();
    let uid = nix::unistd::geteuid().as_raw();
    let key = (JobId(7), 1);
    // An earlier agent's attempt on GPU 3, and its process out of every
    // group and without its environment, holding a context on the GPU.
    let earlier_attempt = |journal_dir: &Path| {
        let (journal, _) = Journal::open(journal_dir).unwrap();
        let hold = GpuHold {
            uid,
            uuids: vec![uuid.clone()],
        };
        journal.started(key, "n1:earlier", Some(hold)).unwrap();
        let child = std::process::Command::new("sleep")
            .arg("300")
            .env_clear()
            .process_group(0)
            .spawn()
            .unwrap();
        simulated
            .apply(&FaultCommand::Context {
                gpu: 3,
                pid: child.id(),
            })
            .unwrap();
        child
    };
    let lost_only = |ends: &[(corral_agent::supervisor::AttemptKey, AgentReport)]| matches!(ends, [(k, AgentReport::Lost { .. })] if *k == key);

    let control_dir = dir.path().join("control");
    let mut control = earlier_attempt(&control_dir);
    let (journal, records) = Journal::open(&control_dir).unwrap();
    let ends = recover("n1:now", &journal, records, DEADLINE, (None, None)).await;
    let survived = !dead(control.id() as i32);
    let _ = control.kill();
    let _ = control.wait();
    assert!(lost_only(&ends), "{ends:?}");
    assert!(
        survived,
        "the escape did not escape: the test proves nothing"
    );

    let journal_dir = dir.path().join("attempts");
    let mut escaped = earlier_attempt(&journal_dir);
    let (journal, records) = Journal::open(&journal_dir).unwrap();
    let holders = GpuHolders::new(Arc::clone(&simulated) as Arc<dyn GpuBackend>);
    let ends = recover(
        "n1:now",
        &journal,
        records,
        DEADLINE,
        (None, Some(&holders)),
    )
    .await;
    let gone = dead(escaped.id() as i32);
    let _ = escaped.kill();
    let _ = escaped.wait();
    assert!(lost_only(&ends), "{ends:?}");
    assert!(gone, "the escaped process outlived the agent's restart");
    assert!(simulated.processes().unwrap().is_empty());
}
