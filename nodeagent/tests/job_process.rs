//! Job processes for real: environment, output files, exit statuses, signals,
//! killing a whole process group, and running as another user when root.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use corral_agent::job::process::{
    JobProcess, ProcessError, ProcessSpec, RunAs, resolve_user, run_as_for_job, write_script,
};
use corral_state::JobId;
use corral_state::job::ExitStatus;
use corral_state::slurm::signal::Signal;
use corral_state::testkit::spec;
use nix::unistd::geteuid;

/// How long a test waits for a condition before failing.
const DEADLINE: Duration = Duration::from_secs(20);

/// Polls `condition` until it holds, failing after [`DEADLINE`].
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A spec running `script` (written to `dir`) in `dir`, output to `dir/out`.
fn script_spec(dir: &Path, script: &str, user: Option<RunAs>) -> ProcessSpec {
    let program = write_script(dir, JobId(7), 1, script, user.as_ref()).unwrap();
    ProcessSpec {
        program,
        args: vec!["first arg".into()],
        env: BTreeMap::from([
            ("PATH".to_string(), "/usr/bin:/bin".to_string()),
            ("JOB_VAR".to_string(), "from corral".to_string()),
        ]),
        workdir: dir.to_path_buf(),
        stdout: dir.join("out"),
        stderr: dir.join("out"),
        stdin: None,
        user,
        cgroup: None,
    }
}

fn read(path: impl AsRef<Path>) -> String {
    fs::read_to_string(path).unwrap()
}

/// Every process these tests start goes through the agent's `task-exec`, as
/// the agent's own do.
fn through_the_agent() {
    let agent = PathBuf::from(env!("CARGO_BIN_EXE_corral-agent"));
    corral_agent::job::process::task_pid::use_wrapper(agent, false).unwrap();
}

#[tokio::test]
async fn a_program_sees_its_own_pid_and_every_variable_it_was_given() {
    through_the_agent();
    let dir = tempfile::tempdir().unwrap();
    let spec = ProcessSpec {
        program: PathBuf::from("env"),
        args: Vec::new(),
        env: BTreeMap::from([
            ("PATH".to_string(), "/usr/bin:/bin".to_string()),
            // Names a POSIX shell would drop: Lmod's exported functions.
            (
                "BASH_FUNC_module%%".to_string(),
                "() {  eval $($LMOD_CMD bash \"$@\")\n}".to_string(),
            ),
            ("dotted.name".to_string(), "1".to_string()),
        ]),
        workdir: dir.path().to_path_buf(),
        stdout: dir.path().join("out"),
        stderr: dir.path().join("out"),
        stdin: None,
        user: None,
        cgroup: None,
    };
    let mut job = JobProcess::spawn(&spec).unwrap();
    let pid = job.pid();
    assert!(job.wait().await.unwrap().is_success());
    let out = read(dir.path().join("out"));
    assert!(out.contains(&format!("SLURM_TASK_PID={pid}\n")), "{out}");
    assert!(out.contains("BASH_FUNC_module%%=() {"), "{out}");
    assert!(out.contains("dotted.name=1\n"), "{out}");
    assert_eq!(out.lines().filter(|l| l.contains('=')).count(), 4, "{out}");
}

#[tokio::test]
async fn a_script_sees_exactly_its_environment_and_arguments() {
    through_the_agent();
    let dir = tempfile::tempdir().unwrap();
    let spec = script_spec(dir.path(), "#!/bin/sh\nenv | sort\necho \"arg=$1\"\n", None);
    let mut job = JobProcess::spawn(&spec).unwrap();
    assert!(job.pid() > 0);
    let status = job.wait().await.unwrap();
    assert!(status.is_success(), "{status:?}");
    let out = read(dir.path().join("out"));
    assert!(out.contains("JOB_VAR=from corral\n"), "{out}");
    assert!(out.contains("PATH=/usr/bin:/bin\n"), "{out}");
    assert!(out.contains("arg=first arg\n"), "{out}");
    // Nothing leaks from the agent's own environment.
    assert!(!out.contains("CARGO"), "{out}");
    assert!(!out.contains("HOME="), "{out}");
}

