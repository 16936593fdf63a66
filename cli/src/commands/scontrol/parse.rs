//! scontrol's command line, parsed by hand: it is not getopt-style past its
//! options. Options (`-o`/`--oneliner`, `-d`, `-Q`, `-h`) may appear anywhere;
//! then a command word and its arguments, keywords case-insensitive, an
//! entity's value either the next word or after `=` (`show job 12`,
//! `show jobid=12`), an entity named by any prefix scontrol takes
//! (`entity.rs`: `show res`).

use std::fmt;

use super::entity::{Entity, entity as entity_of};
use crate::commands::jobs::Action;

/// What the commands corral's scontrol serves, for error messages.
pub const SUPPORTED: &str = "show hostnames, show hostlist, show job, show node, show partition, \
     show reservation, show config, ping, hold, uhold, release, requeue, update JobId=ID, \
     update NodeName=LIST, write batch_script, listpids";

/// `scontrol --help`.
pub const USAGE: &str = "\
scontrol (corral): the part of Slurm's scontrol that job scripts use.

  scontrol show hostnames [LIST]   one host per line (LIST: $SLURM_JOB_NODELIST by default)
  scontrol show hostlist NAMES     host names as a hostlist expression (hostlistsorted: sorted)
  scontrol [-o] [-d] show job ID   a job's fields (-o: all on one line; -d: a line per node
                                   with its CPUs, memory and GPU indexes)
  scontrol write batch_script ID [FILE]
                                   the job's batch script to FILE (slurm-ID.sh; - for stdout)
  scontrol listpids JOB[.STEP] [NODE]
                                   the job's processes (on NODE, or every node of the job)
  scontrol hold|uhold|release|requeue ID[,ID...]
  scontrol update JobId=ID KEY=VALUE...
                                   KEY: JobName, Comment, TimeLimit, Partition, Account, QOS,
                                   Nice, Dependency, NumNodes, Features, ExcNodeList (a running
                                   job: JobName, Comment, TimeLimit only)
  scontrol [-o] show node [NAME]   a node's fields (every node without NAME)
  scontrol [-o] show partition [NAME]
  scontrol [-o] show reservation [NAME]
                                   reservations' fields (every reservation without NAME)
  scontrol show config             the cluster's settings as Key = Value lines, then each
                                   controller replica, UP or DOWN
  scontrol update NodeName=LIST State=DRAIN|DOWN Reason=TEXT, or State=RESUME (operators)
  scontrol ping                    each controller replica, UP or DOWN (the leader is primary)

Entities may be shortened as scontrol allows (show res, show c, show j, show n, show pa).
Options: -o/--oneliner, -d/--details; -Q/--quiet is accepted and changes nothing.
The cluster is found through CORRAL_CLUSTER, CORRAL_CA, CORRAL_CERT and CORRAL_KEY
(or the client config file); `show hostnames` and `show hostlist` need no cluster.
";

/// One scontrol invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `-h`, `--help`, `help`.
    Help,
    /// `show hostnames [LIST]`: `None` means `$SLURM_JOB_NODELIST`.
    Hostnames(Option<String>),
    /// `show hostlist LIST` (in the order given) or `show hostlistsorted LIST`.
    Hostlist { list: String, sorted: bool },
    /// `show job ID` (`-d`: with a line per node).
    ShowJob {
        job: u64,
        oneliner: bool,
        details: bool,
    },
    /// `write batch_script ID [FILE]` (`-`: standard output).
    WriteBatchScript { job: u64, file: Option<String> },
    /// `listpids [JOB[.STEP]] [NODE]`.
    ListPids {
        job: Option<u64>,
        step: Option<Option<u32>>,
        node: Option<String>,
    },
    /// `hold`, `uhold`, `release` or `requeue` of a job list.
    Control { action: Action, jobs: Vec<u64> },
    /// `update JobId=ID KEY=VALUE...`: the controller parses the fields.
    Update {
        job: u64,
        fields: Vec<(String, String)>,
    },
    /// `show node [NAME]`.
    ShowNodes {
        name: Option<String>,
        oneliner: bool,
    },
    /// `show partition [NAME]`.
    ShowPartitions {
        name: Option<String>,
        oneliner: bool,
    },
    /// `show reservation [NAME]`.
    ShowReservations {
        name: Option<String>,
        oneliner: bool,
    },
    /// `show config` (a key after it changes nothing, as in Slurm 22.05).
    ShowConfig,
    /// `ping`.
    Ping,
    /// `update NodeName=LIST State=STATE [Reason=TEXT]`.
    UpdateNodes {
        nodes: String,
        state: String,
        reason: Option<String>,
    },
}

