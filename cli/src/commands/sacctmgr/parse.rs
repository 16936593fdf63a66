//! sacctmgr's command line, parsed by hand as sacctmgr reads it: options
//! (`-i`, `-n`, `-p`, `-P`) anywhere, then a verb (`add`/`create`,
//! `modify`/`update`, `delete`/`remove`, `show`/`list`), an entity
//! (`account`, `user`, `qos`, `association`), and words: names, `where` and
//! `set` switching between conditions and settings, `KEY=VALUE` pairs
//! (keys case-insensitive, values kept), and `format=...`.

use crate::format::print_fields::Layout;

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// `add`, `create`.
    Add,
    /// `modify`, `update`.
    Modify,
    /// `delete`, `remove`.
    Delete,
    /// `show`, `list`.
    Show,
}

/// To what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entity {
    /// Accounts of the fair-share tree.
    Account,
    /// Users and their accounts.
    User,
    /// Quality of service: priorities and limits.
    Qos,
    /// Account and user pairs (`show association`).
    Association,
}

/// One sacctmgr invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The verb.
    pub verb: Verb,
    /// The entity.
    pub entity: Entity,
    /// Names given bare or as `Name=`/`Names=` (comma lists split).
    pub names: Vec<String>,
    /// `KEY=VALUE` conditions (after `where`, or before `set` in modify), keys lower case.
    pub conditions: Vec<(String, String)>,
    /// `KEY=VALUE` settings (after `set`, or any in add), keys lower case.
    pub settings: Vec<(String, String)>,
    /// `format=...`.
    pub format: Option<String>,
    /// `-i`: commit without asking.
    pub immediate: bool,
    /// `-n`: no header.
    pub noheader: bool,
    /// `-p`/`-P`.
    pub layout: Layout,
}

/// What `sacctmgr --help` prints.
pub const USAGE: &str = "\
sacctmgr (corral): accounts, users and QOS.

  sacctmgr [-i] add account NAME[,NAME] [Description=TEXT] [Parent=ACCOUNT] [Fairshare=N] [DefaultQOS=QOS] [LIMIT...]
  sacctmgr [-i] add user NAME Account=ACCOUNT[,ACCOUNT] [DefaultAccount=ACCOUNT] [AdminLevel=None|Operator|Admin] [LIMIT...]
  sacctmgr [-i] add qos NAME [Priority=N] [GrpTRES=gres/gpu=N] [GrpTRESMins=gres/gpu=N]
                             [MaxTRESPerUser=gres/gpu=N] [MaxJobsPerUser=N] [MaxWall=TIME]
                             [Preempt=QOS[,QOS]] [PreemptMode=OFF|REQUEUE|CANCEL]
  sacctmgr [-i] modify account|user|qos [where] NAME|Name=NAME set KEY=VALUE...
  sacctmgr [-i] delete account|user|qos NAME|where Name=NAME
  sacctmgr [-n] [-P|-p] show account|user|qos|association [NAME...] [format=FIELD[%WIDTH],...]

Association limits (LIMIT) on users and accounts: MaxJobs=N, MaxSubmitJobs=N,
GrpJobs=N, GrpSubmitJobs=N, GrpTRES=gres/gpu=N, MaxWall=TIME (-1 clears one).

Options: -i/--immediate (no question before committing), -n/--noheader,
-P/--parsable2, -p/--parsable. TRES limits are on GPUs (gres/gpu) only.
Changes need an admin certificate; show is open to every user.
";

