//! Building the command that starts a program as the job's user, with exactly
//! the environment given: directly with setuid/setgid when the user has no
//! supplementary groups, or through util-linux `setpriv` when it has (std
//! cannot set supplementary groups on stable Rust without `unsafe`, which this
//! workspace forbids).
//!
//! `setpriv` itself runs as root, so none of the job's variables may reach it:
//! through the dynamic loader or libc (`LD_PRELOAD`, `GCONV_PATH`, `LOCPATH`,
//! `GLIBC_TUNABLES`, ...) a job could run its own code as root, and a list of
//! dangerous names misses what it does not name (or a name that holds `=`).
//! So `setpriv` starts with an empty environment, and `env -i`, running as the
//! user after the switch, sets every variable for the job's program. A
//! variable name that is empty or holds `=` or NUL is refused either way.
//!
//! The working directory is the job's, so it is entered as the user: std
//! changes directory after it switches ids, and through `setpriv` the user's
//! `env --chdir` does (root entering it first would let a job start inside a
//! directory its user may not reach, and read what is there).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::unistd::{getegid, geteuid};

use super::ProcessError;
use super::user::{RunAs, supplementary_groups};

/// Where `setpriv` is looked for.
const SETPRIV_PATHS: &[&str] = &[
    "/usr/bin/setpriv",
    "/bin/setpriv",
    "/usr/sbin/setpriv",
    "/sbin/setpriv",
];

/// Where `env` is looked for (it sets the loader's variables after setpriv).
const ENV_PATHS: &[&str] = &["/usr/bin/env", "/bin/env"];

/// Where util-linux's `setsid` is looked for.
const SETSID_PATHS: &[&str] = &["/usr/bin/setsid", "/bin/setsid"];

/// util-linux's `setsid`, if this node has it.
pub(super) fn setsid_program() -> Option<PathBuf> {
    find(SETSID_PATHS)
}

/// A variable name no environment can carry as given.
fn bad_variable(name: &str) -> bool {
    name.is_empty() || name.contains(['=', '\0'])
}

/// A command running `program` with `args` as `user` (as the agent's own user
/// when `None`), with exactly `env`, in `workdir` (entered as the user).
/// Stdio is left to the caller.
pub(super) fn command_as<A: AsRef<OsStr>>(
    program: &Path,
    args: &[A],
    user: Option<&RunAs>,
    env: &BTreeMap<String, String>,
    workdir: &Path,
) -> Result<Command, ProcessError> {
    if let Some(name) = env.keys().find(|name| bad_variable(name)) {
        return Err(ProcessError::Spawn {
            program: program.to_path_buf(),
            workdir: workdir.to_path_buf(),
            source: std::io::Error::other(format!(
                "the environment variable name {name:?} is empty or holds '=' or NUL; no environment can carry it"
            )),
        });
    }
    let direct = || {
        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .envs(env)
            .current_dir(workdir);
        command
    };
    let Some(user) = user else {
        return Ok(direct());
    };
    let (euid, egid) = (geteuid().as_raw(), getegid().as_raw());
    if euid != 0 {
        if user.uid == euid && user.gid == egid {
            return Ok(direct());
        }
        return Err(ProcessError::NotRoot {
            user: user.user.clone(),
            uid: user.uid,
            euid,
        });
    }
    let groups = supplementary_groups(user)?;
    if groups.iter().all(|g| *g == user.gid) {
        // std drops every supplementary group when it switches the uid, and
        // changes directory and executes the program after the switch.
        let mut command = direct();
        command.uid(user.uid).gid(user.gid);
        return Ok(command);
    }
    let missing = || ProcessError::SetprivMissing {
        user: user.user.clone(),
    };
    let setpriv = find(SETPRIV_PATHS).ok_or_else(missing)?;
    let env_program = find(ENV_PATHS).ok_or_else(missing)?;
    through_setpriv(
        &Setpriv {
            setpriv: &setpriv,
            env_program: &env_program,
            user,
            groups: &groups,
        },
        program,
        args,
        env,
        workdir,
    )
}

/// How to switch to a user through `setpriv`.
struct Setpriv<'a> {
    /// `setpriv` itself (it runs as root).
    setpriv: &'a Path,
    /// `env`, which runs as the user.
    env_program: &'a Path,
    /// Who to become.
    user: &'a RunAs,
    /// With which groups.
    groups: &'a [u32],
}

