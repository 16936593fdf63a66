//! Opening a job's standard input and output files.
//!
//! Output files are opened for appending, created with mode 0644. When the
//! agent runs as root they must be created with the job's user's rights, never
//! root's: a helper shell running as the user creates them (so the user's own
//! directory permissions decide), and the agent then opens them without
//! following a final symbolic link and only if they are plain files owned by the
//! user. The input file is checked the same way: the helper tests that the user
//! may read it, and the agent opens it only if its mode lets the user read it.
//! The helper names the file it reached (device and inode) through the user's
//! own path lookup, and the agent's open must land on that same file: a
//! directory the user swaps for a link between the two (to reach, through
//! root's rights, a file of theirs in a place they cannot enter, or a readable
//! file behind a directory closed to them) fails the launch. Root looks before
//! it opens: it first takes the path with `O_PATH` (which opens nothing: no
//! device's open runs, no pipe waits), checks what that is, and only then
//! opens that same file through its descriptor.
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
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    open_stdio_with(spec, switch_user, || {})
}

/// [`open_stdio`], running `between` after the user's helper and before the
/// agent's own opens (where a racing user would act; tests act there).
fn open_stdio_with(
    spec: &ProcessSpec,
    switch_user: bool,
    between: impl FnOnce(),
) -> Result<JobStdio, ProcessError> {
    let stdout_path = resolve(&spec.workdir, &spec.stdout);
    let stderr_path = resolve(&spec.workdir, &spec.stderr);
    let stdin_path = spec.stdin.as_ref().map(|p| resolve(&spec.workdir, p));
    let user = spec.user.as_ref().filter(|_| switch_user);
    // `--output=/dev/null` (common in Slurm scripts) is not a file to create or
    // check: the process simply gets the null device.
    let null = Path::new(NULL_DEVICE);
    let stdin_path = stdin_path.filter(|p| p != null);
    let mut reached = Reached::default();
    if let Some(user) = user {
        let files: Vec<&Path> = [stdout_path.as_path(), stderr_path.as_path()]
            .into_iter()
            .filter(|p| *p != null)
            .collect();
        if !files.is_empty() || stdin_path.is_some() {
            let (first, second) = (files.first().copied(), files.get(1).copied());
            let first = first.unwrap_or(null);
            reached = prepare_as_user(user, stdin_path.as_deref(), first, second.unwrap_or(first))?;
        }
    }
    between();
    let checked = |path: &Path| user.map(|u| (u, reached.outputs.get(path).copied()));
    let stdout = if stdout_path == null {
        None
    } else {
        Some(open_output(&stdout_path, checked(&stdout_path))?)
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
        Stdio::from(open_output(&stderr_path, checked(&stderr_path))?)
    };
    let stdin = match &stdin_path {
        Some(path) => Stdio::from(open_input(path, user.map(|u| (u, reached.input)))?),
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
/// output files to create (mode 0644) if missing. It prints, one line each,
/// the device and inode of the input (`-` without one) and of each output as
/// it opened it (`/dev/fd/3` is the file the shell opened, not the path again).
const PREPARE_SCRIPT: &str = r#"umask 022
if [ -n "$1" ]; then
    if [ ! -r "$1" ]; then
        echo "$1: not readable" >&2
        exit 1
    fi
    stat -L -c '%d:%i' -- "$1" || exit 1
else
    echo -
fi
shift
for f in "$@"; do
    if [ -p "$f" ]; then
        echo "$f: a named pipe, not a plain file" >&2
        exit 1
    fi
    exec 3>>"$f" || exit 1
    stat -L -c '%d:%i' /dev/fd/3 || exit 1
    exec 3>&-
done"#;

/// How long the helper may take: an open that waits (a named pipe put there
/// after its check, a hung mount) must not hold a launch thread for good.
const HELPER_LIMIT: Duration = Duration::from_secs(10);

/// Runs `command` to its end, as `Command::output` does, but kills it past
/// `limit`. Its output must be small (it is read once it has exited).
fn output_within(command: &mut Command, limit: Duration) -> io::Result<std::process::Output> {
    let mut child = command.spawn()?;
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(1);
    loop {
        if child.try_wait()?.is_some() {
            return child.wait_with_output();
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "opening it as the job's user did not finish within {} s (a named pipe, or a file system that does not answer)",
                    limit.as_secs()
                ),
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// A file, as device and inode numbers.
type FileId = (u64, u64);

/// The files the helper reached as the user.
#[derive(Debug, Default)]
struct Reached {
    /// The input file.
    input: Option<FileId>,
    /// Each output file, by the path the agent opens.
    outputs: BTreeMap<PathBuf, FileId>,
}

/// Reads `DEV:INO` (or `-`) lines.
fn file_ids(text: &str) -> Vec<Option<FileId>> {
    text.lines()
        .map(|line| {
            let (dev, ino) = line.trim().split_once(':')?;
            Some((dev.parse().ok()?, ino.parse().ok()?))
        })
        .collect()
}

/// Runs the helper shell as `user`: it fails, with the shell's message, when the
/// user may not read the input or create an output file; otherwise it names the
/// files it reached.
fn prepare_as_user(
    user: &RunAs,
    stdin: Option<&Path>,
    stdout: &Path,
    stderr: &Path,
) -> Result<Reached, ProcessError> {
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
    let mut command: Command = command_as(
        Path::new("/bin/sh"),
        &args,
        Some(user),
        &env,
        Path::new("/"),
    )?;
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = output_within(&mut command, HELPER_LIMIT).map_err(|e| output_error(stdout, &e))?;
    if output.status.success() {
        let ids = file_ids(&String::from_utf8_lossy(&output.stdout));
        let mut reached = Reached {
            input: ids.first().copied().flatten(),
            ..Reached::default()
        };
        for (path, id) in [stdout, stderr].into_iter().zip(ids.into_iter().skip(1)) {
            if let Some(id) = id {
                reached.outputs.insert(path.to_path_buf(), id);
            }
        }
        return Ok(reached);
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
/// switch users; when it does (`checked`: the user, and the file the user's
/// helper reached there), opened only if it is the user's plain file and the
/// one the helper reached.
fn open_output(
    path: &Path,
    checked: Option<(&RunAs, Option<FileId>)>,
) -> Result<File, ProcessError> {
    let mut options = OpenOptions::new();
    options.append(true);
    // `--output=/dev/null` is common and safe: the one device a job may write.
    if path == Path::new(DEV_NULL) {
        return options.open(path).map_err(|e| output_error(path, &e));
    }
    let Some((user, reached)) = checked else {
        options.create(true).mode(OUTPUT_MODE);
        return open_without_blocking(&mut options, OFlag::empty(), path)
            .map_err(|e| output_error(path, &e));
    };
    let probe = probe(path).map_err(|e| output_error(path, &e))?;
    let meta = probe.metadata().map_err(|e| output_error(path, &e))?;
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
    if reached != Some((meta.dev(), meta.ino())) {
        return Err(unsafe_because(format!(
            "it is not the file {} reached at that path a moment before (a directory on the way was replaced)",
            user.user
        )));
    }
    reopen(&probe, &mut options).map_err(|e| output_error(path, &e))
}

/// Opens `path` without opening what it names (`O_PATH`, not following a
/// final link): a device's open has effects (a watchdog arms), a named pipe's
/// waits, so root looks at what a user's path leads to before it opens it.
fn probe(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_PATH | OFlag::O_NOFOLLOW).bits())
        .open(path)
}

/// Opens, with `options`, the very file `probed` (found by [`probe`] and
/// checked), through its descriptor rather than its path again.
fn reopen(probed: &File, options: &mut OpenOptions) -> io::Result<File> {
    let via = PathBuf::from(format!("/proc/self/fd/{}", probed.as_raw_fd()));
    let file = open_without_blocking(options, OFlag::empty(), &via)?;
    let (was, is) = (probed.metadata()?, file.metadata()?);
    if (was.dev(), was.ino()) != (is.dev(), is.ino()) {
        return Err(io::Error::other("the file changed while it was opened"));
    }
    Ok(file)
}

/// Where output goes to be discarded.
const DEV_NULL: &str = "/dev/null";

/// Opens the input file; when switching users (`checked`: the user, and the
/// file the user's helper reached there), only if it is not a symbolic link,
/// it is the file the helper reached, and its mode lets the user read it.
fn open_input(
    path: &Path,
    checked: Option<(&RunAs, Option<FileId>)>,
) -> Result<File, ProcessError> {
    let input_error = |reason: String| ProcessError::InputFile {
        path: path.to_path_buf(),
        reason,
    };
    let mut options = OpenOptions::new();
    options.read(true);
    let Some((user, reached)) = checked else {
        let file = open_without_blocking(&mut options, OFlag::empty(), path)
            .map_err(|e| input_error(e.to_string()))?;
        let meta = file.metadata().map_err(|e| input_error(e.to_string()))?;
        if meta.file_type().is_fifo() {
            return Err(input_error(FIFO_INPUT.to_string()));
        }
        return Ok(file);
    };
    let probe = probe(path).map_err(|e| input_error(e.to_string()))?;
    let meta = probe.metadata().map_err(|e| input_error(e.to_string()))?;
    if meta.file_type().is_fifo() {
        return Err(input_error(FIFO_INPUT.to_string()));
    }
    if !meta.file_type().is_file() {
        return Err(input_error(
            "it is not a plain file; give --input a regular file".to_string(),
        ));
    }
    if reached != Some((meta.dev(), meta.ino())) {
        return Err(input_error(format!(
            "it is not the file {} reached at that path a moment before (a directory on the way was replaced)",
            user.user
        )));
    }
    let groups = supplementary_groups(user)?;
    let mode = meta.mode();
    let readable = if meta.uid() == user.uid {
        mode & 0o400 != 0
    } else if groups.contains(&meta.gid()) {
        mode & 0o040 != 0
    } else {
        mode & 0o004 != 0
    };
    if !readable {
        return Err(input_error(format!("{} may not read it", user.user)));
    }
    reopen(&probe, &mut options).map_err(|e| input_error(e.to_string()))
}

/// Why a named pipe is no input: opened without waiting for a writer, it
/// would read as empty and the job would silently get no input.
const FIFO_INPUT: &str =
    "it is a named pipe, which corral does not wait on; give --input a regular file";

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
        let file =
            open_output(Path::new("/dev/null"), Some((&user, None))).expect("/dev/null opens");
        assert!(is_blocking(&file));
        let elsewhere = std::env::temp_dir().join("not-a-plain-file-dir");
        std::fs::create_dir_all(&elsewhere).expect("dir");
        assert!(open_output(&elsewhere, Some((&user, None))).is_err());
    }

    /// A user's directory reached through a link the user controls, and a
    /// directory closed to the user holding a file of theirs (`out`) and a
    /// readable file of root's (`in`): the user moves the link between the
    /// helper and the agent's open.
    #[test]
    fn as_root_a_link_moved_between_the_users_check_and_the_open_is_caught() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: switching users needs root");
            return;
        }
        let Ok(nobody) = super::super::user::resolve_user("nobody") else {
            eprintln!("skipped: no user nobody");
            return;
        };
        use std::os::unix::fs::{PermissionsExt, chown, symlink};
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let own = dir.path().join("own");
        std::fs::create_dir(&own).expect("mkdir");
        chown(&own, Some(nobody.uid), Some(nobody.gid)).expect("chown");
        std::fs::write(own.join("in"), "the user's input\n").expect("write");
        chown(own.join("in"), Some(nobody.uid), Some(nobody.gid)).expect("chown");
        let closed = dir.path().join("closed");
        std::fs::create_dir(&closed).expect("mkdir");
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        std::fs::write(closed.join("out"), "kept\n").expect("write");
        chown(closed.join("out"), Some(nobody.uid), Some(nobody.gid)).expect("chown");
        std::fs::write(closed.join("in"), "root's secret\n").expect("write");
        std::fs::set_permissions(closed.join("in"), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        let link = dir.path().join("link");
        let spec = |stdout: &str, stdin: Option<&str>| ProcessSpec {
            program: PathBuf::from("/bin/true"),
            args: Vec::new(),
            env: BTreeMap::new(),
            workdir: dir.path().to_path_buf(),
            stdout: PathBuf::from(stdout),
            stderr: PathBuf::from(stdout),
            stdin: stdin.map(PathBuf::from),
            user: Some(nobody.clone()),
            cgroup: None,
        };
        let swap = || {
            std::fs::remove_file(&link).expect("unlink");
            symlink(&closed, &link).expect("symlink");
        };
        // Unmoved, the same layout opens.
        symlink(&own, &link).expect("symlink");
        open_stdio(&spec("link/out", Some("link/in")), true).expect("opens");

        std::fs::remove_file(&link).expect("unlink");
        symlink(&own, &link).expect("symlink");
        let err = open_stdio_with(&spec("link/out", None), true, swap)
            .err()
            .expect("output refused");
        assert!(err.to_string().contains("directory on the way"), "{err}");
        assert_eq!(
            std::fs::read_to_string(closed.join("out")).expect("read"),
            "kept\n"
        );

        std::fs::remove_file(&link).expect("unlink");
        symlink(&own, &link).expect("symlink");
        let err = open_stdio_with(&spec("/dev/null", Some("link/in")), true, swap)
            .err()
            .expect("input refused");
        assert!(err.to_string().contains("directory on the way"), "{err}");
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
