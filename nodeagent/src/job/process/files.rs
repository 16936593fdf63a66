//! Opening a job's standard input and output files.
//!
//! Output files are opened for appending, created with mode 0644. When the
//! agent runs as root they must be created with the job's user's rights, never
//! root's: a helper shell running as the user creates them (so the user's own
//! directory permissions decide), and the agent then opens them without
//! following a final symbolic link and only if they are plain files owned by the
//! user. The input file is checked the same way: the helper tests that the user
//! may read it, and the agent opens it only if its mode lets the user read it.
//! Without a user switch, the agent opens everything itself.
//!
//! No open may block a launch: every file is opened with `O_NONBLOCK` (which
//! the job's descriptor then loses), so a named pipe with nobody at its other
//! end fails at once instead of holding a launch thread until someone comes
//! (an output pipe someone reads is fine; an input pipe is refused, since it
//! would read as empty); the helper refuses named pipes before its shell would
//! open them.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::fcntl::{FcntlArg, OFlag, fcntl};

use super::launch::command_as;
use super::user::{RunAs, supplementary_groups};
use super::{ProcessError, ProcessSpec};

/// The mode output files are created with.
const OUTPUT_MODE: u32 = 0o644;

/// The job's standard input, output and error, opened.
pub(super) struct JobStdio {
    /// Standard input (`/dev/null` without `--input`).
    pub stdin: Stdio,
    /// Standard output.
    pub stdout: Stdio,
    /// Standard error (the same file as standard output when they are equal).
    pub stderr: Stdio,
}

/// Opens `spec`'s files. Relative paths are taken from the working directory.
pub(super) fn open_stdio(spec: &ProcessSpec, switch_user: bool) -> Result<JobStdio, ProcessError> {
    let stdout_path = resolve(&spec.workdir, &spec.stdout);
    let stderr_path = resolve(&spec.workdir, &spec.stderr);
    let stdin_path = spec.stdin.as_ref().map(|p| resolve(&spec.workdir, p));
    let user = spec.user.as_ref().filter(|_| switch_user);
    // `--output=/dev/null` (common in Slurm scripts) is not a file to create or
    // check: the process simply gets the null device.
    let null = Path::new(NULL_DEVICE);
    let stdin_path = stdin_path.filter(|p| p != null);
    if let Some(user) = user {
        let files: Vec<&Path> = [stdout_path.as_path(), stderr_path.as_path()]
            .into_iter()
            .filter(|p| *p != null)
            .collect();
        if !files.is_empty() || stdin_path.is_some() {
            let (first, second) = (files.first().copied(), files.get(1).copied());
            let first = first.unwrap_or(null);
            prepare_as_user(user, stdin_path.as_deref(), first, second.unwrap_or(first))?;
        }
    }
    let stdout = if stdout_path == null {
        None
    } else {
        Some(open_output(&stdout_path, user)?)
    };
    let stderr = if stderr_path == null {
        Stdio::null()
    } else if stderr_path == stdout_path {
        match &stdout {
            Some(file) => Stdio::from(
                file.try_clone()
                    .map_err(|e| output_error(&stderr_path, &e))?,
            ),
            None => Stdio::null(),
        }
    } else {
        Stdio::from(open_output(&stderr_path, user)?)
    };
    let stdin = match &stdin_path {
        Some(path) => Stdio::from(open_input(path, user)?),
        None => Stdio::null(),
    };
    Ok(JobStdio {
        stdin,
        stdout: stdout.map_or_else(Stdio::null, Stdio::from),
        stderr,
    })
}

/// The null device, which output options may name.
const NULL_DEVICE: &str = "/dev/null";

/// `path` taken from `workdir` when relative.
fn resolve(workdir: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        workdir.join(path)
    }
}

/// The script the helper runs: `$1` is the input file (or empty), the rest are
/// output files to create (mode 0644) if missing.
const PREPARE_SCRIPT: &str = r#"umask 022
if [ -n "$1" ] && [ ! -r "$1" ]; then
    echo "$1: not readable" >&2
    exit 1
fi
shift
for f in "$@"; do
    if [ -p "$f" ]; then
        echo "$f: a named pipe, not a plain file" >&2
        exit 1
    fi
    : >>"$f" || exit 1
