//! sacctmgr's `add`, `modify` and `delete` as corral admin changes, planned
//! from the records the cluster holds (pure: no I/O), with the summary
//! sacctmgr prints before it asks. Settings corral does not keep
//! (`Organization=`) are accepted with a warning; unknown ones, and limits on
//! TRES other than `gres/gpu`, are refused by name and change nothing.

use corral_proto::admin::AdminChange;
use corral_state::account::{Account, AssociationLimits, ROOT_ACCOUNT, User};
use corral_state::ids::Role;
use corral_state::partition::PreemptMode;
use corral_state::qos::Qos;
use corral_state::slurm::duration::{TimeLimit, parse_time_limit};

use super::Current;
use super::noun;
use super::parse::{Entity, Request, Verb};

/// What a command will do.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// What sacctmgr prints before asking.
    pub summary: String,
    /// The changes, one per record.
    pub changes: Vec<AdminChange>,
    /// Settings accepted without effect.
    pub warnings: Vec<String>,
}

/// Plans `request` (add, modify or delete) against `current`.
pub fn plan(request: &Request, current: &Current) -> Result<Planned, String> {
    let mut planned = Planned {
        summary: String::new(),
        changes: Vec::new(),
        warnings: Vec::new(),
    };
    match request.verb {
        Verb::Add => add(request, current, &mut planned)?,
        Verb::Modify => modify(request, current, &mut planned)?,
        Verb::Delete => delete(request, current, &mut planned)?,
        Verb::Show => {}
    }
    Ok(planned)
}

fn add(request: &Request, current: &Current, planned: &mut Planned) -> Result<(), String> {
    let (title, mut lines) = match request.entity {
        Entity::Account => ("Account(s)", Vec::new()),
        Entity::User => ("User(s)", Vec::new()),
        _ => ("QOS(s)", Vec::new()),
    };
    let mut added = Vec::new();
    for name in &request.names {
        let change = match request.entity {
            Entity::Account => {
                if current.accounts.iter().any(|a| &a.name == name) {
                    continue;
                }
                let mut account = Account {
                    name: name.clone(),
                    parent: Some(ROOT_ACCOUNT.to_string()),
                    shares: 1,
                    default_qos: None,
                    description: name.clone(),
                    limits: Default::default(),
                };
                apply_account(&mut account, &request.settings, &mut planned.warnings)?;
                lines = vec![
                    format!("  Description     = {}", account.description),
                    format!(
                        "  Organization    = {}",
                        setting(&request.settings, &["organization", "org"]).unwrap_or(name)
                    ),
                ];
                AdminChange::SetAccount(account)
            }
            Entity::User => {
                let existing = current.users.iter().find(|u| &u.name == name);
                let mut user = existing.cloned().unwrap_or_else(|| User {
                    name: name.clone(),
                    default_account: String::new(),
                    accounts: Default::default(),
                    role: Role::User,
                    limits: Default::default(),
                });
                let before = user.clone();
                apply_user(&mut user, &request.settings)?;
                if user.accounts.is_empty() {
                    return Err("Need name of account to add user to (Account=NAME)".into());
                }
                if existing.is_some_and(|u| *u == user) {
                    continue;
                }
                if before.default_account.is_empty() {
                    lines = vec![format!("  Default Account = {}", user.default_account)];
                }
                AdminChange::SetUser(user)
            }
            _ => {
                if current.qos.iter().any(|q| &q.name == name) {
                    continue;
                }
                let mut qos = Qos {
                    name: name.clone(),
                    priority: 0,
                    preempts: Default::default(),
                    preempt_mode: None,
                    grp_gpus_per_account: None,
                    grp_gpu_minutes_per_account: None,
                    max_wall_seconds: None,
                    max_gpus_per_user: None,
                    max_jobs_per_user: None,
                };
                apply_qos(&mut qos, &request.settings, &mut planned.warnings)?;
                lines = request
                    .settings
                    .iter()
                    .map(|(k, v)| format!("  {k:<15} = {v}"))
                    .collect();
                AdminChange::SetQos(qos)
            }
        };
        added.push(name.clone());
        planned.changes.push(change);
    }
    if added.is_empty() {
        planned.summary = " Nothing new added.\n".into();
        return Ok(());
    }
    let mut summary = format!(" Adding {title}\n");
    for name in &added {
        summary.push_str(&format!("  {name}\n"));
    }
    if !lines.is_empty() {
        summary.push_str(" Settings\n");
        for line in lines {
            summary.push_str(&line);
            summary.push('\n');
        }
    }
    planned.summary = summary;
    Ok(())
}