#[tokio::test]
async fn one_file_for_both_streams_keeps_their_order_and_appends() {
    through_the_agent();
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("out"), "earlier\n").unwrap();
    let spec = script_spec(
        dir.path(),
        "#!/bin/sh\necho one\necho two >&2\necho three\n",
        None,
    );
    JobProcess::spawn(&spec).unwrap().wait().await.unwrap();
    assert_eq!(read(dir.path().join("out")), "earlier\none\ntwo\nthree\n");
    let mode = fs::metadata(dir.path().join("out")).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o644);
}

#[tokio::test]
async fn separate_error_file_and_input_file() {
    through_the_agent();
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("in"), "hello from stdin\n").unwrap();
    let mut spec = script_spec(dir.path(), "#!/bin/sh\ncat\necho oops >&2\n", None);
    spec.stderr = PathBuf::from("err");
    spec.stdin = Some(PathBuf::from("in"));
    JobProcess::spawn(&spec).unwrap().wait().await.unwrap();
    assert_eq!(read(dir.path().join("out")), "hello from stdin\n");
    assert_eq!(read(dir.path().join("err")), "oops\n");
}

#[tokio::test]
async fn exit_codes_and_signals_map_to_exit_status() {
    through_the_agent();
    let dir = tempfile::tempdir().unwrap();
    let spec = script_spec(dir.path(), "#!/bin/sh\nexit 3\n", None);
    let mut job = JobProcess::spawn(&spec).unwrap();
    let status = job.wait().await.unwrap();
    assert_eq!(
        status,
        ExitStatus {
            code: 3,
            signal: None
        }
    );
    assert_eq!(job.wait().await.unwrap(), status, "waiting again agrees");

    let spec = script_spec(dir.path(), "#!/bin/sh\nkill -TERM $$\nsleep 5\n", None);
    let status = JobProcess::spawn(&spec).unwrap().wait().await.unwrap();
    assert_eq!(
        status,
        ExitStatus {
            code: 0,
            signal: Some(Signal::TERM)
        }
    );
    assert!(!status.is_success());
}

#[tokio::test]
async fn a_signal_reaches_the_whole_group() {
    through_the_agent();
    let dir = tempfile::tempdir().unwrap();
    let script = "#!/bin/sh\ntrap 'echo got USR1; exit 0' USR1\necho ready > ready\nwhile :; do sleep 0.01; done\n";
    let spec = script_spec(dir.path(), script, None);
    let mut job = JobProcess::spawn(&spec).unwrap();
    let ready = dir.path().join("ready");
    eventually("the script is ready", || ready.exists()).await;
    job.signal(Signal::USR1).unwrap();
    let status = job.wait().await.unwrap();
    assert!(status.is_success(), "{status:?}");
    assert!(read(dir.path().join("out")).contains("got USR1"));
}

#[tokio::test]
async fn killing_the_group_kills_children_that_outlive_the_leader() {
    through_the_agent();
    let dir = tempfile::tempdir().unwrap();
    let script = "#!/bin/sh\nsleep 1000 &\necho $! > child.pid\nwait\n";
    let spec = script_spec(dir.path(), script, None);
    let mut job = JobProcess::spawn(&spec).unwrap();
    let pid_file = dir.path().join("child.pid");
    eventually("the child's pid is written", || {
        fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))
    })
    .await;
    assert!(job.group_alive());
    job.kill().unwrap();
    let status = job.wait().await.unwrap();
    assert_eq!(status.signal, Some(Signal::KILL));
    eventually("the group is empty", || !job.group_alive()).await;
    // Killing or signalling an empty group is not an error.
    job.kill().unwrap();
    job.signal(Signal::TERM).unwrap();
}

#[tokio::test]
async fn children_keep_the_group_alive_after_the_leader_exits() {
    through_the_agent();
    let dir = tempfile::tempdir().unwrap();
    let script = "#!/bin/sh\nsleep 1000 &\necho $! > child.pid\nexit 0\n";
    let spec = script_spec(dir.path(), script, None);
    let mut job = JobProcess::spawn(&spec).unwrap();
    assert!(job.wait().await.unwrap().is_success());
    assert!(job.group_alive(), "the background sleep still runs");
    job.kill().unwrap();
    eventually("the group is empty", || !job.group_alive()).await;
}