done"#;

/// Runs the helper shell as `user`: it fails, with the shell's message, when the
/// user may not read the input or create an output file.
fn prepare_as_user(
    user: &RunAs,
    stdin: Option<&Path>,
    stdout: &Path,
    stderr: &Path,
) -> Result<(), ProcessError> {
    let mut args: Vec<OsString> = vec![
        "-c".into(),
        PREPARE_SCRIPT.into(),
        "corral-prepare".into(),
        stdin.map(|p| p.as_os_str().to_owned()).unwrap_or_default(),
        stdout.as_os_str().to_owned(),
    ];
    if stderr != stdout {
        args.push(stderr.as_os_str().to_owned());
    }
    let env = BTreeMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]);
    let mut command: Command = command_as(Path::new("/bin/sh"), &args, Some(user), &env)?;
    command
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let output = command.output().map_err(|e| output_error(stdout, &e))?;
    if output.status.success() {
        return Ok(());
    }
    let reason = String::from_utf8_lossy(&output.stderr).trim().to_string();
    let reason = if reason.is_empty() {
        format!(
            "the helper running as {} failed ({})",
            user.user, output.status
        )
    } else {
        format!("as {}: {reason}", user.user)
    };
    match stdin {
        Some(path) if reason.contains("not readable") => Err(ProcessError::InputFile {
            path: path.to_path_buf(),
            reason,
        }),
        _ => Err(ProcessError::OutputFile {
            path: stdout.to_path_buf(),
            reason,
        }),
    }
}

/// Opens an output file for appending: created by the agent when it does not
/// switch users; opened only if it is the user's plain file when it does.
fn open_output(path: &Path, user: Option<&RunAs>) -> Result<File, ProcessError> {
    let mut options = OpenOptions::new();
    options.append(true);
    // `--output=/dev/null` is common and safe: the one device a job may write.
    if path == Path::new(DEV_NULL) {
        return options.open(path).map_err(|e| output_error(path, &e));
    }
    let Some(user) = user else {
        options.create(true).mode(OUTPUT_MODE);
        return open_without_blocking(&mut options, OFlag::empty(), path)
            .map_err(|e| output_error(path, &e));
    };
    let file = open_without_blocking(&mut options, OFlag::O_NOFOLLOW, path)
        .map_err(|e| output_error(path, &e))?;
    let meta = file.metadata().map_err(|e| output_error(path, &e))?;
    let unsafe_because = |reason: String| ProcessError::UnsafeOutputFile {
        path: path.to_path_buf(),
        reason,
    };
    if !meta.file_type().is_file() {
        return Err(unsafe_because("it is not a plain file".to_string()));
    }
    if meta.uid() != user.uid {
        return Err(unsafe_because(format!(
            "it belongs to uid {}, not to {} (uid {})",
            meta.uid(),
            user.user,
            user.uid
        )));
    }
    Ok(file)
}

/// Where output goes to be discarded.
const DEV_NULL: &str = "/dev/null";

/// Opens the input file; when switching users, only if it is not a symbolic
/// link and its mode lets the user read it.
fn open_input(path: &Path, user: Option<&RunAs>) -> Result<File, ProcessError> {
    let input_error = |reason: String| ProcessError::InputFile {
        path: path.to_path_buf(),
        reason,
    };
    let mut options = OpenOptions::new();
    options.read(true);
    let flags = if user.is_some() {
        OFlag::O_NOFOLLOW
    } else {
        OFlag::empty()
    };
    let file =
        open_without_blocking(&mut options, flags, path).map_err(|e| input_error(e.to_string()))?;
    // Opened without waiting for a writer, a named pipe would read as empty:
    // the job would silently get no input.
    let is_fifo = file
        .metadata()
        .map_err(|e| input_error(e.to_string()))?
        .file_type()
        .is_fifo();
    if is_fifo {
        return Err(input_error(
            "it is a named pipe, which corral does not wait on; give --input a regular file"
                .to_string(),
        ));
    }
    let Some(user) = user else {
        return Ok(file);
    };
    let meta = file.metadata().map_err(|e| input_error(e.to_string()))?;
    let groups = supplementary_groups(user)?;
    let mode = meta.mode();
    let readable = if meta.uid() == user.uid {
        mode & 0o400 != 0
    } else if groups.contains(&meta.gid()) {
        mode & 0o040 != 0
    } else {
        mode & 0o004 != 0
    };
    if readable {
        Ok(file)
    } else {
        Err(input_error(format!("{} may not read it", user.user)))
    }
}

