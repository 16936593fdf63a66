//! `corral acct` (and `sacct`): job records in a window, page by page, printed
//! in sacct's columns (`--format`, `SACCT_FORMAT`, `--brief`) or parsable
//! forms; or GPU-hours per user and account with `--usage`. Refusals print
//! sacct's own words and exit 1.

use std::process::ExitCode;

use corral_proto::api::{AccountingReply, AccountingRequest, UsageRow};
use corral_state::job::Job;
use corral_state::time::Timestamp;

use super::queue::decode_jobs;
use crate::args::AcctArgs;
use crate::connection::{Cluster, Retry};
use crate::format::acct::{
    AcctOptions, BRIEF_FIELDS, CORRAL_DEFAULT_FIELDS, SLURM_DEFAULT_FIELDS, acct_table,
    parse_fields,
};
use crate::format::acct_fields::{AcctContext, field_names};
use crate::format::print_fields::Layout;
use crate::format::usage_table;
use crate::job_selection::JobSelection;
use crate::when;

/// sacct's state codes and names; corral's states are the ones it can enter.
const STATES: [(&str, &str); 15] = [
    ("CA", "CANCELLED"),
    ("CD", "COMPLETED"),
    ("CF", "CONFIGURING"),
    ("DL", "DEADLINE"),
    ("F", "FAILED"),
    ("NF", "NODE_FAIL"),
    ("OOM", "OUT_OF_MEMORY"),
    ("PD", "PENDING"),
    ("PR", "PREEMPTED"),
    ("R", "RUNNING"),
    ("RQ", "REQUEUED"),
    ("RS", "RESIZING"),
    ("RV", "REVOKED"),
    ("S", "SUSPENDED"),
    ("TO", "TIMEOUT"),
];

const MS_PER_DAY: u64 = 86_400_000;

/// Queries accounting.
pub async fn run(cluster: &Cluster, args: &AcctArgs, json: bool) -> anyhow::Result<ExitCode> {
    if args.helpformat {
        print!("{}", help_format());
        return Ok(ExitCode::SUCCESS);
    }
    let refuse = |message: String| {
        eprintln!("sacct: error: {message}");
        Ok(ExitCode::from(1))
    };
    let fields = if args.brief {
        BRIEF_FIELDS.to_string()
    } else if let Some(format) = &args.format {
        format.clone()
    } else if let Some(format) = std::env::var("SACCT_FORMAT").ok().filter(|f| !f.is_empty()) {
        format
    } else if args.sacct {
        SLURM_DEFAULT_FIELDS.to_string()
    } else {
        CORRAL_DEFAULT_FIELDS.to_string()
    };
    let columns = match parse_fields(&fields) {
        Ok(columns) => columns,
        Err(message) => return refuse(message),
    };
    let states = match state_names(&args.states) {
        Ok(states) => states,
        Err(message) => return refuse(message),
    };
    let selection = match JobSelection::parse(&args.jobs) {
        Ok(selection) => selection,
        Err(id) => return refuse(format!("Invalid job id: {id}")),
    };
    let job_ids = selection.ids.clone();
    let now = when::now_ms();
    let parse = |text: &Option<String>| -> anyhow::Result<Option<u64>> {
        text.as_deref().map(|t| when::parse(t, now)).transpose()
    };
    // sacct's default window (`corral acct`'s is every job): since midnight
    // (UTC) up to now; with -j, every job; with -s, the instant `now` (jobs
    // in those states now), or from -S to -S when only -S is given; with -j
    // and -s, from the epoch to -S, or to now without -S.
    let start = parse(&args.start)?;
    let (start_ms, end_ms) = if !args.sacct {
        (start.unwrap_or(0), parse(&args.end)?.unwrap_or(0))
    } else if !states.is_empty() && !job_ids.is_empty() {
        // 22.05: -S from the epoch, -E at -S when -S is given, else now.
        let end = parse(&args.end)?.or(start).unwrap_or(0);
        (start.unwrap_or(0), end)
    } else if !states.is_empty() {
        let start_ms = start.unwrap_or(now);
        (start_ms, parse(&args.end)?.unwrap_or(start_ms))
    } else if !job_ids.is_empty() {
        (start.unwrap_or(0), parse(&args.end)?.unwrap_or(0))
    } else {
        (
            start.unwrap_or(now - now % MS_PER_DAY),
            parse(&args.end)?.unwrap_or(0),
        )
    };
    if end_ms != 0 && start_ms > end_ms {
        return refuse("Start time requested is after end time.".into());
    }
    let mut users = args.users.clone();
    // sacct shows your own jobs unless told otherwise; `corral acct` every job
    // you may see.
    if args.sacct && users.is_empty() && job_ids.is_empty() && !args.all_users {
        let me = cluster
            .call(Retry::Idempotent, |mut c| async move {
                c.who_am_i(corral_proto::api::Empty {}).await
            })
            .await?;
        users.push(me.name);
    }
    let request = AccountingRequest {
        job_ids,
        users,
        accounts: args.accounts.clone(),
        start_ms,
        end_ms,
        paged: true,
        after_job_id: 0,
    };
    let (mut jobs, usage, as_of_ms) = accounting(cluster, request).await?;
    jobs.retain(|job| {
        (args.partitions.is_empty() || args.partitions.contains(&job.partition))
            && (args.names.is_empty() || args.names.contains(&job.spec.name))
            && (states.is_empty() || in_state_within(job, &states, start_ms, end_ms, now))
            && selection.keeps(job)
    });
    if json {
        let usage: Vec<serde_json::Value> = usage
            .iter()
            .map(|u| {
                serde_json::json!({
                    "user": u.user, "account": u.account, "gpu_hours": u.gpu_hours, "jobs": u.jobs,
                })
            })
            .collect();
        super::print_json(&serde_json::json!({ "jobs": jobs, "usage": usage }))?;
    } else if args.usage {
        print!("{}", usage_table(&usage));
    } else {
        let delimiter = || args.delimiter.clone().unwrap_or_else(|| "|".into());
        let layout = match (args.parsable2, args.parsable) {
            (true, _) => Layout::Parsable {
                delimiter: delimiter(),
                trailing: false,
            },
            (false, true) => Layout::Parsable {
                delimiter: delimiter(),
                trailing: true,
            },
            _ => Layout::Columns,
        };
        let options = AcctOptions {
            columns,
            allocations: args.allocations || !args.sacct,
            attempts: args.attempts,
            noheader: args.noheader,
            layout,
        };
        let ctx = AcctContext {
            now: Timestamp(as_of_ms),
            group_names: super::queue::group_names(),
        };
        print!("{}", acct_table(&jobs, &ctx, &options));
    }
    Ok(ExitCode::SUCCESS)
}