/// A command line scontrol cannot make sense of (exit status 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn usage(message: impl Into<String>) -> UsageError {
    UsageError(message.into())
}

/// Parses the arguments after `scontrol`.
pub fn parse(args: &[String]) -> Result<Request, UsageError> {
    let mut oneliner = false;
    let mut details = false;
    let mut help = false;
    let mut words: Vec<&str> = Vec::new();
    let mut options_done = false;
    for arg in args {
        if options_done || !arg.starts_with('-') || arg == "-" {
            words.push(arg);
            continue;
        }
        match arg.as_str() {
            "--" => options_done = true,
            "--oneliner" => oneliner = true,
            "--details" => details = true,
            "--quiet" => {}
            "--help" | "--usage" => help = true,
            long if long.starts_with("--") => return Err(unknown_option(long)),
            short => {
                for c in short.chars().skip(1) {
                    match c {
                        'o' => oneliner = true,
                        'd' => details = true,
                        'Q' => {}
                        'h' => help = true,
                        _ => return Err(unknown_option(&format!("-{c}"))),
                    }
                }
            }
        }
    }
    if help {
        return Ok(Request::Help);
    }
    let Some((command, rest)) = words.split_first() else {
        return Err(usage(format!(
            "no command given (corral's scontrol has no interactive mode); supported: {SUPPORTED}"
        )));
    };
    let command = command.to_ascii_lowercase();
    match command.as_str() {
        "show" => parse_show(rest, oneliner, details),
        "write" => parse_write(rest),
        "listpids" => parse_listpids(rest),
        "hold" | "uhold" => parse_control(&command, Action::Hold, rest),
        "release" => parse_control(&command, Action::Release, rest),
        "requeue" => parse_control(&command, Action::Requeue, rest),
        "update" => parse_update(rest),
        "ping" => Ok(Request::Ping),
        "help" => Ok(Request::Help),
        _ => Err(usage(format!(
            "'{command}' is not a command corral's scontrol supports; supported: {SUPPORTED}"
        ))),
    }
}

/// `update JobId=ID KEY=VALUE...` (the job id's key is `JobId` or `Job`, in any case).
fn parse_update(words: &[&str]) -> Result<Request, UsageError> {
    let node_key = |w: &&str| {
        w.split_once('=')
            .is_some_and(|(k, _)| k.eq_ignore_ascii_case("nodename"))
    };
    if words.iter().any(node_key) {
        return parse_update_nodes(words);
    }
    let mut job = None;
    let mut fields = Vec::new();
    for word in words {
        let Some((key, value)) = word.split_once('=') else {
            return Err(usage(format!(
                "'{word}' is not KEY=VALUE; write e.g. scontrol update JobId=12 TimeLimit=2:00:00"
            )));
        };
        if key.eq_ignore_ascii_case("jobid") || key.eq_ignore_ascii_case("job") {
            let id = value
                .parse()
                .map_err(|_| usage(format!("JobId={value} is not a job id")))?;
            if job.replace(id).is_some() {
                return Err(usage("JobId given twice; update one job at a time"));
            }
        } else {
            fields.push((key.to_string(), value.to_string()));
        }
    }
    let job = job.ok_or_else(|| usage("update which job? give JobId=ID"))?;
    if fields.is_empty() {
        return Err(usage(
            "nothing to change: give KEY=VALUE fields, e.g. TimeLimit=2:00:00",
        ));
    }
    Ok(Request::Update { job, fields })
}

/// `update NodeName=LIST State=STATE [Reason=TEXT]` (words after `Reason=`
/// up to the next KEY= belong to the reason, as a shell that split an
/// unquoted reason would leave them).
fn parse_update_nodes(words: &[&str]) -> Result<Request, UsageError> {
    let (mut nodes, mut state, mut reason) = (None, None, None::<String>);
    let mut in_reason = false;
    for word in words {
        match word.split_once('=') {
            Some((key, value)) if key.eq_ignore_ascii_case("nodename") => {
                nodes = Some(value.to_string());
                in_reason = false;
            }
            Some((key, value)) if key.eq_ignore_ascii_case("state") => {
                state = Some(value.to_string());
                in_reason = false;
            }
            Some((key, value)) if key.eq_ignore_ascii_case("reason") => {
                reason = Some(value.to_string());
                in_reason = true;
            }
            _ if in_reason => {
                if let Some(reason) = reason.as_mut() {
                    reason.push(' ');
                    reason.push_str(word);
                }
            }
            _ => {
                return Err(usage(format!(
                    "'{word}' is not a node field corral updates; give NodeName=LIST State=DRAIN|DOWN|RESUME [Reason=TEXT]"
                )));
            }
        }
    }
    let nodes = nodes
        .filter(|n| !n.is_empty())
        .ok_or_else(|| usage("update which nodes? give NodeName=LIST"))?;
    let state = state.ok_or_else(|| {
        usage("nothing to change: give State=DRAIN, DOWN or RESUME (with Reason=TEXT to drain or down)")
    })?;
    Ok(Request::UpdateNodes {
        nodes,
        state,
        reason,
    })
}

