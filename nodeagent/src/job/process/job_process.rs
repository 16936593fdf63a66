//! A spawned job: the leader process of its own process group, which the agent
//! signals as a whole and waits for.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use corral_state::job::ExitStatus;
use corral_state::slurm::signal::Signal;
use nix::errno::Errno;
use nix::unistd::{Pid, geteuid};

use super::cgroup::AttemptCgroup;
use super::files::open_stdio;
use super::group::{group_alive, signal_group};
use super::launch::{command_as, setsid_program};
use super::task_pid::with_task_pid;
use super::{ProcessError, ProcessSpec, RunAs, TaskIo, TaskSpec};
use corral_proto::step::TerminalSize;

/// A task's input and output (each `None` once taken).
#[derive(Debug)]
pub struct TaskOutput {
    /// Standard input, when the task's is a pipe.
    pub stdin: Option<tokio::process::ChildStdin>,
    /// Standard output.
    pub stdout: Option<tokio::process::ChildStdout>,
    /// Standard error.
    pub stderr: Option<tokio::process::ChildStderr>,
    /// The master of the task's pseudo-terminal (`srun --pty`): its output
    /// is read and its input written there.
    pub terminal: Option<std::fs::File>,
}

/// A job's process group, led by the process the agent started.
#[derive(Debug)]
pub struct JobProcess {
    child: tokio::process::Child,
    pid: u32,
    pgid: Pid,
    status: Option<ExitStatus>,
}

impl JobProcess {
    /// Starts `spec.program` in a new process group (its pid is the group's id),
    /// with exactly `spec.env`, in `spec.workdir`, its output files opened (see
    /// the module docs of `files`), as `spec.user` when given.
    ///
    /// Fails with a message saying what to fix when the working directory does
    /// not exist, an output file cannot be created or is unsafe to write, the
    /// user cannot be switched to, or the program cannot be executed.
    pub fn spawn(spec: &ProcessSpec) -> Result<JobProcess, ProcessError> {
        check_workdir(&spec.workdir)?;
        let switch_user = spec.user.is_some() && geteuid().is_root();
        let stdio = open_stdio(spec, switch_user)?;
        let cgroup = spec.cgroup.as_ref();
        let mut command = job_command(
            (&spec.program, &spec.args),
            &spec.env,
            &spec.workdir,
            spec.user.as_ref(),
            cgroup,
        )?;
        command
            .process_group(0)
            .stdin(stdio.stdin)
            .stdout(stdio.stdout)
            .stderr(stdio.stderr);
        Self::start(command, &spec.program, &spec.workdir, cgroup)
    }

    /// Starts a step's task like [`JobProcess::spawn`] starts a batch script,
    /// with its input and output as `spec.io` says: pipes returned for the
    /// caller to read and write, a pseudo-terminal whose master is returned,
    /// or nothing.
    pub fn spawn_task(spec: &TaskSpec) -> Result<(JobProcess, TaskOutput), ProcessError> {
        check_workdir(&spec.workdir)?;
        let input = |reads: bool| if reads { Stdio::piped() } else { Stdio::null() };
        let (stdin, stdout, stderr) = match &spec.io {
            TaskIo::Terminal(size) => return Self::spawn_on_terminal(spec, *size),
            TaskIo::Pipes { input: reads } => (input(*reads), Stdio::piped(), Stdio::piped()),
            TaskIo::Discarded => (Stdio::null(), Stdio::null(), Stdio::null()),
            TaskIo::Files {
                stdout,
                stderr,
                input: reads,
            } => {
                let (out, err) = open_task_files(spec, stdout.as_deref(), stderr.as_deref())?;
                (input(*reads), out, err)
            }
        };
        let cgroup = spec.cgroup.as_ref();
        let mut command = job_command(
            (&spec.program, &spec.args),
            &spec.env,
            &spec.workdir,
            spec.user.as_ref(),
            cgroup,
        )?;
        command
            .process_group(0)
            .stdin(stdin)
            .stdout(stdout)
            .stderr(stderr);
        let mut process = Self::start(command, &spec.program, &spec.workdir, cgroup)?;
        let output = TaskOutput {
            stdin: process.child.stdin.take(),
            stdout: process.child.stdout.take(),
            stderr: process.child.stderr.take(),
            terminal: None,
        };
        Ok((process, output))
    }

