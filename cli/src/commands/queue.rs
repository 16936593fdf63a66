//! `corral queue` (and `squeue`): filters, formats (`-o`, `-O`, `-l`,
//! `--start`, or `SQUEUE_FORMAT`/`SQUEUE_FORMAT2`), sorting (`-S`, or
//! `SQUEUE_SORT`) and `--iterate`. Refusals print squeue's own words and exit 1.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use corral_proto::api::{ListJobsRequest, ListNodesRequest};
use corral_proto::records;
use corral_state::job::Job;
use corral_state::slurm::hostlist;
use corral_state::time::Timestamp;

use crate::args::QueueArgs;
use crate::connection::{Cluster, Retry};
use crate::format::QueueOptions;
use crate::format::format_spec::{Format, parse_names};
use crate::format::queue::{LONG_FORMAT, START_FORMAT, letters, queue_table};
use crate::format::queue_fields::{QueueContext, QueueField, StartEstimate};
use crate::format::queue_rows::{ListedJob, parse_sort, rows, sort};
use crate::job_selection::JobSelection;

/// squeue's job states (names and codes); those corral never enters match no job.
const SLURM_STATES: [(&str, &str); 24] = [
    ("PENDING", "PD"),
    ("RUNNING", "R"),
    ("SUSPENDED", "S"),
    ("COMPLETED", "CD"),
    ("CANCELLED", "CA"),
    ("FAILED", "F"),
    ("TIMEOUT", "TO"),
    ("NODE_FAIL", "NF"),
    ("PREEMPTED", "PR"),
    ("BOOT_FAIL", "BF"),
    ("DEADLINE", "DL"),
    ("OUT_OF_MEMORY", "OOM"),
    ("COMPLETING", "CG"),
    ("CONFIGURING", "CF"),
    ("RESIZING", "RS"),
    ("RESV_DEL_HOLD", "RD"),
    ("REQUEUED", "RQ"),
    ("REQUEUE_FED", "RF"),
    ("REQUEUE_HOLD", "RH"),
    ("REVOKED", "RV"),
    ("SIGNALING", "SI"),
    ("SPECIAL_EXIT", "SE"),
    ("STAGE_OUT", "SO"),
    ("STOPPED", "ST"),
];

/// States corral's controller filters on.
const CORRAL_STATES: [&str; 10] = [
    "PENDING",
    "RUNNING",
    "COMPLETING",
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "REQUEUE_HOLD",
];

/// What `-t` asked for.
enum StateFilter {
    /// Unfinished jobs (no `-t`).
    Default,
    /// `-t all`.
    All,
    /// These corral states (empty: states corral never enters, so no job).
    Only(Vec<String>),
}

/// A refusal in squeue's words (printed as `squeue: error: ...`, exit 1).
struct Refusal(Vec<String>);

/// Lists jobs.
pub async fn run(cluster: &Cluster, args: &QueueArgs, json: bool) -> anyhow::Result<ExitCode> {
    match plan(args) {
        Err(Refusal(lines)) => {
            for line in lines {
                eprintln!("squeue: error: {line}");
            }
            Ok(ExitCode::from(1))
        }
        Ok(plan) => loop {
            if let Err(Refusal(lines)) = print_once(cluster, args, &plan, json).await? {
                for line in lines {
                    eprintln!("squeue: error: {line}");
                }
                return Ok(ExitCode::from(1));
            }
            match args.iterate {
                Some(secs) if secs > 0 => {
                    println!();
                    tokio::time::sleep(Duration::from_secs(secs)).await;
                }
                _ => return Ok(ExitCode::SUCCESS),
            }
        },
    }
}

/// The command line, checked: what to ask for and how to print it.
struct Plan {
    states: StateFilter,
    jobs: JobSelection,
    options: QueueOptions,
    sort: Vec<crate::format::queue_rows::SortKey>,
}

fn plan(args: &QueueArgs) -> Result<Plan, Refusal> {
    let states = state_filter(&args.states)?;
    let jobs = JobSelection::parse(&args.jobs)
        .map_err(|id| Refusal(vec![format!("Invalid job id: {id}")]))?;
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let format = if let Some(names) = &args.format_names {
        parse_names(names, 20, QueueField::from_name)
    } else if let Some(format) = &args.format {
        letters(format)
    } else if args.start {
        letters(START_FORMAT)
    } else if args.long {
        letters(LONG_FORMAT)
    } else if let Some(names) = env("SQUEUE_FORMAT2") {
        parse_names(&names, 20, QueueField::from_name)
    } else if let Some(format) = env("SQUEUE_FORMAT") {
        letters(&format)
    } else {
        QueueOptions::default().format
    };
    report_unknown(&format);
    let default_sort = if args.start { "S" } else { "P,t,-p" };
    let sort_spec = args
        .sort
        .clone()
        .or_else(|| env("SQUEUE_SORT"))
        .unwrap_or_else(|| default_sort.to_string());
    let sort = parse_sort(&sort_spec).map_err(|e| Refusal(vec![e]))?;
    // squeue prints the date above the header under -l or --iterate, whatever the format.
    let date_line = args.long || args.iterate.is_some();
    Ok(Plan {
        states,
        jobs,
        options: QueueOptions {
            format,
            noheader: args.noheader,
            date_line,
        },
        sort,
    })
}

