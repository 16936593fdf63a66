//! Building the command that starts a program as the job's user: directly with
//! setuid/setgid when the user has no supplementary groups, or through util-linux
//! `setpriv` when it has (std cannot set supplementary groups on stable Rust
//! without `unsafe`, which this workspace forbids).

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

/// A command running `program` with `args` as `user` (as the agent's own user
/// when `None`). Environment, directory and stdio are left to the caller.
pub(super) fn command_as<A: AsRef<OsStr>>(
    program: &Path,
    args: &[A],
    user: Option<&RunAs>,
) -> Result<Command, ProcessError> {
    let Some(user) = user else {
        let mut command = Command::new(program);
        command.args(args);
        return Ok(command);
    };
    let (euid, egid) = (geteuid().as_raw(), getegid().as_raw());
    if euid != 0 {
        if user.uid == euid && user.gid == egid {
            let mut command = Command::new(program);
            command.args(args);
            return Ok(command);
        }
        return Err(ProcessError::NotRoot {
            user: user.user.clone(),
            uid: user.uid,
            euid,
        });
    }
    let groups = supplementary_groups(user)?;
    if groups.iter().all(|g| *g == user.gid) {
        // std drops every supplementary group when it switches the uid.
        let mut command = Command::new(program);
        command.args(args).uid(user.uid).gid(user.gid);
        return Ok(command);
    }
    let setpriv = find_setpriv().ok_or_else(|| ProcessError::SetprivMissing {
        user: user.user.clone(),
    })?;
    let mut command = Command::new(setpriv);
    command.args(setpriv_args(user, &groups, program, args));
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

/// The first `setpriv` found.
fn find_setpriv() -> Option<PathBuf> {
    SETPRIV_PATHS
        .iter()
        .map(PathBuf::from)
        .find(|path| path.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

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