/// `setpriv` (running as root, in `/`, with no environment) switching to the
/// user and groups of `switch`, then `env -i` (running as the user) entering
/// `workdir` and setting every variable of `env`, then `program`.
fn through_setpriv<A: AsRef<OsStr>>(
    switch: &Setpriv<'_>,
    program: &Path,
    args: &[A],
    env: &BTreeMap<String, String>,
    workdir: &Path,
) -> Result<Command, ProcessError> {
    // `env` reads NAME=VALUE words up to the program: a program whose name
    // holds '=' would be taken for one.
    if program.as_os_str().to_string_lossy().contains('=') {
        return Err(ProcessError::Spawn {
            program: program.to_path_buf(),
            workdir: workdir.to_path_buf(),
            source: std::io::Error::other(
                "a program whose name contains '=' cannot be started as a user with supplementary groups; rename it",
            ),
        });
    }
    let mut chdir = OsString::from("--chdir=");
    chdir.push(workdir.as_os_str());
    let mut inner: Vec<OsString> = vec!["-i".into(), chdir, "--".into()];
    inner.extend(
        env.iter()
            .map(|(name, value)| OsString::from(format!("{name}={value}"))),
    );
    inner.push(program.as_os_str().to_owned());
    inner.extend(args.iter().map(|a| a.as_ref().to_owned()));
    let mut command = Command::new(switch.setpriv);
    command
        .args(setpriv_args(
            switch.user,
            switch.groups,
            switch.env_program,
            &inner,
        ))
        .env_clear()
        .current_dir("/");
    Ok(command)
}

/// `setpriv`'s arguments: real and effective ids, the exact group list, then
/// the program (which setpriv executes in place, keeping the pid).
fn setpriv_args<A: AsRef<OsStr>>(
    user: &RunAs,
    groups: &[u32],
    program: &Path,
    args: &[A],
) -> Vec<OsString> {
    let groups = groups
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut argv: Vec<OsString> = vec![
        format!("--reuid={}", user.uid).into(),
        format!("--regid={}", user.gid).into(),
        format!("--groups={groups}").into(),
        "--".into(),
        program.as_os_str().to_owned(),
    ];
    argv.extend(args.iter().map(|a| a.as_ref().to_owned()));
    argv
}

/// The first of `paths` that exists.
fn find(paths: &[&str]) -> Option<PathBuf> {
    paths.iter().map(PathBuf::from).find(|path| path.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_variable_reaches_setpriv_and_all_are_set_again_after_the_switch() {
        let user = RunAs {
            uid: 1000,
            gid: 100,
            user: "alice".into(),
        };
        let env: BTreeMap<String, String> = [
            ("LD_PRELOAD", "/home/alice/evil.so"),
            ("GCONV_PATH", "/home/alice/gconv"),
            ("PATH", "/usr/bin:/bin"),
            ("KEEP", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let switch = Setpriv {
            setpriv: Path::new("/usr/bin/setpriv"),
            env_program: Path::new("/usr/bin/env"),
            user: &user,
            groups: &[100, 2000],
        };
        let command = through_setpriv(
            &switch,
            Path::new("/usr/bin/python3"),
            &["train.py"],
            &env,
            Path::new("/home/alice/run"),
        )
        .expect("command");
        // Root does not enter the job's directory: the user's env does.
        assert_eq!(command.get_current_dir(), Some(Path::new("/")));
        // Root's setpriv has no environment at all.
        assert_eq!(command.get_envs().count(), 0);
        let args: Vec<String> = command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "--reuid=1000",
                "--regid=100",
                "--groups=100,2000",
                "--",
                "/usr/bin/env",
                "-i",
                "--chdir=/home/alice/run",
                "--",
                "GCONV_PATH=/home/alice/gconv",
                "KEEP=1",
                "LD_PRELOAD=/home/alice/evil.so",
                "PATH=/usr/bin:/bin",
                "/usr/bin/python3",
                "train.py"
            ]
        );
        let odd = through_setpriv(
            &switch,
            Path::new("/tmp/a=b"),
            &["x"],
            &BTreeMap::new(),
            Path::new("/tmp"),
        );
        assert!(odd.is_err());
    }

    #[test]
    fn a_variable_name_holding_an_equals_sign_is_refused_on_every_path() {
        // `GCONV_PATH=/x` as a name would read as GCONV_PATH once joined.
        let env = BTreeMap::from([("GCONV_PATH=/home/u/g".to_string(), String::new())]);
        for user in [
            None,
            Some(RunAs {
                uid: 1000,
                gid: 100,
                user: "alice".into(),
            }),
        ] {
            let refused = command_as(
                Path::new("/bin/true"),
                &["x"],
                user.as_ref(),
                &env,
                Path::new("/"),
            );
            assert!(refused.is_err(), "{user:?}");
        }
        let empty = BTreeMap::from([(String::new(), "x".to_string())]);
        assert!(command_as(Path::new("/bin/true"), &["x"], None, &empty, Path::new("/")).is_err());
    }

    #[test]
    fn setpriv_switches_ids_and_groups_then_runs_the_program() {
        let user = RunAs {
            uid: 1000,
            gid: 100,
            user: "alice".into(),
        };
        let argv = setpriv_args(
            &user,
            &[100, 2000, 3000],
            Path::new("/spool/job1.sh"),
            &["a b", "c"],
        );
        let expected: Vec<OsString> = [
            "--reuid=1000",
            "--regid=100",
            "--groups=100,2000,3000",
            "--",
            "/spool/job1.sh",
            "a b",
            "c",
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        assert_eq!(argv, expected);
    }
}
