//! `SLURM_TASK_PID`: the pid of the process the agent starts, which exists only
//! after the fork. slurmstepd sets it between fork and exec; corral, which
//! forbids `unsafe` (and so `pre_exec`), starts the program through its own
//! binary: `corral-agent task-exec -- PROGRAM ARGS...` adds the variable with
//! its own pid and `exec`s the program, which keeps that pid. The environment
//! passes through untouched (a shell would drop exported functions such as
//! Lmod's `BASH_FUNC_module%%`), and an `exec` refused with "Text file busy"
//! (a batch script just written while another fork held it open) is retried.
//!
//! Given `--cgroup=NAME` (`corral-agent task-exec --cgroup=NAME -- PROGRAM`),
//! the wrapper first waits until the agent has moved it into the attempt's
//! cgroup, so that no job code runs outside it (for at most
//! [`CGROUP_PATIENCE`]; then it runs the program where it is).
//!
//! The wrapper is used only once the agent named its binary
//! ([`use_wrapper`]) and when the program will be found, so that a missing or
//! non-executable program is still refused at the spawn with the agent's own
//! message. An `exec` the wrapper cannot do ends it with a message on the
//! task's standard error and status 127 (not found) or 126, as a shell's.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Duration;

/// The subcommand of `corral-agent` that execs a job's program.
pub const SUBCOMMAND: &str = "task-exec";
/// Where a bare program name is looked for when the environment has no `PATH`.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// How long the wrapper waits to be moved into its attempt's cgroup.
pub const CGROUP_PATIENCE: Duration = Duration::from_millis(500);
/// How long "Text file busy" is retried.
const BUSY_PATIENCE: Duration = Duration::from_secs(2);

/// The agent's binary, once it said jobs may be started through it.
static WRAPPER: OnceLock<PathBuf> = OnceLock::new();

/// Starts programs through `agent_binary task-exec` from now on. Refused
/// (with the reason, and `SLURM_TASK_PID` then unset) when jobs run as other
/// users and one could not execute the binary: it and every directory above
/// it must be executable by all.
pub fn use_wrapper(agent_binary: PathBuf, switches_users: bool) -> Result<(), String> {
    if switches_users
        && let Some(private) = agent_binary
            .ancestors()
            .find(|p| !std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
    {
        return Err(format!(
            "{} is not executable by every user, so jobs cannot start through {}: \
             SLURM_TASK_PID will not be set (install corral-agent where all may run it)",
            private.display(),
            agent_binary.display()
        ));
    }
    let _ = WRAPPER.set(agent_binary);
    Ok(())
}

/// The program and arguments to start so that `program args` runs with
/// `SLURM_TASK_PID` set to its pid; `program args` unchanged without a wrapper
/// or when the program cannot be found (the spawn then reports why).
pub(super) fn with_task_pid(
    program: &Path,
    args: &[String],
    env: &BTreeMap<String, String>,
    workdir: &Path,
    cgroup: Option<&str>,
) -> (PathBuf, Vec<OsString>) {
    let unchanged = || {
        (
            program.to_path_buf(),
            args.iter().map(OsString::from).collect(),
        )
    };
    let Some(wrapper) = WRAPPER.get() else {
        return unchanged();
    };
    if !found(program, env, workdir) {
        return unchanged();
    }
    let mut wrapped: Vec<OsString> = vec![SUBCOMMAND.into()];
    if let Some(cgroup) = cgroup {
        wrapped.push(format!("--cgroup={cgroup}").into());
    }
    wrapped.extend(["--".into(), program.into()]);
    wrapped.extend(args.iter().map(OsString::from));
    (wrapper.clone(), wrapped)
}

/// Whether `exec` will find `program`: a path (relative to `workdir`) that is
/// an executable file, or a bare name found so in the environment's `PATH`.
fn found(program: &Path, env: &BTreeMap<String, String>, workdir: &Path) -> bool {
    let text = program.as_os_str().to_string_lossy();
    if text.contains('/') {
        return executable(&workdir.join(program));
    }
    let path = env.get("PATH").map_or(DEFAULT_PATH, String::as_str);
    path.split(':')
        .map(|dir| if dir.is_empty() { "." } else { dir })
        .any(|dir| executable(&workdir.join(dir).join(program)))
}

/// A regular file with an execute bit.
fn executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `corral-agent task-exec [--cgroup=NAME] -- PROGRAM ARGS...`: execs the
/// program with `SLURM_TASK_PID` set to this process's pid (once in cgroup
/// `NAME`); returns only when it cannot.
pub fn run(args: impl Iterator<Item = OsString>) -> ExitCode {
    let mut args = args.peekable();
    if let Some(name) = args
        .peek()
        .and_then(|a| a.to_str())
        .and_then(|a| a.strip_prefix("--cgroup="))
        .map(str::to_string)
    {
        args.next();
        // Not there in time: the agent could not move it (and said so in
        // its log); the program runs where it is.
        super::cgroup::wait_until_in(&name, CGROUP_PATIENCE);
    }
    let mut args = args.skip_while(|a| a == "--");
    let Some(program) = args.next() else {
        eprintln!("corral-agent {SUBCOMMAND}: no program given");
        return ExitCode::from(2);
    };
    let rest: Vec<OsString> = args.collect();
    let started = std::time::Instant::now();
    let error = loop {
        let error = std::process::Command::new(&program)
            .args(&rest)
            .env("SLURM_TASK_PID", std::process::id().to_string())
            .exec();
        let busy = error.raw_os_error() == Some(nix::errno::Errno::ETXTBSY as i32);
        if !busy || started.elapsed() > BUSY_PATIENCE {
            break error;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    eprintln!(
        "corral-agent: cannot run {}: {error}",
        Path::new(&program).display()
    );
    match error.kind() {
        std::io::ErrorKind::NotFound => ExitCode::from(127),
        _ => ExitCode::from(126),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_as_exec_would_find_them() {
        let path = BTreeMap::from([("PATH".to_string(), "/nonexistent:/usr/bin:/bin".to_string())]);
        assert!(found(Path::new("true"), &path, Path::new("/")));
        assert!(!found(
            Path::new("no-such-program-here"),
            &path,
            Path::new("/")
        ));
        assert!(!found(
            Path::new("./not-here.sh"),
            &BTreeMap::new(),
            &std::env::temp_dir()
        ));
    }

    #[test]
    fn a_binary_only_root_may_run_is_refused_as_a_wrapper_for_other_users() {
        let dir = tempfile::tempdir().expect("tempdir");
        let private = dir.path().join("private");
        std::fs::create_dir(&private).expect("mkdir");
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let binary = private.join("corral-agent");
        std::fs::write(&binary, "").expect("write");
        let refused = use_wrapper(binary, true).expect_err("private");
        assert!(
            refused.contains("not executable by every user"),
            "{refused}"
        );
    }
}
