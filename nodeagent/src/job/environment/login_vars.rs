//! `SLURM_GET_USER_ENV=1` (sbatch sets it for any `--export` but plain `ALL`):
//! the job starts from its user's login environment, under the variables it
//! exported. Slurm runs `su - USER -c env` for it; corral sets what a login
//! sets before any profile runs: `HOME`, `SHELL`, `USER` and `LOGNAME` from the
//! node's user database, and `PATH` as `su -` does (`ENV_PATH` of
//! `/etc/login.defs`). Profiles (`~/.bash_profile`, `/etc/profile.d`) are not
//! run.

use super::{Env, set};

/// What a login gives a user, read from this node by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginAccount {
    /// The user name.
    pub user: String,
    /// The home directory.
    pub home: String,
    /// The login shell.
    pub shell: String,
    /// The login `PATH`.
    pub path: String,
}

/// Whether the job asked for its user's login environment.
pub fn wants_login_environment(env: &Env) -> bool {
    env.get("SLURM_GET_USER_ENV").is_some_and(|v| v == "1")
}

/// Adds the login variables the job's own environment does not set.
pub fn add(env: &mut Env, account: &LoginAccount) {
    for (name, value) in [
        ("HOME", &account.home),
        ("SHELL", &account.shell),
        ("USER", &account.user),
        ("LOGNAME", &account.user),
        ("PATH", &account.path),
    ] {
        if !env.contains_key(name) {
            set(env, name, value);
        }
    }
}

/// The `PATH` a login gets: `ENV_PATH` (`ENV_SUPATH` for root) of a
/// `login.defs` text, without its `PATH=` prefix; Debian's default without one.
pub fn login_path(login_defs: Option<&str>, root: bool) -> String {
    let key = if root { "ENV_SUPATH" } else { "ENV_PATH" };
    login_defs
        .into_iter()
        .flat_map(str::lines)
        .filter_map(|line| line.trim().strip_prefix(key))
        .filter(|rest| rest.starts_with([' ', '\t']))
        .map(|rest| rest.trim())
        .map(|value| value.strip_prefix("PATH=").unwrap_or(value).to_string())
        .next_back()
        .unwrap_or_else(|| {
            if root {
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string()
            } else {
                "/usr/local/bin:/usr/bin:/bin".to_string()
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_variables_fill_only_what_the_job_did_not_export() {
        let account = LoginAccount {
            user: "alice".into(),
            home: "/home/alice".into(),
            shell: "/bin/bash".into(),
            path: "/usr/bin:/bin".into(),
        };
        let mut env = Env::from([
            ("SLURM_GET_USER_ENV".to_string(), "1".to_string()),
            ("PATH".to_string(), "/opt/conda/bin".to_string()),
        ]);
        assert!(wants_login_environment(&env));
        add(&mut env, &account);
        assert_eq!(env["HOME"], "/home/alice");
        assert_eq!(env["LOGNAME"], "alice");
        assert_eq!(env["SHELL"], "/bin/bash");
        assert_eq!(env["PATH"], "/opt/conda/bin");
        assert!(!wants_login_environment(&Env::new()));
    }

    #[test]
    fn the_login_path_comes_from_login_defs() {
        let defs = "# comment\nENV_SUPATH\tPATH=/usr/sbin:/usr/bin\nENV_PATH PATH=/usr/local/bin:/usr/bin:/bin:/usr/games\n";
        assert_eq!(
            login_path(Some(defs), false),
            "/usr/local/bin:/usr/bin:/bin:/usr/games"
        );
        assert_eq!(login_path(Some(defs), true), "/usr/sbin:/usr/bin");
        assert_eq!(login_path(None, false), "/usr/local/bin:/usr/bin:/bin");
    }
}
