//! `SLURM_TASK_PID`: the pid of the process the agent starts, which exists only
//! after the fork. slurmstepd sets it between fork and exec; corral, which
//! forbids `unsafe` (and so `pre_exec`), starts the program through
//! `/bin/sh -c 'SLURM_TASK_PID=$$; export SLURM_TASK_PID; exec "$0" "$@"'`:
//! `exec` keeps the shell's pid, so the variable names the program's own pid.
//!
//! The shell is used only when the program will be found, so that a missing
//! or non-executable program is still refused at the spawn with the agent's
//! own message, not as the shell's exit status 127.
//!
//! A batch script the agent has just written is not exec'd by the shell:
//! while any process forked meanwhile still holds the file open for writing,
//! `exec` fails with "Text file busy", which the agent's own spawn retries
//! but a shell cannot. Its `#!` line is read instead and the interpreter is
//! exec'd with the script's path, exactly the arguments the kernel would give
//! it (`interpreter [argument] script args...`).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The shell that sets the variable and execs the program.
const SHELL: &str = "/bin/sh";
/// The shell's script: `$0` is the program, `$@` its arguments.
const SCRIPT: &str = r#"SLURM_TASK_PID=$$; export SLURM_TASK_PID; exec "$0" "$@""#;
/// Where a bare program name is looked for when the environment has no `PATH`
/// (the shell's own default).
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The program and arguments to start so that `program args` runs with
/// `SLURM_TASK_PID` set to its pid; `program args` unchanged when the shell or
/// the program cannot be found (the spawn then reports why).
pub(super) fn with_task_pid(
    program: &Path,
    args: &[String],
    env: &BTreeMap<String, String>,
    workdir: &Path,
) -> (PathBuf, Vec<OsString>) {
    let unchanged = || {
        (
            program.to_path_buf(),
            args.iter().map(OsString::from).collect(),
        )
    };
    if !executable(Path::new(SHELL)) || !found(program, env, workdir) {
        return unchanged();
    }
    let mut wrapped: Vec<OsString> = vec!["-c".into(), SCRIPT.into(), program.into()];
    wrapped.extend(args.iter().map(OsString::from));
    (PathBuf::from(SHELL), wrapped)
}

/// [`with_task_pid`] for a batch script: its interpreter started through the
/// shell with the script's path, or the script unchanged when it has no
/// usable `#!` line.
pub(super) fn script_with_task_pid(
    script: &Path,
    args: &[String],
    env: &BTreeMap<String, String>,
    workdir: &Path,
) -> (PathBuf, Vec<OsString>) {
    let Some((interpreter, argument)) = interpreter_of(script) else {
        return with_task_pid(script, args, env, workdir);
    };
    if !executable(&workdir.join(&interpreter)) {
        return (
            script.to_path_buf(),
            args.iter().map(OsString::from).collect(),
        );
    }
    let mut interpreter_args: Vec<String> = argument.into_iter().collect();
    interpreter_args.push(script.to_string_lossy().into_owned());
    interpreter_args.extend(args.iter().cloned());
    with_task_pid(&interpreter, &interpreter_args, env, workdir)
}

/// The interpreter of a `#!` line and its one optional argument, split as
/// Linux splits it: the path up to the first blank, then the rest of the line
/// with blanks trimmed.
fn interpreter_of(script: &Path) -> Option<(PathBuf, Option<String>)> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let read = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head[..read].split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line.strip_prefix(b"#!")?).ok()?;
    let line = line.trim_matches([' ', '\t', '\r']);
    let (path, rest) = line.split_once([' ', '\t']).unwrap_or((line, ""));
    if path.is_empty() {
        return None;
    }
    let rest = rest.trim_matches([' ', '\t']);
    Some((
        PathBuf::from(path),
        (!rest.is_empty()).then(|| rest.to_string()),
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with_path(path: &str) -> BTreeMap<String, String> {
        BTreeMap::from([("PATH".to_string(), path.to_string())])
    }

    #[test]
    fn a_program_found_is_started_through_the_shell() {
        let (program, args) = with_task_pid(
            Path::new("true"),
            &["x".into()],
            &env_with_path("/nonexistent:/usr/bin:/bin"),
            Path::new("/"),
        );
        assert_eq!(program, PathBuf::from(SHELL));
        assert_eq!(args, ["-c", SCRIPT, "true", "x"].map(OsString::from));
    }

    #[test]
    fn a_missing_program_is_left_for_the_spawn_to_refuse() {
        let (program, args) = with_task_pid(
            Path::new("no-such-program-here"),
            &["x".into()],
            &env_with_path("/usr/bin:/bin"),
            Path::new("/"),
        );
        assert_eq!(program, PathBuf::from("no-such-program-here"));
        assert_eq!(args, [OsString::from("x")]);
        let dir = std::env::temp_dir();
        let (program, _) = with_task_pid(Path::new("./not-here.sh"), &[], &BTreeMap::new(), &dir);
        assert_eq!(program, PathBuf::from("./not-here.sh"));
    }

    #[test]
    fn a_script_is_started_through_its_interpreter() {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = dir.path().join("job.sh");
        std::fs::write(&script, "#!/usr/bin/env  sh -e \necho hi\n").expect("write");
        let (program, args) =
            script_with_task_pid(&script, &["a".into()], &BTreeMap::new(), dir.path());
        assert_eq!(program, PathBuf::from(SHELL));
        let script_arg = script.clone().into_os_string();
        assert_eq!(
            args,
            [
                OsString::from("-c"),
                SCRIPT.into(),
                "/usr/bin/env".into(),
                "sh -e".into(),
                script_arg,
                "a".into()
            ]
        );
        std::fs::write(&script, "echo no interpreter line\n").expect("write");
        let (program, _) = script_with_task_pid(&script, &[], &BTreeMap::new(), dir.path());
        assert_eq!(program, script, "left for the spawn to refuse");
    }

    #[test]
    fn the_program_sees_its_own_pid() {
        let (program, args) = with_task_pid(
            Path::new("sh"),
            &["-c".into(), "echo $SLURM_TASK_PID $$".into()],
            &env_with_path("/usr/bin:/bin"),
            Path::new("/"),
        );
        let out = std::process::Command::new(program)
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .output()
            .expect("runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let pids: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(pids.len(), 2, "{text}");
        assert_eq!(pids[0], pids[1], "{text}");
    }
}