fn unknown_option(option: &str) -> UsageError {
    usage(format!(
        "unknown option '{option}'; scontrol takes -o/--oneliner, -d/--details, -Q/--quiet and -h/--help"
    ))
}

/// `show ENTITY [VALUE]` or `show ENTITY=VALUE`.
fn parse_show(words: &[&str], oneliner: bool, details: bool) -> Result<Request, UsageError> {
    let Some((first, rest)) = words.split_first() else {
        return Err(usage(
            "show what? corral's scontrol shows job ID, node [NAME], partition [NAME], \
             reservation [NAME], config, hostnames [LIST] and hostlist NAMES",
        ));
    };
    let (entity, inline) = match first.split_once('=') {
        Some((entity, value)) => (entity, Some(value).filter(|v| !v.is_empty())),
        None => (*first, None),
    };
    let entity = entity.to_ascii_lowercase();
    let values: Vec<&str> = inline.into_iter().chain(rest.iter().copied()).collect();
    let value = match values.as_slice() {
        [] => None,
        [value] => Some(*value),
        [_, extra, ..] => {
            return Err(usage(format!(
                "unexpected '{extra}' after 'show {entity}': it takes one argument"
            )));
        }
    };
    let unsupported = |what: &str| {
        usage(format!(
            "scontrol show {what} is not supported by corral; show supports job, node, \
             partition, reservation, config, hostnames and hostlist"
        ))
    };
    let hostlist = |sorted: bool| -> Result<Request, UsageError> {
        let list = value.ok_or_else(|| {
            usage(format!(
                "show {entity} needs host names, e.g. scontrol show {entity} gpu01,gpu02"
            ))
        })?;
        Ok(Request::Hostlist {
            list: list.to_string(),
            sorted,
        })
    };
    match entity_of(&entity) {
        Some(Entity::Hostnames) => Ok(Request::Hostnames(value.map(String::from))),
        Some(Entity::Hostlist) => hostlist(false),
        Some(Entity::HostlistSorted) => hostlist(true),
        Some(Entity::Job) => {
            let text = value.ok_or_else(|| {
                usage(
                    "show job needs a job id (e.g. scontrol show job $SLURM_JOB_ID); \
                     to list jobs use squeue",
                )
            })?;
            Ok(Request::ShowJob {
                job: job_id(text)?,
                oneliner,
                details,
            })
        }
        Some(Entity::Node) => Ok(Request::ShowNodes {
            name: value.map(String::from),
            oneliner,
        }),
        Some(Entity::Partition) => Ok(Request::ShowPartitions {
            name: value.map(String::from),
            oneliner,
        }),
        Some(Entity::Reservation) => Ok(Request::ShowReservations {
            name: value.map(String::from),
            oneliner,
        }),
        Some(Entity::Config) => Ok(Request::ShowConfig),
        Some(Entity::Unsupported(keyword)) => Err(unsupported(keyword)),
        None => Err(unsupported(&entity)),
    }
}

/// `write batch_script ID [FILE]`.
fn parse_write(words: &[&str]) -> Result<Request, UsageError> {
    match words {
        [what, job, rest @ ..] if what.eq_ignore_ascii_case("batch_script") && rest.len() <= 1 => {
            Ok(Request::WriteBatchScript {
                job: job_id(job)?,
                file: rest.first().map(|f| f.to_string()),
            })
        }
        _ => Err(usage(
            "write takes batch_script JOBID [FILE] (FILE - for standard output)",
        )),
    }
}