/// The state names `-s` asks for (sacct's codes or names); `Err` names one it
/// does not know, in sacct's words.
fn state_names(states: &[String]) -> Result<Vec<&'static str>, String> {
    states
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(|s| {
            STATES
                .iter()
                .find(|(code, name)| code.eq_ignore_ascii_case(s) || name.eq_ignore_ascii_case(s))
                .map(|(_, name)| *name)
                .ok_or_else(|| format!("Invalid state: {s}"))
        })
        .collect()
}

/// Every page of records `request` matches, the usage rows and the state's clock.
async fn accounting(
    cluster: &Cluster,
    mut request: AccountingRequest,
) -> anyhow::Result<(Vec<Job>, Vec<UsageRow>, u64)> {
    let mut jobs = Vec::new();
    let mut first: Option<AccountingReply> = None;
    loop {
        let reply = cluster
            .call(Retry::Idempotent, |mut c| {
                let request = request.clone();
                async move { c.accounting(request).await }
            })
            .await?;
        jobs.extend(decode_jobs(&reply.jobs_json)?);
        let next = reply.next_after_job_id;
        first.get_or_insert(reply);
        if next == 0 || next <= request.after_job_id {
            let first = first.unwrap_or_default();
            return Ok((jobs, first.usage, first.as_of_ms));
        }
        request.after_job_id = next;
    }
}

/// `--helpformat`: the field names, four to a line.
fn help_format() -> String {
    let names: Vec<&str> = field_names().collect();
    let mut out = String::new();
    for chunk in names.chunks(4) {
        let line: Vec<String> = chunk.iter().map(|name| format!("{name:<19}")).collect();
        out.push_str(line.join(" ").trim_end());
        out.push('\n');
    }
    out
}

/// sacct's `-s` with a window: a job that ended in one of `states` counts when
/// it ended within the window; a pending or running one when it was so at
/// some time in it (the window itself was checked by the controller).
fn in_state_within(job: &Job, states: &[&str], start_ms: u64, end_ms: u64, now: u64) -> bool {
    if !states.iter().any(|s| *s == job.state.slurm_name()) {
        return false;
    }
    let end = if end_ms == 0 { now } else { end_ms };
    match job.ended_at {
        Some(at) if job.state.is_terminal() => (start_ms..=end).contains(&at.as_ms()),
        _ => true,
    }
}