    /// `srun --pty`'s task 0: `setsid --ctty` makes it the leader of a new
    /// session (and of a process group with its own pid, as every task's)
    /// whose controlling terminal is the new pseudo-terminal it reads and
    /// writes. It must not lead a group before (setsid would fork), so it
    /// gets no group of its own at the spawn.
    fn spawn_on_terminal(
        spec: &TaskSpec,
        size: TerminalSize,
    ) -> Result<(JobProcess, TaskOutput), ProcessError> {
        let setsid = setsid_program().ok_or(ProcessError::SetsidMissing)?;
        let (program, program_args) = with_task_pid(
            &spec.program,
            &spec.args,
            &spec.env,
            &spec.workdir,
            waiting_for(spec.cgroup.as_ref()),
        );
        let mut args: Vec<std::ffi::OsString> =
            vec!["--ctty".into(), "--".into(), program.into_os_string()];
        args.extend(program_args);
        let mut command = command_as(&setsid, &args, spec.user.as_ref(), &spec.env, &spec.workdir)?;
        let winsize = nix::pty::Winsize {
            ws_row: size.rows,
            ws_col: size.cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(Some(&winsize), None)
            .map_err(|e| ProcessError::Terminal(io::Error::from(e)))?;
        if let Some(user) = &spec.user {
            // The user's own terminal, as a login gives it (mesg, write, ssh).
            let _ = nix::unistd::fchown(
                &pty.slave,
                Some(nix::unistd::Uid::from_raw(user.uid)),
                Some(nix::unistd::Gid::from_raw(user.gid)),
            );
        }
        let slave = |fd: &std::os::fd::OwnedFd| fd.try_clone().map_err(ProcessError::Terminal);
        command
            .stdin(Stdio::from(slave(&pty.slave)?))
            .stdout(Stdio::from(slave(&pty.slave)?))
            .stderr(Stdio::from(pty.slave));
        // The command, and with it the slave's last copy here, is gone once
        // started: the master reads an end when the task's session closes it.
        let process = Self::start(command, &spec.program, &spec.workdir, spec.cgroup.as_ref())?;
        let output = TaskOutput {
            stdin: None,
            stdout: None,
            stderr: None,
            terminal: Some(std::fs::File::from(pty.master)),
        };
        Ok((process, output))
    }

    /// Spawns `command` and moves it into `cgroup`, if any (a move that fails
    /// is logged: the process runs outside, found by group and environment).
    fn start(
        command: std::process::Command,
        program: &Path,
        workdir: &Path,
        cgroup: Option<&AttemptCgroup>,
    ) -> Result<JobProcess, ProcessError> {
        let spawn_error = |source: io::Error| ProcessError::Spawn {
            program: program.to_path_buf(),
            workdir: workdir.to_path_buf(),
            source,
        };
        let child = spawn_retrying_busy(&mut tokio::process::Command::from(command))
            .map_err(spawn_error)?;
        let pid = child.id().ok_or_else(|| {
            spawn_error(io::Error::other(
                "the process exited before its pid was read",
            ))
        })?;
        let raw =
            i32::try_from(pid).map_err(|_| spawn_error(io::Error::other("pid out of range")))?;
        if let Some(cgroup) = cgroup
            && let Err(e) = cgroup.add(pid)
        {
            tracing::warn!(
                pid,
                cgroup = cgroup.name(),
                "cannot move a job process into its attempt's cgroup: {e}; it is fenced by its process group and environment only"
            );
        }
        Ok(JobProcess {
            child,
            pid,
            pgid: Pid::from_raw(raw),
            status: None,
        })
    }

    /// The leader's pid, which is also the process group's id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends `signal` to every process of the group. Signalling a group with no
    /// process left succeeds and does nothing.
    pub fn signal(&self, signal: Signal) -> Result<(), ProcessError> {
        signal_group(self.pgid, signal)
    }

    /// Sends SIGKILL to every process of the group.
    pub fn kill(&self) -> Result<(), ProcessError> {
        self.signal(Signal::KILL)
    }

    /// Waits for the leader to end: its exit code, or the signal that killed it
    /// (code 0 then, as Slurm reports `0:9`). Children it left behind may still
    /// run: see [`JobProcess::group_alive`]. Waiting again returns the same.
    pub async fn wait(&mut self) -> Result<ExitStatus, ProcessError> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = self
            .child
            .wait()
            .await
            .map_err(|source| ProcessError::Wait {
                pid: self.pid,
                source,
            })?;
        let status = match status.signal() {
            Some(signal) => ExitStatus {
                code: 0,
                signal: Some(Signal(u8::try_from(signal).unwrap_or(u8::MAX))),
            },
            None => ExitStatus {
                code: status.code().unwrap_or(-1),
                signal: None,
            },
        };
        self.status = Some(status);
        Ok(status)
    }