/// `listpids [JOB[.STEP]] [NODE]` (`*` for every job is not supported: give one).
fn parse_listpids(words: &[&str]) -> Result<Request, UsageError> {
    let (job, step) = match words.first() {
        None => (None, None),
        Some(text) => {
            let (job, step) = match text.split_once('.') {
                Some((job, "batch")) => (job, Some(None)),
                Some((job, step)) => (
                    job,
                    Some(Some(step.parse::<u32>().map_err(|_| {
                        usage(format!("'{text}' is not JOBID[.STEPID]"))
                    })?)),
                ),
                None => (*text, None),
            };
            (Some(job_id(job)?), step)
        }
    };
    if words.len() > 2 {
        return Err(usage("listpids takes [JOBID[.STEPID]] [NODENAME]"));
    }
    Ok(Request::ListPids {
        job,
        step,
        node: words.get(1).map(|n| n.to_string()),
    })
}

/// `hold 12,13`, `hold 12 13`.
fn parse_control(command: &str, action: Action, words: &[&str]) -> Result<Request, UsageError> {
    let jobs = words
        .iter()
        .flat_map(|word| word.split(','))
        .filter(|piece| !piece.is_empty())
        .map(job_id)
        .collect::<Result<Vec<_>, _>>()?;
    if jobs.is_empty() {
        return Err(usage(format!(
            "{command} needs job ids, e.g. scontrol {command} 12,13"
        )));
    }
    Ok(Request::Control { action, jobs })
}