fn modify(request: &Request, current: &Current, planned: &mut Planned) -> Result<(), String> {
    if request.settings.is_empty() {
        return Err("You didn't give me anything to set".into());
    }
    let mut modified = Vec::new();
    for name in &request.names {
        let change = match request.entity {
            Entity::Account => {
                let Some(mut account) = current.accounts.iter().find(|a| &a.name == name).cloned()
                else {
                    continue;
                };
                apply_account(&mut account, &request.settings, &mut planned.warnings)?;
                AdminChange::SetAccount(account)
            }
            Entity::User => {
                let Some(mut user) = current.users.iter().find(|u| &u.name == name).cloned() else {
                    continue;
                };
                apply_user(&mut user, &request.settings)?;
                AdminChange::SetUser(user)
            }
            _ => {
                let Some(mut qos) = current.qos.iter().find(|q| &q.name == name).cloned() else {
                    continue;
                };
                apply_qos(&mut qos, &request.settings, &mut planned.warnings)?;
                AdminChange::SetQos(qos)
            }
        };
        modified.push(name.clone());
        planned.changes.push(change);
    }
    planned.summary = if modified.is_empty() {
        " Nothing modified\n".into()
    } else {
        let mut summary = format!(" Modified {}...\n", noun(request.entity));
        for name in &modified {
            summary.push_str(&format!("  {name}\n"));
        }
        summary
    };
    Ok(())
}

fn delete(request: &Request, current: &Current, planned: &mut Planned) -> Result<(), String> {
    let mut deleted = Vec::new();
    for name in &request.names {
        let (exists, change) = match request.entity {
            Entity::Account => (
                current.accounts.iter().any(|a| &a.name == name),
                AdminChange::RemoveAccount(name.clone()),
            ),
            Entity::User => (
                current.users.iter().any(|u| &u.name == name),
                AdminChange::RemoveUser(name.clone()),
            ),
            _ => (
                current.qos.iter().any(|q| &q.name == name),
                AdminChange::RemoveQos(name.clone()),
            ),
        };
        if exists {
            deleted.push(name.clone());
            planned.changes.push(change);
        }
    }
    planned.summary = if deleted.is_empty() {
        " Nothing deleted\n".into()
    } else {
        let mut summary = format!(" Deleting {}...\n", noun(request.entity));
        for name in &deleted {
            summary.push_str(&format!("  {name}\n"));
        }
        summary
    };
    Ok(())
}

/// The value of the first of `keys` among `settings`.
fn setting<'a>(settings: &'a [(String, String)], keys: &[&str]) -> Option<&'a str> {
    settings
        .iter()
        .find(|(k, _)| keys.contains(&k.as_str()))
        .map(|(_, v)| v.as_str())
}

fn unknown(key: &str, entity: &str) -> String {
    format!("Unknown option: {key}; corral's sacctmgr sets for {entity}s: see sacctmgr --help")
}

fn apply_account(
    account: &mut Account,
    settings: &[(String, String)],
    warnings: &mut Vec<String>,
) -> Result<(), String> {
    for (key, value) in settings {
        match key.as_str() {
            "description" | "descr" => account.description = value.clone(),
            "organization" | "org" => warnings.push(format!(
                "Organization={value} is accepted but not kept: corral's accounts have none"
            )),
            "parent" | "parentname" => account.parent = Some(value.clone()),
            "fairshare" | "share" | "shares" => {
                account.shares = value
                    .parse()
                    .map_err(|_| format!("Fairshare={value} is not a number of shares"))?;
            }
            // An account's QOS is the one its jobs get when they name none.
            "defaultqos" | "qos" => {
                let qos = value.trim_start_matches(['+', '=']).split(',').next();
                account.default_qos = qos.filter(|q| !q.is_empty()).map(String::from);
            }
            _ if apply_limit(&mut account.limits, key, value)? => {}
            _ => return Err(unknown(key, "account")),
        }
    }
    Ok(())
}

fn apply_user(user: &mut User, settings: &[(String, String)]) -> Result<(), String> {
    for (key, value) in settings {
        match key.as_str() {
            "account" | "accounts" => {
                for account in value.split(',').filter(|a| !a.is_empty()) {
                    user.accounts.insert(account.to_string());
                    if user.default_account.is_empty() {
                        user.default_account = account.to_string();
                    }
                }
            }
            "defaultaccount" => {
                user.default_account = value.clone();
                user.accounts.insert(value.clone());
            }
            "adminlevel" | "admin" => {
                user.role = match value.to_ascii_lowercase().as_str() {
                    "none" => Role::User,
                    "operator" => Role::Operator,
                    "admin" | "administrator" => Role::Admin,
                    _ => {
                        return Err(format!(
                            "AdminLevel={value} is not a level; use None, Operator or Admin"
                        ));
                    }
                }
            }
            _ if apply_limit(&mut user.limits, key, value)? => {}
            _ => return Err(unknown(key, "user")),
        }
    }
    Ok(())
}

