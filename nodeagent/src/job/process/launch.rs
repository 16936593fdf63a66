//! Building the command that starts a program as the job's user, with exactly
//! the environment given: directly with setuid/setgid when the user has no
//! supplementary groups, or through util-linux `setpriv` when it has (std
//! cannot set supplementary groups on stable Rust without `unsafe`, which this
//! workspace forbids).
//!
//! `setpriv` itself runs as root, so the variables through which a dynamic
//! loader or libc runs code or reads files (`LD_PRELOAD`, `LD_LIBRARY_PATH`,
//! `GCONV_PATH`, ...: glibc's secure-mode list and every `LD_*`) must never
//! reach it: a job could otherwise run its own code as root. They are set
//! again after the switch, by `env` running as the user, for the job's program.

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

/// Variables a loader or libc running as root would act on (glibc's
/// `unsecvars.h`), kept from `setpriv`; every `LD_*` is too.
const LOADER_VARS: &[&str] = &[
    "GCONV_PATH",
    "GETCONF_DIR",
    "GLIBC_TUNABLES",
    "HOSTALIASES",
    "LOCALDOMAIN",
    "LOCPATH",
    "MALLOC_TRACE",
    "NIS_PATH",
    "NLSPATH",
    "RESOLV_HOST_CONF",
    "RES_OPTIONS",
    "TMPDIR",
    "TZDIR",
];

/// Whether a root process must not start with variable `name`.
fn loader_var(name: &str) -> bool {
    name.starts_with("LD_") || LOADER_VARS.contains(&name)
}

/// A command running `program` with `args` as `user` (as the agent's own user
/// when `None`), with exactly `env`. Directory and stdio are left to the caller.
pub(super) fn command_as<A: AsRef<OsStr>>(
    program: &Path,
    args: &[A],
    user: Option<&RunAs>,
    env: &BTreeMap<String, String>,
) -> Result<Command, ProcessError> {
    let direct = || {
        let mut command = Command::new(program);
        command.args(args).env_clear().envs(env);
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
        // the program is executed after the switch.
        let mut command = direct();
        command.uid(user.uid).gid(user.gid);
        return Ok(command);
    }
    let missing = || ProcessError::SetprivMissing {
        user: user.user.clone(),
    };
    let setpriv = find(SETPRIV_PATHS).ok_or_else(missing)?;
    let env_program = find(ENV_PATHS).ok_or_else(missing)?;
    through_setpriv(&setpriv, &env_program, user, &groups, program, args, env)
}

/// `setpriv` (at `setpriv`, running as root) switching to `user` with
/// `groups`, then `env` (at `env_program`, running as the user) setting the
/// loader's variables, then `program`. `setpriv` gets `env` without them.
fn through_setpriv<A: AsRef<OsStr>>(
    setpriv: &Path,
    env_program: &Path,
    user: &RunAs,
    groups: &[u32],
    program: &Path,
    args: &[A],
    env: &BTreeMap<String, String>,
) -> Result<Command, ProcessError> {
    type Vars<'a> = Vec<(&'a String, &'a String)>;
    let (loader, plain): (Vars<'_>, Vars<'_>) = env.iter().partition(|(name, _)| loader_var(name));
    // `env` reads NAME=VALUE words up to the program: a program whose name
    // holds '=' would be taken for one.
    if !loader.is_empty() && program.as_os_str().to_string_lossy().contains('=') {
        return Err(ProcessError::Spawn {
            program: program.to_path_buf(),
            workdir: PathBuf::from("/"),
            source: std::io::Error::other(
                "a program whose name contains '=' cannot be started with loader variables (LD_*) as a user with supplementary groups; rename it",
            ),
        });
    }
    let mut inner: Vec<OsString> = loader
        .iter()
        .map(|(name, value)| OsString::from(format!("{name}={value}")))
        .collect();
    inner.push(program.as_os_str().to_owned());
    inner.extend(args.iter().map(|a| a.as_ref().to_owned()));
    let mut command = Command::new(setpriv);
    command
        .args(setpriv_args(user, groups, env_program, &inner))
        .env_clear()
        .envs(plain);
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
    fn loader_variables_never_reach_setpriv_and_are_set_again_after_the_switch() {
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
        let command = through_setpriv(
            Path::new("/usr/bin/setpriv"),
            Path::new("/usr/bin/env"),
            &user,
            &[100, 2000],
            Path::new("/usr/bin/python3"),
            &["train.py"],
            &env,
        )
        .expect("command");
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
                ("PATH".to_string(), "/usr/bin:/bin".to_string())
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
                "GCONV_PATH=/home/alice/gconv",
                "LD_PRELOAD=/home/alice/evil.so",
                "/usr/bin/python3",
                "train.py"
            ]
        );
        let odd = through_setpriv(
            Path::new("/usr/bin/setpriv"),
            Path::new("/usr/bin/env"),
            &user,
            &[100, 2000],
            Path::new("/tmp/a=b"),
            &["x"],
            &env,
        );
        assert!(odd.is_err());
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