    /// True while any process of the group is running, the leader or a child
    /// that outlived it (zombies do not count). The node's resources may be
    /// reported released only once this is false.
    pub fn group_alive(&self) -> bool {
        group_alive(self.pgid)
    }
}

/// How often a spawn refused with "text file busy" is tried again.
const BUSY_RETRIES: u32 = 20;

/// `srun -o/-e`'s files for a task, opened as a batch script's are (as the
/// user, appended to; one file once when both streams name it); a stream
/// without a file goes to a pipe.
fn open_task_files(
    spec: &TaskSpec,
    stdout: Option<&Path>,
    stderr: Option<&Path>,
) -> Result<(Stdio, Stdio), ProcessError> {
    let null = Path::new("/dev/null");
    let files = ProcessSpec {
        program: spec.program.clone(),
        args: Vec::new(),
        env: BTreeMap::new(),
        workdir: spec.workdir.clone(),
        stdout: stdout.unwrap_or(null).to_path_buf(),
        stderr: stderr.unwrap_or(null).to_path_buf(),
        stdin: None,
        user: spec.user.clone(),
        cgroup: None,
    };
    let switch_user = spec.user.is_some() && geteuid().is_root();
    let opened = open_stdio(&files, switch_user)?;
    let out = match stdout {
        Some(_) => opened.stdout,
        None => Stdio::piped(),
    };
    let err = match stderr {
        Some(_) => opened.stderr,
        None => Stdio::piped(),
    };
    Ok((out, err))
}

/// `program` with its arguments as `user` (the agent's own user when `None`)
/// in `workdir` with exactly `env`, started through the `task-exec` wrapper
/// where there is one (which waits to be moved into `cgroup`).
fn job_command(
    (program, args): (&Path, &[String]),
    env: &BTreeMap<String, String>,
    workdir: &Path,
    user: Option<&RunAs>,
    cgroup: Option<&AttemptCgroup>,
) -> Result<std::process::Command, ProcessError> {
    let (program, args) = with_task_pid(program, args, env, workdir, waiting_for(cgroup));
    command_as(&program, &args, user, env, workdir)
}

/// The cgroup a starting process waits to be moved into, if any.
fn waiting_for(cgroup: Option<&AttemptCgroup>) -> Option<&str> {
    cgroup.filter(|c| c.waits()).map(AttemptCgroup::name)
}

/// Spawns `command`, trying again a few times (a few ms apart, about a second in
/// all) while the kernel answers ETXTBSY: a script written moments ago is still
/// open for writing in any child another thread forked in the meantime, until
/// that child executes its own program.
fn spawn_retrying_busy(command: &mut tokio::process::Command) -> io::Result<tokio::process::Child> {
    let mut tries = 0;
    loop {
        match command.spawn() {
            Err(e) if e.raw_os_error() == Some(Errno::ETXTBSY as i32) && tries < BUSY_RETRIES => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(u64::from(5 * tries)));
            }
            result => return result,
        }
    }
}

/// Fails unless the working directory exists and is a directory.
fn check_workdir(workdir: &Path) -> Result<(), ProcessError> {
    let path = workdir.to_path_buf();
    match std::fs::metadata(workdir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(ProcessError::WorkdirNotDirectory { path }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(ProcessError::WorkdirMissing { path }),
        Err(source) => Err(ProcessError::Workdir { path, source }),
    }
}