fn report_unknown(format: &Format<QueueField>) {
    for unknown in &format.unknown {
        eprintln!("squeue: error: Invalid job format specification: {unknown}");
    }
}

fn state_filter(states: &[String]) -> Result<StateFilter, Refusal> {
    let names: Vec<&str> = states
        .iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if names.is_empty() {
        return Ok(StateFilter::Default);
    }
    if names.iter().any(|n| n.eq_ignore_ascii_case("all")) {
        return Ok(StateFilter::All);
    }
    let mut wanted = Vec::new();
    for name in names {
        let Some((state, _)) = SLURM_STATES.iter().find(|(long, code)| {
            long.eq_ignore_ascii_case(name) || code.eq_ignore_ascii_case(name)
        }) else {
            let valid: Vec<&str> = SLURM_STATES.iter().map(|(long, _)| *long).collect();
            return Err(Refusal(vec![
                format!("Invalid job state specified: {name}"),
                format!("Valid job states include: {}", valid.join(",")),
            ]));
        };
        if CORRAL_STATES.contains(state) {
            wanted.push((*state).to_string());
        }
    }
    Ok(StateFilter::Only(wanted))
}

async fn print_once(
    cluster: &Cluster,
    args: &QueueArgs,
    plan: &Plan,
    json: bool,
) -> anyhow::Result<Result<(), Refusal>> {
    let mut users = args.users.clone();
    if args.me {
        let me = cluster
            .call(Retry::Idempotent, |mut c| async move {
                c.who_am_i(corral_proto::api::Empty {}).await
            })
            .await?;
        users.push(me.name);
    }
    let (states, all) = match &plan.states {
        StateFilter::Default => (Vec::new(), false),
        StateFilter::All => (Vec::new(), true),
        StateFilter::Only(states) => (states.clone(), false),
    };
    let nodes = match &args.nodelist {
        Some(list) => match checked_nodes(cluster, list).await? {
            Ok(nodes) => Some(nodes),
            Err(refusal) => return Ok(Err(refusal)),
        },
        None => None,
    };
    let request = ListJobsRequest {
        users,
        partitions: args.partitions.clone(),
        accounts: args.accounts.clone(),
        states,
        job_ids: plan.jobs.ids.clone(),
        all,
        ..ListJobsRequest::default()
    };
    let nothing = matches!(&plan.states, StateFilter::Only(s) if s.is_empty());
    let (mut jobs, as_of_ms) = if nothing {
        (Vec::new(), crate::when::now_ms())
    } else {
        list_jobs_with_priorities(cluster, request.clone()).await?
    };
    if args.start {
        // --start lists pending jobs unless -t names other states.
        if matches!(plan.states, StateFilter::Default) {
            jobs.retain(|l| l.job.state == corral_state::job::JobState::Pending);
        }
        let estimates = start_estimates(cluster, request).await?;
        for listed in &mut jobs {
            listed.estimate = estimates.get(&listed.job.id.0).cloned();
        }
    }
    jobs.retain(|listed| keep(listed, args, plan, nodes.as_deref()));
    if json {
        let jobs: Vec<&Job> = jobs.iter().map(|l| &l.job).collect();
        super::print_json(&jobs)?;
        return Ok(Ok(()));
    }
    let ctx = QueueContext {
        now: Timestamp(as_of_ms),
        group_names: group_names(),
    };
    let mut rows = rows(&jobs, !args.array && plan.jobs.tasks.is_empty());
    sort(&mut rows, &plan.sort, &ctx);
    print!("{}", queue_table(&rows, &ctx, &plan.options));
    Ok(Ok(()))
}