/// Parses the arguments after `sacctmgr`; `None` for `--help`, `Err` for a
/// line it cannot make sense of, saying what to write instead.
pub fn parse(args: &[String]) -> Result<Option<Request>, String> {
    let (mut immediate, mut noheader, mut layout) = (false, false, Layout::Columns);
    let mut words: Vec<&str> = Vec::new();
    for arg in args {
        match arg.as_str() {
            "-i" | "--immediate" => immediate = true,
            "-n" | "--noheader" => noheader = true,
            "-P" | "--parsable2" => {
                layout = Layout::Parsable {
                    delimiter: "|".into(),
                    trailing: false,
                }
            }
            "-p" | "--parsable" => {
                layout = Layout::Parsable {
                    delimiter: "|".into(),
                    trailing: true,
                }
            }
            "-h" | "--help" | "help" => return Ok(None),
            "-Q" | "--quiet" | "-v" | "--verbose" => {}
            option if option.starts_with('-') && option.len() > 1 => {
                return Err(format!("unrecognized option '{option}'"));
            }
            word => words.push(word),
        }
    }
    let [verb, entity, rest @ ..] = words.as_slice() else {
        return Err(
            "give a command, e.g. sacctmgr show account (sacctmgr --help lists them)".into(),
        );
    };
    let verb = match verb.to_ascii_lowercase().as_str() {
        "add" | "create" => Verb::Add,
        "modify" | "update" => Verb::Modify,
        "delete" | "remove" => Verb::Delete,
        "show" | "list" => Verb::Show,
        other => {
            return Err(format!(
                "'{other}' is not a command corral's sacctmgr supports; use add, modify, delete or show"
            ));
        }
    };
    let entity = match entity.to_ascii_lowercase().as_str() {
        "account" | "accounts" | "acct" => Entity::Account,
        "user" | "users" => Entity::User,
        "qos" => Entity::Qos,
        "association" | "associations" | "assoc" => Entity::Association,
        other => {
            return Err(format!(
                "'{other}' is not an entity corral's sacctmgr manages; use account, user, qos or association"
            ));
        }
    };
    if entity == Entity::Association && verb != Verb::Show {
        return Err(
            "associations follow from users' accounts: add or modify the user instead".into(),
        );
    }
    let mut request = Request {
        verb,
        entity,
        names: Vec::new(),
        conditions: Vec::new(),
        settings: Vec::new(),
        format: None,
        immediate,
        noheader,
        layout,
    };
    // In add every pair is a setting; in modify pairs are conditions until `set`.
    let mut setting = verb == Verb::Add;
    for word in rest {
        let lower = word.to_ascii_lowercase();
        if lower == "where" {
            setting = false;
            continue;
        }
        if lower == "set" {
            setting = true;
            continue;
        }
        if lower.starts_with("with") {
            continue;
        }
        let Some((key, value)) = word.split_once('=') else {
            request
                .names
                .extend(word.split(',').filter(|n| !n.is_empty()).map(String::from));
            continue;
        };
        let key = key.to_ascii_lowercase();
        let names_key = matches!(key.as_str(), "name" | "names")
            || (entity == Entity::Account && matches!(key.as_str(), "account" | "accounts"))
            || (entity == Entity::User && matches!(key.as_str(), "user" | "users"));
        if key == "format" {
            request.format = Some(value.to_string());
        } else if names_key && !setting {
            request
                .names
                .extend(value.split(',').filter(|n| !n.is_empty()).map(String::from));
        } else if setting {
            request.settings.push((key, value.to_string()));
        } else {
            request.conditions.push((key, value.to_string()));
        }
    }
    // A change picks records by name only: a narrower condition (`where
    // Account=ml` for one of a user's associations) would otherwise widen to
    // every record of that name.
    if matches!(verb, Verb::Modify | Verb::Delete)
        && let Some((key, value)) = request
            .conditions
            .iter()
            .find(|(key, _)| !matches!(key.as_str(), "cluster" | "clusters"))
    {
        return Err(format!(
            "where {key}={value}: corral's sacctmgr changes records by name only (a user's limits hold in every account it charges); leave the condition out"
        ));
    }
    if matches!(verb, Verb::Add | Verb::Modify | Verb::Delete) && request.names.is_empty() {
        return Err(format!(
            "{} which {}? give its name",
            match verb {
                Verb::Add => "add",
                Verb::Modify => "modify",
                _ => "delete",
            },
            match entity {
                Entity::Account => "account",
                Entity::User => "user",
                _ => "QOS",
            }
        ));
    }
    Ok(Some(request))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_line(line: &str) -> Result<Option<Request>, String> {
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        parse(&args)
    }

    #[test]
    fn a_change_narrowed_by_another_condition_is_refused() {
        let err = parse_line("modify user alice where account=ml set MaxJobs=4").unwrap_err();
        assert!(err.contains("by name only"), "{err}");
        assert!(parse_line("modify user where name=alice cluster=c set MaxJobs=4").is_ok());
    }

    fn ok(line: &str) -> Request {
        parse_line(line).unwrap().unwrap()
    }

    #[test]
    fn the_command_lines_guides_teach() {
        let add = ok("add account team-a Description=Team Organization=research");
        assert_eq!((add.verb, add.entity), (Verb::Add, Entity::Account));
        assert_eq!(add.names, ["team-a"]);
        assert_eq!(
            add.settings,
            [
                ("description".into(), "Team".into()),
                ("organization".into(), "research".into())
            ]
        );
        let user = ok("add user alice Account=team-a");
        assert_eq!(user.names, ["alice"]);
        assert_eq!(user.settings, [("account".into(), "team-a".into())]);
        let qos = ok("-i add qos team-a-qos GrpTRESMins=gres/gpu=43200");
        assert!(qos.immediate);
        assert_eq!(qos.settings[0].1, "gres/gpu=43200");
        let modify = ok("modify account team-a set QOS=team-a-qos");
        assert_eq!(modify.names, ["team-a"]);
        assert_eq!(modify.settings, [("qos".into(), "team-a-qos".into())]);
        let modify = ok("modify user where name=alice,bob set adminlevel=operator");
        assert_eq!(modify.names, ["alice", "bob"]);
        let show = ok("-n -P show qos format=Name,GrpTRESMins");
        assert_eq!(show.format.as_deref(), Some("Name,GrpTRESMins"));
        assert!(show.noheader);
        assert_ne!(show.layout, Layout::Columns);
    }

    #[test]
    fn bad_lines_say_what_to_do() {
        assert!(parse_line("--help").unwrap().is_none());
        assert!(parse_line("show").unwrap_err().contains("give a command"));
        assert!(parse_line("dump cluster").unwrap_err().contains("'dump'"));
        assert!(parse_line("show wckey").unwrap_err().contains("'wckey'"));
        assert!(
            parse_line("add account")
                .unwrap_err()
                .contains("add which account")
        );
        assert!(
            parse_line("add assoc x")
                .unwrap_err()
                .contains("associations")
        );
        assert!(parse_line("-x show qos").unwrap_err().contains("'-x'"));
    }
}
