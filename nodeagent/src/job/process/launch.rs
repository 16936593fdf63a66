//! Building the command that starts a program as the job's user, with exactly
//! the environment given: directly with setuid/setgid when the user has no
//! supplementary groups, or through util-linux `setpriv` when it has (std
//! cannot set supplementary groups on stable Rust without `unsafe`, which this
//! workspace forbids).
//!
//! `setpriv` itself runs as root, so the variables through which a dynamic
//! loader or libc runs code or reads files (`LD_PRELOAD`, `GCONV_PATH`,
//! `GLIBC_TUNABLES`, ...: glibc's secure-mode list and every `LD_*`; and the
//! locale's and time zone's, which make libc read files) must never reach it:
//! a job could otherwise run its own code as root. They are set again after
//! the switch by `env`, running as the user, for the job's program. Every
//! other variable stays in the environment (never in an argument, which
//! `/proc/PID/cmdline` shows to every user: jobs carry tokens). A variable
//! name that is empty or holds `=` or NUL (which would read as another name
//! once joined) is refused on every path.
//!
//! The working directory is the job's, so it is entered as the user: std
//! changes directory after it switches ids, and through `setpriv` the user's
//! `env --chdir` does (root entering it first would let a job start inside a
//! directory its user may not reach, and read what is there). An `env`
//! without `--chdir` (coreutils before 8.28) leaves root to enter it, and the
//! agent says so once.

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

/// Variables a loader or libc running as root would act on (glibc's
/// `unsecvars.h`), and the locale's and time zone's; kept from `setpriv`.
const ROOT_UNSAFE_VARS: &[&str] = &[
    "GCONV_PATH",
    "GETCONF_DIR",
    "GLIBC_TUNABLES",
    "HOSTALIASES",
    "LANG",
    "LANGUAGE",
    "LOCALDOMAIN",
    "LOCPATH",
    "MALLOC_TRACE",
    "NIS_PATH",
    "NLSPATH",
    "RESOLV_HOST_CONF",
    "RES_OPTIONS",
    "TMPDIR",
    "TZ",
    "TZDIR",
];

/// Whether a root process must not start with variable `name`.
fn root_unsafe(name: &str) -> bool {
    name.starts_with("LD_") || name.starts_with("LC_") || ROOT_UNSAFE_VARS.contains(&name)
}

/// Whether `env` (at `env_program`) takes `--chdir` (coreutils 8.28 and
/// later); asked once.
fn env_takes_chdir(env_program: &Path) -> bool {
    static TAKES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TAKES.get_or_init(|| {
        let takes = Command::new(env_program)
            .args(["--chdir=/", "--", "true"])
            .env_clear()
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !takes {
            tracing::warn!(
                env = %env_program.display(),
                "this env has no --chdir (coreutils before 8.28): jobs of users with supplementary groups enter their working directory as root, not as the user; upgrade coreutils"
            );
        }
        takes
    })
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
            env_chdir: env_takes_chdir(&env_program),
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
    /// Whether `env` enters the working directory (as the user).
    env_chdir: bool,
}

/// `setpriv` (running as root, in `/`) switching to the user and groups of
/// `switch`, then `env` (running as the user) entering `workdir` and setting
/// the variables root must not get, then `program`. `setpriv` gets the rest.
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
    type Vars<'a> = Vec<(&'a String, &'a String)>;
    let (unsafe_vars, plain): (Vars<'_>, Vars<'_>) =
        env.iter().partition(|(name, _)| root_unsafe(name));
    let chdir_as_user = switch.env_chdir;
    let mut inner: Vec<OsString> = Vec::new();
    if chdir_as_user {
        let mut chdir = OsString::from("--chdir=");
        chdir.push(workdir.as_os_str());
        inner.push(chdir);
    }
    inner.push("--".into());
    inner.extend(
        unsafe_vars
            .iter()
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
        .envs(plain)
        .current_dir(if chdir_as_user {
            Path::new("/")
        } else {
            workdir
        });
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
    fn root_unsafe_variables_never_reach_setpriv_and_none_is_an_argument_but_those() {
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
            ("LC_ALL", "../../tmp/x"),
            ("WANDB_API_KEY", "secret"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let switch = Setpriv {
            setpriv: Path::new("/usr/bin/setpriv"),
            env_program: Path::new("/usr/bin/env"),
            user: &user,
            groups: &[100, 2000],
            env_chdir: true,
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
        let root_side: Vec<(String, String)> = command
            .get_envs()
            .filter_map(|(k, v)| {
                Some((
                    k.to_string_lossy().into_owned(),
                    v?.to_string_lossy().into_owned(),
                ))
            })
            .collect();
        assert_eq!(
            root_side,
            vec![
                ("KEEP".to_string(), "1".to_string()),
                ("PATH".to_string(), "/usr/bin:/bin".to_string()),
                ("WANDB_API_KEY".to_string(), "secret".to_string())
            ]
        );
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
                "--chdir=/home/alice/run",
                "--",
                "GCONV_PATH=/home/alice/gconv",
                "LC_ALL=../../tmp/x",
                "LD_PRELOAD=/home/alice/evil.so",
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
