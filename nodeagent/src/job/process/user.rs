//! The user a job runs as: looked up on this node, never taken from the job's
//! claim. The state machine cannot check the uid a client claims; the agent
//! resolves the user name here and refuses a job whose claim disagrees.

use std::ffi::CString;

use corral_state::job::JobSpec;
use nix::unistd::{Gid, User, geteuid, getgrouplist};

use super::ProcessError;

/// Who a job's processes run as, when the agent runs as root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    /// The user's uid on this node.
    pub uid: u32,
    /// The group the job runs with (the user's primary group unless the job
    /// was submitted with another of the user's groups).
    pub gid: u32,
    /// The user name (for supplementary groups and messages).
    pub user: String,
}

/// Looks `name` up in this node's user database.
pub fn resolve_user(name: &str) -> Result<RunAs, ProcessError> {
    match User::from_name(name) {
        Ok(Some(user)) => Ok(RunAs {
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
            user: name.to_string(),
        }),
        Ok(None) => Err(ProcessError::UnknownUser {
            user: name.to_string(),
        }),
        Err(source) => Err(ProcessError::UserLookup {
            user: name.to_string(),
            source,
        }),
    }
}

/// Who the job of `spec` runs as on this node: `None` when the agent is not
/// root (jobs then run as the agent's own user), otherwise the job's user,
/// refused when the claimed uid is not the user's uid here or the claimed gid
/// is not one of the user's groups here.
pub fn run_as_for_job(spec: &JobSpec) -> Result<Option<RunAs>, ProcessError> {
    if !geteuid().is_root() {
        return Ok(None);
    }
    let resolved = resolve_user(&spec.user)?;
    if resolved.uid != spec.uid {
        return Err(ProcessError::UidMismatch {
            user: spec.user.clone(),
            claimed: spec.uid,
            actual: resolved.uid,
        });
    }
    if spec.gid != resolved.gid && !supplementary_groups(&resolved)?.contains(&spec.gid) {
        return Err(ProcessError::GidNotAllowed {
            user: spec.user.clone(),
            claimed: spec.gid,
        });
    }
    Ok(Some(RunAs {
        gid: spec.gid,
        ..resolved
    }))
}

/// The groups `user` has on this node when running with `user.gid`, that group
/// included, ascending and without duplicates.
pub fn supplementary_groups(user: &RunAs) -> Result<Vec<u32>, ProcessError> {
    let name = CString::new(user.user.as_str()).map_err(|_| ProcessError::UnknownUser {
        user: user.user.clone(),
    })?;
    let groups = getgrouplist(&name, Gid::from_raw(user.gid)).map_err(|source| {
        ProcessError::UserLookup {
            user: user.user.clone(),
            source,
        }
    })?;
    let mut groups: Vec<u32> = groups.into_iter().map(Gid::as_raw).collect();
    groups.push(user.gid);
    groups.sort_unstable();
    groups.dedup();
    Ok(groups)
}

/// What a login gives `name` on this node (`HOME`, `SHELL`, `PATH`), for a
/// job that asked for its login environment; `None` when the node does not
/// know the user.
pub fn login_account(name: &str) -> Option<crate::job::environment::login_vars::LoginAccount> {
    use crate::job::environment::login_vars::{LoginAccount, login_path};
    let user = User::from_name(name).ok().flatten()?;
    let defs = std::fs::read_to_string("/etc/login.defs").ok();
    Some(LoginAccount {
        user: name.to_string(),
        home: user.dir.display().to_string(),
        shell: user.shell.display().to_string(),
        path: login_path(defs.as_deref(), user.uid.is_root()),
    })
}
