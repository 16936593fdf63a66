//! Starting the processes of a local cluster so that each can be started again
//! the same way: the command line and environment of every process are kept in
//! `DIR/launch/NAME.json`, its pid in `DIR/pids/NAME.pid`, and its output is
//! appended to `DIR/logs/NAME.log` (the daemons rotate it past 64 MiB,
//! keeping three: `CORRAL_LOG_MAX_BYTES`, `CORRAL_LOG_KEEP` in the caller's
//! environment change that). `corral local start NAME` uses the record
//! to bring back a controller or agent that was stopped or killed (the chaos
//! suite, tests and operators trying failures by hand), or, with
//! `--program`, to run another build of it (a rolling upgrade, one process
//! at a time).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

/// How a process of a local cluster is started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set on top of the environment of whoever starts it.
    pub env: Vec<(String, String)>,
    /// The network namespace it runs in (`corral local up --netns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
}

fn record_path(dir: &Path, name: &str) -> PathBuf {
    dir.join("launch").join(format!("{name}.json"))
}

/// The caller's settings of a daemon's log cap (see corral-logging), handed
/// on to every process and kept in its record, so a restart keeps them.
const LOG_CAP_SETTINGS: [&str; 2] = ["CORRAL_LOG_MAX_BYTES", "CORRAL_LOG_KEEP"];

/// Starts process `name` of the cluster in `dir` as `launch` says (in the
/// background, in its own process group, output appended to its log, which
/// the daemon caps and rotates: `CORRAL_LOG_FILE`) and records how, and its
/// pid.
pub fn spawn(dir: &Path, name: &str, launch: &Launch) -> anyhow::Result<u32> {
    std::fs::create_dir_all(dir.join("launch"))?;
    let mut launch = launch.clone();
    for key in LOG_CAP_SETTINGS {
        if let Ok(value) = std::env::var(key)
            && !launch.env.iter().any(|(k, _)| k == key)
        {
            launch.env.push((key.to_string(), value));
        }
    }
    let launch = &launch;
    let record = serde_json::to_string_pretty(launch)?;
    std::fs::write(record_path(dir, name), record)
        .with_context(|| format!("cannot write {}", record_path(dir, name).display()))?;
    start(dir, name, launch, &[])
}

/// Starts `launch` with `extra` variables on top, and records its pid.
fn start(
    dir: &Path,
    name: &str,
    launch: &Launch,
    extra: &[(String, String)],
) -> anyhow::Result<u32> {
    let log_path = dir.join("logs").join(format!("{name}.log"));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let mut command = match &launch.netns {
        Some(netns) => super::netns::enter(netns, &launch.program),
        None => std::process::Command::new(&launch.program),
    };
    let child = command
        .args(&launch.args)
        .envs(launch.env.iter().chain(extra).map(|(k, v)| (k, v)))
        .env("CORRAL_LOG_FILE", &log_path)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start {}", launch.program.display()))?;
    std::fs::write(
        dir.join("pids").join(format!("{name}.pid")),
        child.id().to_string(),
    )?;
    Ok(child.id())
}

/// Starts process `name` (`controller-2`, `agent-gpu01`) again as it was
/// started first, with `extra` variables for this start only; refused while
/// it runs. With `program`, it runs that binary instead, from now on (an
/// upgrade, or a downgrade, of that one process).
pub fn restart(
    dir: &Path,
    name: &str,
    extra: &[(String, String)],
    program: Option<&Path>,
) -> anyhow::Result<u32> {
    if super::status(dir)?
        .iter()
        .any(|p| p.name == name && p.running)
    {
        bail!("{name} is running; stop it first");
    }
    let path = record_path(dir, name);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "no process named {name} in {} (see `corral local status --dir {}`)",
            dir.display(),
            dir.display()
        )
    })?;
    let mut launch: Launch =
        serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
    if let Some(program) = program {
        if !program.is_file() {
            bail!(
                "--program {}: no such file; give the path of the corrald or corral-agent to run",
                program.display()
            );
        }
        launch.program = std::path::absolute(program)
            .with_context(|| format!("--program {}", program.display()))?;
        std::fs::write(&path, serde_json::to_string_pretty(&launch)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    start(dir, name, &launch, extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_starts_again_as_recorded_and_not_while_it_runs() {
        let dir = tempfile::tempdir().expect("dir");
        for sub in ["logs", "pids"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("dirs");
        }
        let launch = Launch {
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".into(), "echo \"run $CORRAL_TEST_VAR\"".into()],
            env: vec![("CORRAL_TEST_VAR".into(), "x".into())],
            netns: None,
        };
        spawn(dir.path(), "corral-echo", &launch).expect("spawned");
        let log = dir.path().join("logs/corral-echo.log");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let count = |n: usize| {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .matches("run x")
                .count()
                >= n
        };
        while !count(1) {
            assert!(std::time::Instant::now() < deadline, "never ran");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // It exited: it may start again, and its log grows.
        while super::super::status(dir.path())
            .expect("status")
            .iter()
            .any(|p| p.running)
        {
            assert!(std::time::Instant::now() < deadline, "never ended");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        restart(dir.path(), "corral-echo", &[], None).expect("restarted");
        while !count(2) {
            assert!(std::time::Instant::now() < deadline, "never ran again");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(restart(dir.path(), "nothing", &[], None).is_err());
    }
}