/// Opens `path` with `flags` and `O_NONBLOCK`, then clears `O_NONBLOCK`: the
/// open cannot wait for the other end of a named pipe, and the job still gets
/// a blocking descriptor.
fn open_without_blocking(options: &mut OpenOptions, flags: OFlag, path: &Path) -> io::Result<File> {
    options.custom_flags((flags | OFlag::O_NONBLOCK).bits());
    let file = options.open(path)?;
    let status = OFlag::from_bits_truncate(fcntl(&file, FcntlArg::F_GETFL)?);
    fcntl(&file, FcntlArg::F_SETFL(status - OFlag::O_NONBLOCK))?;
    Ok(file)
}

/// An output file error from an I/O error.
fn output_error(path: &Path, error: &io::Error) -> ProcessError {
    let reason = if error.raw_os_error() == Some(nix::libc::ENXIO) {
        "it is a named pipe that no process has open for reading".to_string()
    } else {
        error.to_string()
    };
    ProcessError::OutputFile {
        path: path.to_path_buf(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use nix::sys::stat::Mode;
    use nix::unistd::mkfifo;

    use super::*;

    /// Runs `open` on a thread, failing the test if it has not returned within
    /// a generous bound (a blocked open would never return).
    fn returns<T: Send + 'static>(open: impl FnOnce() -> T + Send + 'static) -> T {
        let (done, result) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(open());
        });
        result
            .recv_timeout(Duration::from_secs(20))
            .expect("opening a named pipe blocked the launch")
    }

    fn is_blocking(file: &File) -> bool {
        let status = fcntl(file, FcntlArg::F_GETFL).expect("F_GETFL");
        !OFlag::from_bits_truncate(status).contains(OFlag::O_NONBLOCK)
    }

    #[test]
    fn a_named_pipe_with_no_reader_fails_an_output_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("out.fifo");
        mkfifo(&fifo, Mode::from_bits_truncate(0o600)).expect("mkfifo");
        let path = fifo.clone();
        let error = returns(move || open_output(&path, None)).expect_err("nobody reads the pipe");
        assert!(
            error
                .to_string()
                .contains("no process has open for reading"),
            "{error}"
        );
        // With a reader there, the job gets the pipe, as a blocking descriptor.
        let _reader = OpenOptions::new()
            .read(true)
            .custom_flags(OFlag::O_NONBLOCK.bits())
            .open(&fifo)
            .expect("reader");
        let path = fifo.clone();
        let file = returns(move || open_output(&path, None)).expect("opens");
        assert!(is_blocking(&file));
    }

    #[test]
    fn a_named_pipe_as_input_is_refused_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("in.fifo");
        mkfifo(&fifo, Mode::from_bits_truncate(0o600)).expect("mkfifo");
        let path = fifo.clone();
        let error = returns(move || open_input(&path, None)).expect_err("refused");
        assert!(error.to_string().contains("named pipe"), "{error}");
    }

    #[test]
    fn dev_null_takes_a_switched_users_output() {
        // Not a plain file, nor the user's: still the one place output may go.
        let user = RunAs {
            uid: 4242,
            gid: 4242,
            user: "nobody-in-particular".into(),
        };
        let file = open_output(Path::new("/dev/null"), Some(&user)).expect("/dev/null opens");
        assert!(is_blocking(&file));
        let elsewhere = std::env::temp_dir().join("not-a-plain-file-dir");
        std::fs::create_dir_all(&elsewhere).expect("dir");
        assert!(open_output(&elsewhere, Some(&user)).is_err());
    }

    #[test]
    fn plain_output_files_are_created_and_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("job.out");
        let file = open_output(&path, None).expect("created");
        assert!(is_blocking(&file));
        assert!(path.is_file());
    }
}