#[tokio::test]
async fn a_missing_workdir_is_a_clear_error() {
    through_the_agent();
    let dir = tempfile::tempdir().unwrap();
    let mut spec = script_spec(dir.path(), "#!/bin/sh\ntrue\n", None);
    spec.workdir = dir.path().join("does-not-exist");
    let err = JobProcess::spawn(&spec).unwrap_err();
    assert!(
        matches!(err, ProcessError::WorkdirMissing { .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("does-not-exist"), "{message}");
    assert!(message.contains("--chdir"), "{message}");
}

#[tokio::test]
async fn a_missing_program_is_a_clear_error() {
    through_the_agent();
    let dir = tempfile::tempdir().unwrap();
    let mut spec = script_spec(dir.path(), "#!/bin/sh\ntrue\n", None);
    spec.program = dir.path().join("no-such-program");
    let err = JobProcess::spawn(&spec).unwrap_err();
    assert!(matches!(err, ProcessError::Spawn { .. }), "{err:?}");
    assert!(err.to_string().contains("no-such-program"));
}

#[test]
fn the_script_is_private_and_executable() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_script(dir.path(), JobId(42), 3, "#!/bin/sh\necho hi\n", None).unwrap();
    assert_eq!(path, dir.path().join("job42.attempt3.sh"));
    assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o700);
    assert_eq!(read(&path), "#!/bin/sh\necho hi\n");
    // Writing it again (a relaunch) replaces it.
    write_script(dir.path(), JobId(42), 3, "#!/bin/sh\necho again\n", None).unwrap();
    assert_eq!(read(&path), "#!/bin/sh\necho again\n");
}

#[test]
fn users_are_resolved_on_this_node_and_claims_checked() {
    let root = resolve_user("root").unwrap();
    assert_eq!((root.uid, root.gid), (0, 0));
    let err = resolve_user("no-such-user-corral").unwrap_err();
    assert!(matches!(err, ProcessError::UnknownUser { .. }), "{err:?}");
    assert!(err.to_string().contains("no-such-user-corral"));

    let mut claim = spec("root", 1, 0);
    claim.uid = 1000;
    match run_as_for_job(&claim) {
        Ok(None) => assert!(!geteuid().is_root(), "not root: jobs run as the agent"),
        Err(ProcessError::UidMismatch {
            claimed, actual, ..
        }) => {
            assert_eq!((claimed, actual), (1000, 0));
        }
        other => panic!("unexpected {other:?}"),
    }
    claim.uid = 0;
    claim.gid = 0;
    let run_as = run_as_for_job(&claim).unwrap();
    if geteuid().is_root() {
        assert_eq!(run_as.map(|r| (r.uid, r.gid)), Some((0, 0)));
    } else {
        assert_eq!(run_as, None);
    }
}

/// `nobody`, when this test runs as root and the user exists.
fn nobody_when_root() -> Option<RunAs> {
    if !geteuid().is_root() {
        eprintln!("skipped: running jobs as another user needs root");
        return None;
    }
    match resolve_user("nobody") {
        Ok(nobody) => Some(nobody),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// A directory `nobody` can enter, holding a workdir owned by `nobody`.
fn dirs_for(nobody: &RunAs) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let workdir = dir.path().join("work");
    fs::create_dir(&workdir).unwrap();
    chown(&workdir, Some(nobody.uid), Some(nobody.gid)).unwrap();
    (dir, workdir)
}

#[tokio::test]
async fn as_root_a_job_runs_as_its_user_and_owns_its_files() {
    through_the_agent();
    let Some(nobody) = nobody_when_root() else {
        return;
    };
    let (dir, workdir) = dirs_for(&nobody);
    let mut spec = script_spec(
        dir.path(),
        "#!/bin/sh\nid -u\nid -g\necho made > made-by-job\n",
        Some(nobody.clone()),
    );
    assert_eq!(fs::metadata(&spec.program).unwrap().uid(), nobody.uid);
    spec.workdir = workdir.clone();
    spec.stdout = PathBuf::from("slurm-7.out");
    spec.stderr = PathBuf::from("slurm-7.out");
    let status = JobProcess::spawn(&spec).unwrap().wait().await.unwrap();
    assert!(status.is_success(), "{status:?}");
    let out = workdir.join("slurm-7.out");
    assert_eq!(read(&out), format!("{}\n{}\n", nobody.uid, nobody.gid));
    let meta = fs::metadata(&out).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (nobody.uid, 0o644));
    assert_eq!(
        fs::metadata(workdir.join("made-by-job")).unwrap().uid(),
        nobody.uid
    );
}