/// `gres/gpu=N` (`-1` clears the limit); any other TRES is refused by name.
fn gpu_limit(key: &str, value: &str) -> Result<Option<u64>, String> {
    let mut limit = None;
    for part in value.split(',').filter(|p| !p.is_empty()) {
        let Some((tres, count)) = part.split_once('=') else {
            return Err(format!(
                "{key}={value}: expected TRES=COUNT, e.g. gres/gpu=8"
            ));
        };
        let tres = tres.to_ascii_lowercase();
        if tres.starts_with("gres/gpu:") {
            return Err(format!(
                "{key}: corral limits GPUs of every type together (gres/gpu=N); '{part}' names one type and cannot be enforced"
            ));
        }
        if tres != "gres/gpu" {
            return Err(format!(
                "{key}: corral limits GPUs only (gres/gpu=N); '{part}' cannot be enforced"
            ));
        }
        limit = match count.trim() {
            "-1" => None,
            n => Some(
                n.parse::<u64>()
                    .map_err(|_| format!("{key}={value}: '{n}' is not a count"))?,
            ),
        };
    }
    Ok(limit)
}

fn count(key: &str, value: &str) -> Result<Option<u32>, String> {
    match value.trim() {
        "-1" => Ok(None),
        n => n
            .parse()
            .map(Some)
            .map_err(|_| format!("{key}={value} is not a count")),
    }
}

fn narrow(key: &str, limit: Option<u64>) -> Result<Option<u32>, String> {
    limit
        .map(|n| {
            u32::try_from(n).map_err(|_| format!("{key}: {n} GPUs is more than corral counts"))
        })
        .transpose()
}

/// `MaxWall=TIME` in seconds; `-1` (or UNLIMITED) clears it.
fn max_wall(value: &str) -> Result<Option<u64>, String> {
    Ok(match value.trim() {
        "-1" => None,
        text => match parse_time_limit(text).map_err(|e| format!("MaxWall: {e}"))? {
            TimeLimit::Unlimited => None,
            TimeLimit::Seconds(s) => Some(s),
        },
    })
}

/// An association limit (`MaxJobs`, `GrpTRES`, ...) of a user or account;
/// `false` when `key` names none.
fn apply_limit(limits: &mut AssociationLimits, key: &str, value: &str) -> Result<bool, String> {
    match key {
        "maxjobs" => limits.max_jobs = count(key, value)?,
        "maxsubmitjobs" | "maxsubmit" => limits.max_submit_jobs = count(key, value)?,
        "grpjobs" => limits.grp_jobs = count(key, value)?,
        "grpsubmitjobs" | "grpsubmit" => limits.grp_submit_jobs = count(key, value)?,
        "grptres" => limits.grp_gpus = narrow(key, gpu_limit(key, value)?)?,
        "maxwall" | "maxwalldurationperjob" => limits.max_wall_seconds = max_wall(value)?,
        _ => return Ok(false),
    }
    Ok(true)
}

