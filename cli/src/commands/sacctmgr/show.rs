//! `sacctmgr show account|user|qos|association`: Slurm 22.05's default
//! columns and widths per entity (from sacctmgr's source), `format=` picking
//! columns by name or prefix with `%WIDTH`, printed in the `print_fields`
//! layout. Association rows show the limits set on them (GrpJobs, GrpTRES,
//! GrpSubmit, MaxJobs, MaxSubmit, MaxWall); limits corral does not keep, and
//! unset ones, print blank, as Slurm prints an unset limit.

use corral_state::account::{Account, AssociationLimits, User};
use corral_state::ids::Role;
use corral_state::partition::PreemptMode;
use corral_state::qos::Qos;
use corral_state::slurm::duration::{TimeLimit, format_time_limit};

use super::parse::Entity;
use crate::format::print_fields::{Layout, header, row};

/// One column sacctmgr can print: its header, default width, and the
/// lower-case name `format=` matches by prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Column {
    header: &'static str,
    width: i32,
    key: &'static str,
}

const fn col(header: &'static str, width: i32, key: &'static str) -> Column {
    Column { header, width, key }
}

/// Every column, in the order a prefix is matched.
const COLUMNS: &[Column] = &[
    col("Account", 10, "account"),
    col("Admin", 9, "adminlevel"),
    col("Cluster", 10, "cluster"),
    col("Def Acct", 10, "defaultaccount"),
    col("Def QOS", 9, "defaultqos"),
    col("Descr", 20, "description"),
    col("Flags", 10, "flags"),
    col("GraceTime", 10, "gracetime"),
    col("GrpJobs", 7, "grpjobs"),
    col("GrpSubmit", 9, "grpsubmitjobs"),
    col("GrpTRES", 13, "grptres"),
    col("GrpTRESMins", 13, "grptresmins"),
    col("GrpTRESRunMins", 13, "grptresrunmins"),
    col("GrpWall", 11, "grpwall"),
    col("MaxJobs", 7, "maxjobs"),
    col("MaxJobsPA", 9, "maxjobsperaccount"),
    col("MaxJobsPU", 9, "maxjobsperuser"),
    col("MaxSubmit", 9, "maxsubmitjobs"),
    col("MaxSubmitPA", 11, "maxsubmitjobsperaccount"),
    col("MaxSubmitPU", 11, "maxsubmitjobsperuser"),
    col("MaxTRES", 13, "maxtres"),
    col("MaxTRESMins", 13, "maxtresmins"),
    col("MaxTRESPA", 13, "maxtresperaccount"),
    col("MaxTRESPerNode", 14, "maxtrespernode"),
    col("MaxTRESPU", 13, "maxtresperuser"),
    col("MaxWall", 11, "maxwall"),
    col("MinTRES", 13, "mintres"),
    col("Name", 10, "name"),
    col("Org", 20, "organization"),
    col("Par Name", 10, "parentname"),
    col("Partition", 10, "partition"),
    col("PreemptMode", 11, "preemptmode"),
    col("Preempt", 10, "preempt"),
    col("PreemptExemptTime", 19, "preemptexempttime"),
    col("Priority", 10, "priority"),
    col("QOS", 20, "qos"),
    col("Share", 9, "share"),
    col("UsageFactor", 11, "usagefactor"),
    col("UsageThres", 10, "usagethreshold"),
    col("User", 10, "user"),
];

/// Each entity's default columns, as sacctmgr 22.05 prints them.
fn default_format(entity: Entity) -> &'static str {
    match entity {
        Entity::Account => "account,description,organization",
        Entity::User => "user,defaultaccount,adminlevel",
        Entity::Qos => {
            "name,priority,gracetime,preempt,preemptexempttime,preemptmode,flags%40,\
             usagethreshold,usagefactor,grptres,grptresmins,grptresrunmins,grpjobs,\
             grpsubmitjobs,grpwall,maxtres,maxtrespernode,maxtresmins,maxwall,\
             maxtresperuser,maxjobsperuser,maxsubmitjobsperuser,maxtresperaccount,\
             maxjobsperaccount,maxsubmitjobsperaccount,mintres"
        }
        Entity::Association => {
            "cluster,account,user,partition,share,priority,grpjobs,grptres,grpsubmitjobs,\
             grpwall,grptresmins,maxjobs,maxtres,maxtrespernode,maxsubmitjobs,maxwall,\
             maxtresmins,qos,defaultqos,grptresrunmins"
        }
    }
}