fn job_id(text: &str) -> Result<u64, UsageError> {
    if let Ok(id) = text.parse::<u64>() {
        return Ok(id);
    }
    if text.contains('_') {
        return Err(usage(format!(
            "'{text}' is an array task; corral's scontrol takes the task's own job id \
             (the JOBID squeue shows for it)"
        )));
    }
    Err(usage(format!(
        "'{text}' is not a job id; give a number such as 12"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_words(line: &str) -> Result<Request, UsageError> {
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        parse(&args)
    }

    fn ok(line: &str) -> Request {
        parse_words(line).unwrap()
    }

    fn err(line: &str) -> String {
        parse_words(line).unwrap_err().0
    }

    fn show_job(job: u64, oneliner: bool) -> Request {
        Request::ShowJob {
            job,
            oneliner,
            details: false,
        }
    }

    #[test]
    fn write_listpids_and_details() {
        assert_eq!(
            ok("write batch_script 12 -"),
            Request::WriteBatchScript {
                job: 12,
                file: Some("-".into())
            }
        );
        assert_eq!(
            ok("write batch_script 12"),
            Request::WriteBatchScript {
                job: 12,
                file: None
            }
        );
        assert!(err("write 12").contains("batch_script"));
        assert_eq!(
            ok("listpids 12.batch gpu01"),
            Request::ListPids {
                job: Some(12),
                step: Some(None),
                node: Some("gpu01".into())
            }
        );
        assert_eq!(
            ok("listpids 12.3"),
            Request::ListPids {
                job: Some(12),
                step: Some(Some(3)),
                node: None
            }
        );
        assert_eq!(
            ok("-d show job 5"),
            Request::ShowJob {
                job: 5,
                oneliner: false,
                details: true
            }
        );
    }

    #[test]
    fn show_job_in_every_spelling() {
        for line in [
            "show job 12",
            "show jobid 12",
            "show jobs 12",
            "show job=12",
            "show jobid=12",
            "show JobId=12",
            "SHOW JOB 12",
            "Show Job 12",
            "show jobid= 12",
        ] {
            assert_eq!(ok(line), show_job(12, false), "{line}");
        }
    }

    #[test]
    fn oneliner_anywhere() {
        for line in ["-o show job 12", "--oneliner show job 12", "show job 12 -o"] {
            assert_eq!(ok(line), show_job(12, true), "{line}");
        }
        for line in ["-do show job 12", "-d -Q show -o job=12"] {
            let Request::ShowJob {
                oneliner, details, ..
            } = ok(line)
            else {
                panic!("{line}");
            };
            assert!(oneliner && details, "{line}");
        }
    }

    #[test]
    fn hostnames_with_and_without_a_list() {
        assert_eq!(
            ok("show hostnames gpu[01-03],login1"),
            Request::Hostnames(Some("gpu[01-03],login1".into()))
        );
        assert_eq!(ok("show hostnames"), Request::Hostnames(None));
        assert_eq!(ok("Show HostNames"), Request::Hostnames(None));
        assert_eq!(
            ok("show hostname n1"),
            Request::Hostnames(Some("n1".into()))
        );
        assert_eq!(
            ok("show hostnames=n1"),
            Request::Hostnames(Some("n1".into()))
        );
    }

    #[test]
    fn hostlist_plain_and_sorted() {
        assert_eq!(
            ok("show hostlist a,b,c"),
            Request::Hostlist {
                list: "a,b,c".into(),
                sorted: false
            }
        );
        assert_eq!(
            ok("show HOSTLISTSORTED b,a"),
            Request::Hostlist {
                list: "b,a".into(),
                sorted: true
            }
        );
        assert!(err("show hostlist").contains("needs host names"));
    }

    #[test]
    fn job_controls_take_lists() {
        let control = |action, jobs: &[u64]| Request::Control {
            action,
            jobs: jobs.to_vec(),
        };
        assert_eq!(ok("hold 12"), control(Action::Hold, &[12]));
        assert_eq!(ok("UHOLD 12"), control(Action::Hold, &[12]));
        assert_eq!(ok("release 12,13"), control(Action::Release, &[12, 13]));
        assert_eq!(
            ok("Requeue 12,13 14"),
            control(Action::Requeue, &[12, 13, 14])
        );
        assert_eq!(ok("requeue 12,"), control(Action::Requeue, &[12]));
    }

    #[test]
    fn update_help_and_no_command() {
        assert_eq!(
            ok("update JobId=12 TimeLimit=10 jobname=x"),
            Request::Update {
                job: 12,
                fields: vec![
                    ("TimeLimit".to_string(), "10".to_string()),
                    ("jobname".to_string(), "x".to_string())
                ]
            }
        );
        assert!(err("UPDATE").contains("JobId"));
        assert!(err("update JobId=12").contains("nothing to change"));
        assert!(err("update JobId=x TimeLimit=1").contains("not a job id"));
        assert!(err("update JobId=1 TimeLimit").contains("KEY=VALUE"));
        assert_eq!(ok("help"), Request::Help);
        assert_eq!(ok("-h"), Request::Help);
        assert_eq!(ok("--help show job 1"), Request::Help);
        assert!(err("").contains("no command given"));
    }

    #[test]
    fn unknown_commands_list_the_supported_ones() {
        let message = err("reconfigure");
        assert!(message.contains("'reconfigure'"), "{message}");
        assert!(message.contains(SUPPORTED), "{message}");
        assert!(err("requeuehold 12").contains(SUPPORTED));
        assert!(err("show topology").contains("show topology is not supported"));
        assert!(err("show ca").contains("show cache is not supported"));
        assert!(err("show frobs").contains("show frobs is not supported"));
        assert!(err("show").contains("show what"));
    }

    #[test]
    fn bad_job_ids_and_options_are_refused() {
        assert!(err("show job").contains("needs a job id"));
        assert!(err("show job=").contains("needs a job id"));
        assert!(err("show job abc").contains("'abc' is not a job id"));
        assert!(err("show job 12_3").contains("array task"));
        assert!(err("show job 12 13").contains("unexpected '13'"));
        assert!(err("show job=12 13").contains("unexpected '13'"));
        assert!(err("hold").contains("hold needs job ids"));
        assert!(err("hold 12,x").contains("'x' is not a job id"));
        assert!(err("requeue Incomplete 12").contains("'Incomplete'"));
        assert!(err("-M other show job 1").contains("unknown option '-M'"));
        assert!(err("--json show job 1").contains("unknown option '--json'"));
        assert!(err("hold -5").contains("unknown option"));
    }

    #[test]
    fn double_dash_ends_options() {
        assert!(err("-- -o show job 1").contains("'-o' is not a command"));
    }

    #[test]
    fn nodes_partitions_ping_and_node_updates() {
        assert_eq!(
            ok("show node gpu01"),
            Request::ShowNodes {
                name: Some("gpu01".into()),
                oneliner: false
            }
        );
        assert_eq!(
            ok("-o show nodes"),
            Request::ShowNodes {
                name: None,
                oneliner: true
            }
        );
        assert_eq!(
            ok("show PartitionName=gpu"),
            Request::ShowPartitions {
                name: Some("gpu".into()),
                oneliner: false
            }
        );
        assert_eq!(ok("ping"), Request::Ping);
        assert_eq!(
            ok("update NodeName=gpu[01-02] State=DRAIN Reason=bad cable"),
            Request::UpdateNodes {
                nodes: "gpu[01-02]".into(),
                state: "DRAIN".into(),
                reason: Some("bad cable".into())
            }
        );
        assert_eq!(
            ok("update nodename=gpu01 state=resume"),
            Request::UpdateNodes {
                nodes: "gpu01".into(),
                state: "resume".into(),
                reason: None
            }
        );
        assert!(err("update NodeName=gpu01").contains("State=DRAIN"));
        assert!(err("update NodeName=gpu01 Weight=5").contains("'Weight=5'"));
    }
}