fn apply_qos(
    qos: &mut Qos,
    settings: &[(String, String)],
    warnings: &mut Vec<String>,
) -> Result<(), String> {
    for (key, value) in settings {
        match key.as_str() {
            "priority" => {
                qos.priority = value
                    .parse()
                    .map_err(|_| format!("Priority={value} is not a number"))?;
            }
            "grptres" => qos.grp_gpus_per_account = narrow(key, gpu_limit(key, value)?)?,
            "grptresmins" => qos.grp_gpu_minutes_per_account = gpu_limit(key, value)?,
            "maxtresperuser" | "maxtrespu" => {
                qos.max_gpus_per_user = narrow(key, gpu_limit(key, value)?)?;
            }
            "maxjobsperuser" | "maxjobspu" => qos.max_jobs_per_user = count(key, value)?,
            "maxwall" | "maxwalldurationperjob" => qos.max_wall_seconds = max_wall(value)?,
            "preempt" => {
                qos.preempts = value
                    .trim_start_matches(['+', '='])
                    .split(',')
                    .filter(|q| !q.is_empty())
                    .map(String::from)
                    .collect();
            }
            "preemptmode" => {
                qos.preempt_mode = match value.to_ascii_lowercase().as_str() {
                    "cluster" => None,
                    "off" => Some(PreemptMode::Off),
                    "requeue" => Some(PreemptMode::Requeue),
                    "cancel" => Some(PreemptMode::Cancel),
                    _ => {
                        return Err(format!(
                            "PreemptMode={value}: use OFF, REQUEUE, CANCEL or CLUSTER"
                        ));
                    }
                };
            }
            "description" | "flags" | "usagefactor" | "gracetime" => warnings.push(format!(
                "{key}={value} is accepted but not kept by corral's QOS"
            )),
            _ => return Err(unknown(key, "QOS")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::parse::parse;
    use super::*;

    fn request(line: &str) -> Request {
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        parse(&args).unwrap().unwrap()
    }

    fn current() -> Current {
        Current {
            accounts: vec![Account {
                name: "root".into(),
                parent: None,
                shares: 1,
                default_qos: None,
                description: "root".into(),
                limits: Default::default(),
            }],
            users: Vec::new(),
            qos: Vec::new(),
        }
    }

    #[test]
    fn the_gpu_budget_guides_set_up() {
        let mut now = current();
        let add = plan(
            &request("add account team-a Description=TeamA Organization=research"),
            &now,
        )
        .unwrap();
        assert_eq!(
            add.summary,
            " Adding Account(s)\n  team-a\n Settings\n  Description     = TeamA\n  Organization    = research\n"
        );
        assert_eq!(add.warnings.len(), 1);
        let AdminChange::SetAccount(account) = &add.changes[0] else {
            panic!("{:?}", add.changes);
        };
        now.accounts.push(account.clone());
        let user = plan(&request("add user alice Account=team-a"), &now).unwrap();
        let AdminChange::SetUser(alice) = &user.changes[0] else {
            panic!("{:?}", user.changes);
        };
        assert_eq!(alice.default_account, "team-a");
        let qos = plan(
            &request("add qos team-a-qos GrpTRESMins=gres/gpu=43200"),
            &now,
        )
        .unwrap();
        let AdminChange::SetQos(q) = &qos.changes[0] else {
            panic!("{:?}", qos.changes);
        };
        assert_eq!(q.grp_gpu_minutes_per_account, Some(43_200));
        now.qos.push(q.clone());
        let modify = plan(&request("modify account team-a set QOS=team-a-qos"), &now).unwrap();
        assert_eq!(modify.summary, " Modified accounts...\n  team-a\n");
        let AdminChange::SetAccount(a) = &modify.changes[0] else {
            panic!("{:?}", modify.changes);
        };
        assert_eq!(a.default_qos.as_deref(), Some("team-a-qos"));
        // Adding what exists adds nothing.
        let again = plan(&request("add account team-a"), &now).unwrap();
        assert_eq!(again.summary, " Nothing new added.\n");
        assert!(again.changes.is_empty());
    }

    #[test]
    fn association_limits_are_set_on_users_and_accounts_and_cleared_with_minus_one() {
        let mut now = current();
        now.users.push(User {
            name: "alice".into(),
            default_account: "root".into(),
            accounts: ["root".to_string()].into(),
            role: Role::User,
            limits: Default::default(),
        });
        let set = plan(
            &request("modify user alice set MaxJobs=4 MaxSubmitJobs=10 GrpTRES=gres/gpu=8 MaxWall=1-00:00:00"),
            &now,
        )
        .unwrap();
        let AdminChange::SetUser(alice) = &set.changes[0] else {
            panic!("{:?}", set.changes);
        };
        assert_eq!(
            alice.limits,
            AssociationLimits {
                max_jobs: Some(4),
                max_submit_jobs: Some(10),
                grp_gpus: Some(8),
                max_wall_seconds: Some(86_400),
                ..AssociationLimits::default()
            }
        );
        now.users[0] = alice.clone();
        let cleared = plan(
            &request("modify user alice set MaxJobs=-1 GrpTRES=gres/gpu=-1"),
            &now,
        )
        .unwrap();
        let AdminChange::SetUser(alice) = &cleared.changes[0] else {
            panic!("{:?}", cleared.changes);
        };
        assert_eq!((alice.limits.max_jobs, alice.limits.grp_gpus), (None, None));
        let account = plan(
            &request("modify account root set GrpJobs=20 GrpSubmitJobs=100"),
            &now,
        )
        .unwrap();
        let AdminChange::SetAccount(root) = &account.changes[0] else {
            panic!("{:?}", account.changes);
        };
        assert_eq!(
            (root.limits.grp_jobs, root.limits.grp_submit_jobs),
            (Some(20), Some(100))
        );
        let refused = plan(&request("modify user alice set GrpTRES=cpu=8"), &now).unwrap_err();
        assert!(refused.contains("corral limits GPUs only"), "{refused}");
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        let now = current();
        let cpu = plan(&request("add qos q GrpTRES=cpu=64"), &now).unwrap_err();
        assert!(cpu.contains("corral limits GPUs only"), "{cpu}");
        assert!(
            plan(&request("add user bob"), &now)
                .unwrap_err()
                .contains("Account=")
        );
        assert!(
            plan(&request("add account x Bogus=1"), &now)
                .unwrap_err()
                .contains("Unknown option: bogus")
        );
        assert!(
            plan(&request("modify qos q"), &now)
                .unwrap_err()
                .contains("anything to set")
        );
        let none = plan(&request("delete account ghost"), &now).unwrap();
        assert_eq!(none.summary, " Nothing deleted\n");
    }
}