/// The columns `format` asks for (or the entity's defaults); `Err` names an
/// unknown field in sacctmgr's words.
fn columns(entity: Entity, format: Option<&str>) -> Result<Vec<Column>, String> {
    format
        .unwrap_or_else(|| default_format(entity))
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(|spec| {
            let (name, width) = match spec.split_once('%') {
                Some((name, width)) => (name, width.parse::<i32>().ok()),
                None => (spec, None),
            };
            let lower = name.to_ascii_lowercase().replace(' ', "");
            let found = COLUMNS
                .iter()
                .find(|c| c.key == lower)
                .or_else(|| COLUMNS.iter().find(|c| c.key.starts_with(&lower)))
                .filter(|_| !lower.is_empty())
                .ok_or_else(|| format!("Unknown field '{name}'"))?;
            Ok(Column {
                width: width.unwrap_or(found.width),
                ..*found
            })
        })
        .collect()
}

/// What the rows are made of.
pub struct Records<'a> {
    /// The cluster's name (associations' Cluster column).
    pub cluster: &'a str,
    /// Every account.
    pub accounts: &'a [Account],
    /// Every user.
    pub users: &'a [User],
    /// Every QOS.
    pub qos: &'a [Qos],
}

/// The table for `entity`, rows limited to `names` when some are given.
pub fn table(
    entity: Entity,
    records: &Records<'_>,
    names: &[String],
    format: Option<&str>,
    noheader: bool,
    layout: &Layout,
) -> Result<String, String> {
    let columns = columns(entity, format)?;
    let wanted = |name: &str| names.is_empty() || names.iter().any(|n| n == name);
    let mut out = String::new();
    if !noheader {
        let heads: Vec<(&str, i32)> = columns.iter().map(|c| (c.header, c.width)).collect();
        out.push_str(&header(&heads, layout));
    }
    let mut push = |value: &dyn Fn(&str) -> Option<String>| {
        let cells: Vec<(Option<String>, i32)> =
            columns.iter().map(|c| (value(c.key), c.width)).collect();
        out.push_str(&row(&cells, layout));
    };
    match entity {
        Entity::Account => {
            for account in records.accounts.iter().filter(|a| wanted(&a.name)) {
                push(&|key| account_value(account, key));
            }
        }
        Entity::User => {
            for user in records.users.iter().filter(|u| wanted(&u.name)) {
                push(&|key| user_value(user, key));
            }
        }
        Entity::Qos => {
            for qos in records.qos.iter().filter(|q| wanted(&q.name)) {
                push(&|key| qos_value(qos, key));
            }
        }
        Entity::Association => {
            for account in records.accounts.iter().filter(|a| wanted(&a.name)) {
                push(&|key| association_value(records.cluster, account, None, key));
                for user in records
                    .users
                    .iter()
                    .filter(|u| u.accounts.contains(&account.name))
                {
                    push(&|key| association_value(records.cluster, account, Some(user), key));
                }
            }
        }
    }
    Ok(out)
}

fn account_value(account: &Account, key: &str) -> Option<String> {
    Some(match key {
        "account" | "name" => account.name.clone(),
        "description" => account.description.clone(),
        // Not stored: Slurm's default, the account's own name under root (the
        // parent's organization deeper down, which corral cannot know).
        "organization" => match account.parent.as_deref() {
            None | Some(corral_state::account::ROOT_ACCOUNT) => account.name.clone(),
            Some(parent) => parent.to_string(),
        },
        "parentname" => account.parent.clone()?,
        "share" => account.shares.to_string(),
        "defaultqos" => account.default_qos.clone()?,
        "qos" => account
            .default_qos
            .clone()
            .unwrap_or_else(|| "normal".into()),
        _ => return None,
    })
}

fn user_value(user: &User, key: &str) -> Option<String> {
    Some(match key {
        "user" | "name" => user.name.clone(),
        "defaultaccount" => user.default_account.clone(),
        "adminlevel" => match user.role {
            Role::User => "None",
            Role::Operator => "Operator",
            Role::Admin => "Administrator",
        }
        .into(),
        "account" => user.accounts.iter().cloned().collect::<Vec<_>>().join(","),
        _ => return None,
    })
}

fn gpus(count: Option<impl ToString>) -> Option<String> {
    count.map(|n| format!("gres/gpu={}", n.to_string()))
}