/// Client-side filters: array tasks named `N_T`, QOS, names, nodes.
fn keep(listed: &ListedJob, args: &QueueArgs, plan: &Plan, nodes: Option<&[String]>) -> bool {
    let job = &listed.job;
    let task_ok = plan.jobs.keeps(job);
    let qos_ok = args.qos.is_empty()
        || job
            .qos
            .as_ref()
            .is_some_and(|q| args.qos.iter().any(|w| w == q));
    let name_ok = args.names.is_empty() || args.names.contains(&job.spec.name);
    let nodes_ok = nodes.is_none_or(|wanted| {
        let on = |name: &String| wanted.contains(name);
        let running = job
            .current_attempt()
            .filter(|_| job.state != corral_state::job::JobState::Pending)
            .is_some_and(|a| a.allocation.iter().any(|n| on(&n.node)));
        running
            || listed
                .estimate
                .as_ref()
                .is_some_and(|e| e.nodes.iter().any(on))
    });
    task_ok && qos_ok && name_ok && nodes_ok
}

/// The hostlist of `-w`, every name a node of the cluster (squeue refuses others).
async fn checked_nodes(
    cluster: &Cluster,
    list: &str,
) -> anyhow::Result<Result<Vec<String>, Refusal>> {
    let Ok(names) = hostlist::expand(list) else {
        return Ok(Err(Refusal(vec![format!("Invalid node name {list}")])));
    };
    let reply = cluster
        .call(Retry::Idempotent, |mut c| async move {
            c.list_nodes(ListNodesRequest::default()).await
        })
        .await?;
    let known: Vec<String> = reply
        .nodes_json
        .iter()
        .filter_map(|n| records::decode::<corral_state::node::Node>("node", n).ok())
        .map(|n| n.name)
        .collect();
    if let Some(unknown) = names.iter().find(|n| !known.contains(n)) {
        return Ok(Err(Refusal(vec![format!("Invalid node name {unknown}")])));
    }
    Ok(Ok(names))
}

/// Group names by gid from the group database where the CLI runs.
pub fn group_names() -> BTreeMap<u32, String> {
    let Ok(text) = std::fs::read_to_string("/etc/group") else {
        return BTreeMap::new();
    };
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(':');
            let name = fields.next()?;
            let gid = fields.nth(1)?.parse().ok()?;
            Some((gid, name.to_string()))
        })
        .collect()
}

/// When the matching pending jobs are expected to start, by job id.
async fn start_estimates(
    cluster: &Cluster,
    request: ListJobsRequest,
) -> anyhow::Result<BTreeMap<u64, StartEstimate>> {
    let reply = cluster
        .call(Retry::Idempotent, |mut c| {
            let request = request.clone();
            async move { c.start_estimates(request).await }
        })
        .await?;
    Ok(reply
        .estimates
        .into_iter()
        .map(|e| {
            (
                e.job_id,
                StartEstimate {
                    start: Timestamp(e.start_ms),
                    nodes: e.nodes,
                },
            )
        })
        .collect())
}

/// Every job `request` matches, page by page (a reply of every job at once
/// would outgrow the message limit on a large cluster), with the state's clock
/// when the first page was read.
pub async fn list_jobs(
    cluster: &Cluster,
    request: ListJobsRequest,
) -> anyhow::Result<(Vec<Job>, u64)> {
    let (listed, as_of_ms) = list_jobs_with_priorities(cluster, request).await?;
    Ok((listed.into_iter().map(|l| l.job).collect(), as_of_ms))
}

/// As [`list_jobs`], with each job's priority.
pub async fn list_jobs_with_priorities(
    cluster: &Cluster,
    mut request: ListJobsRequest,
) -> anyhow::Result<(Vec<ListedJob>, u64)> {
    request.paged = true;
    // What squeue shows is never older than what the user was told before
    // (a submission acknowledged, a cancel done): read through the leader.
    request.consistent = true;
    let mut jobs = Vec::new();
    let mut as_of_ms = None;
    loop {
        let reply = cluster
            .call(Retry::Idempotent, |mut c| {
                let request = request.clone();
                async move { c.list_jobs(request).await }
            })
            .await?;
        let decoded = decode_jobs(&reply.jobs_json)?;
        jobs.extend(decoded.into_iter().enumerate().map(|(i, job)| ListedJob {
            job,
            priority: reply.priorities.get(i).copied().unwrap_or(0),
            estimate: None,
        }));
        as_of_ms.get_or_insert(reply.as_of_ms);
        if reply.next_after_job_id == 0 || reply.next_after_job_id <= request.after_job_id {
            return Ok((jobs, as_of_ms.unwrap_or(reply.as_of_ms)));
        }
        request.after_job_id = reply.next_after_job_id;
    }
}

/// Decodes job records.
pub fn decode_jobs(json: &[String]) -> anyhow::Result<Vec<Job>> {
    json.iter()
        .map(|j| records::decode::<Job>("job", j).map_err(anyhow::Error::from))
        .collect()
}