#[tokio::test]
async fn as_root_output_is_never_written_through_a_link_or_where_the_user_cannot() {
    through_the_agent();
    let Some(nobody) = nobody_when_root() else {
        return;
    };
    let (dir, workdir) = dirs_for(&nobody);
    let secret = dir.path().join("root-owned");
    fs::write(&secret, "untouched\n").unwrap();
    std::os::unix::fs::symlink(&secret, workdir.join("link.out")).unwrap();
    let mut spec = script_spec(dir.path(), "#!/bin/sh\necho pwned\n", Some(nobody.clone()));
    spec.workdir = workdir.clone();
    spec.stdout = PathBuf::from("link.out");
    spec.stderr = PathBuf::from("link.out");
    let err = JobProcess::spawn(&spec).unwrap_err();
    assert!(
        matches!(
            err,
            ProcessError::UnsafeOutputFile { .. } | ProcessError::OutputFile { .. }
        ),
        "{err:?}"
    );
    assert_eq!(read(&secret), "untouched\n");

    // A directory only root may write to: the user's rights decide, not root's.
    spec.stdout = dir.path().join("root-dir.out");
    spec.stderr = spec.stdout.clone();
    let err = JobProcess::spawn(&spec).unwrap_err();
    assert!(matches!(err, ProcessError::OutputFile { .. }), "{err:?}");
    assert!(err.to_string().contains("nobody"), "{err}");
    assert!(!dir.path().join("root-dir.out").exists());
}

#[tokio::test]
async fn output_to_dev_null_is_accepted_with_and_without_a_user_switch() {
    through_the_agent();
    for user in [None, nobody_when_root()] {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let mut spec = script_spec(dir.path(), "#!/bin/sh\necho discarded\n", user.clone());
        spec.workdir = std::env::temp_dir();
        spec.stdout = PathBuf::from("/dev/null");
        spec.stderr = PathBuf::from("/dev/null");
        let status = JobProcess::spawn(&spec)
            .unwrap_or_else(|e| panic!("user {user:?}: {e}"))
            .wait()
            .await
            .unwrap();
        assert!(status.is_success(), "{status:?}");
    }
}

#[tokio::test]
async fn as_root_a_job_enters_its_directory_as_its_user() {
    through_the_agent();
    let Some(nobody) = nobody_when_root() else {
        return;
    };
    // A directory anyone could read, behind one closed to the user: root
    // could enter it, the user cannot.
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let closed = dir.path().join("closed");
    fs::create_dir(&closed).unwrap();
    fs::set_permissions(&closed, fs::Permissions::from_mode(0o700)).unwrap();
    let inner = closed.join("inner");
    fs::create_dir(&inner).unwrap();
    fs::set_permissions(&inner, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(inner.join("secret"), "root's\n").unwrap();
    let own = dir.path().join("own");
    fs::create_dir(&own).unwrap();
    chown(&own, Some(nobody.uid), Some(nobody.gid)).unwrap();
    let mut spec = script_spec(dir.path(), "#!/bin/sh\ncat secret\n", Some(nobody.clone()));
    spec.workdir = inner.clone();
    spec.stdout = own.join("out");
    spec.stderr = own.join("out");
    let outcome = match JobProcess::spawn(&spec) {
        Err(e) => Err(e.to_string()),
        Ok(mut process) => Ok(process.wait().await.unwrap()),
    };
    let out = fs::read_to_string(own.join("out")).unwrap_or_default();
    assert!(!out.contains("root's"), "the job read {out:?}");
    match outcome {
        Err(e) => assert!(e.contains("ermission denied"), "{e}"),
        Ok(status) => assert!(!status.is_success(), "{status:?}: {out}"),
    }
}