fn qos_value(qos: &Qos, key: &str) -> Option<String> {
    Some(match key {
        "name" => qos.name.clone(),
        "priority" => qos.priority.to_string(),
        "gracetime" => "00:00:00".into(),
        "preempt" => qos.preempts.iter().cloned().collect::<Vec<_>>().join(","),
        "preemptmode" => match qos.preempt_mode {
            None => "cluster",
            Some(PreemptMode::Off) => "off",
            Some(PreemptMode::Requeue) => "requeue",
            Some(PreemptMode::Cancel) => "cancel",
        }
        .into(),
        "usagefactor" => "1.000000".into(),
        "grptres" => gpus(qos.grp_gpus_per_account)?,
        "grptresmins" => gpus(qos.grp_gpu_minutes_per_account)?,
        "maxtresperuser" => gpus(qos.max_gpus_per_user)?,
        "maxjobsperuser" => qos.max_jobs_per_user?.to_string(),
        "maxwall" => format_time_limit(TimeLimit::Seconds(qos.max_wall_seconds?)),
        _ => return None,
    })
}

fn association_value(
    cluster: &str,
    account: &Account,
    user: Option<&User>,
    key: &str,
) -> Option<String> {
    Some(match key {
        "cluster" => cluster.to_string(),
        "account" => account.name.clone(),
        "user" => user?.name.clone(),
        "share" => {
            if user.is_some() {
                "1".into()
            } else {
                account.shares.to_string()
            }
        }
        "qos" => account
            .default_qos
            .clone()
            .unwrap_or_else(|| "normal".into()),
        "defaultqos" => account.default_qos.clone()?,
        // The association's own limits: the user's on a user's row, the
        // account's on the account's (inherited ones print blank, as Slurm's
        // unset ones).
        _ => limit_value(user.map_or(&account.limits, |u| &u.limits), key)?,
    })
}

/// A limit column of an association, `None` when unset.
fn limit_value(limits: &AssociationLimits, key: &str) -> Option<String> {
    Some(match key {
        "grpjobs" => limits.grp_jobs?.to_string(),
        "grpsubmitjobs" => limits.grp_submit_jobs?.to_string(),
        "grptres" => gpus(limits.grp_gpus)?,
        "maxjobs" => limits.max_jobs?.to_string(),
        "maxsubmitjobs" => limits.max_submit_jobs?.to_string(),
        "maxwall" => format_time_limit(TimeLimit::Seconds(limits.max_wall_seconds?)),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records() -> (Vec<Account>, Vec<User>, Vec<Qos>) {
        let account = Account {
            name: "team-a".into(),
            parent: Some("root".into()),
            shares: 1,
            default_qos: Some("team-a-qos".into()),
            description: "Team A".into(),
            limits: Default::default(),
        };
        let user = User {
            name: "alice".into(),
            default_account: "team-a".into(),
            accounts: ["team-a".to_string()].into(),
            role: Role::User,
            limits: Default::default(),
        };
        let qos = Qos {
            name: "team-a-qos".into(),
            priority: 0,
            preempts: Default::default(),
            preempt_mode: None,
            grp_gpus_per_account: None,
            grp_gpu_minutes_per_account: Some(43_200),
            max_wall_seconds: None,
            max_gpus_per_user: None,
            max_jobs_per_user: None,
        };
        (vec![account], vec![user], vec![qos])
    }

    #[test]
    fn default_columns_as_sacctmgr_prints_them() {
        let (accounts, users, qos) = records();
        let records = Records {
            cluster: "corral",
            accounts: &accounts,
            users: &users,
            qos: &qos,
        };
        let out = table(
            Entity::Account,
            &records,
            &[],
            None,
            false,
            &Layout::Columns,
        )
        .unwrap();
        assert_eq!(
            out,
            "   Account                Descr                  Org \n\
             ---------- -------------------- -------------------- \n\
             \x20   team-a               Team A               team-a \n"
        );
        let out = table(Entity::User, &records, &[], None, true, &Layout::Columns).unwrap();
        assert_eq!(out, "     alice     team-a      None \n");
        let parsable = Layout::Parsable {
            delimiter: "|".into(),
            trailing: false,
        };
        let out = table(
            Entity::Qos,
            &records,
            &["team-a-qos".into()],
            Some("Name,GrpTRESMins,MaxW"),
            false,
            &parsable,
        )
        .unwrap();
        assert_eq!(
            out,
            "Name|GrpTRESMins|MaxWall\nteam-a-qos|gres/gpu=43200|\n"
        );
        assert_eq!(
            table(Entity::Qos, &records, &[], Some("Bogus"), false, &parsable).unwrap_err(),
            "Unknown field 'Bogus'"
        );
    }
}
