//! `scontrol` as job scripts use it (reached through a link named `scontrol`):
//! `show hostnames`/`show hostlist` with no cluster; `show job`, the job
//! controls, `update JobId=...`, `show node|partition|reservation|config`,
//! `update NodeName=...` and `ping` over the usual connection. Errors print as
//! scontrol's, with corral's exit statuses.

mod config;
mod entity;
mod hosts;
mod nodes;
mod parse;
mod processes;
pub(crate) mod reservations;

use std::process::ExitCode;

use anyhow::Context;
use tonic::Code;

use corral_state::time::Timestamp;

use self::parse::{Request, USAGE};
use super::jobs;
use crate::args::GlobalArgs;
use crate::connection::{Cluster, ClusterSettings, StatusError};
use crate::exit;
use crate::format::show_job;
use crate::when;

/// Runs `scontrol ARGS`.
pub async fn run(args: &[String], global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let request = match parse::parse(args) {
        Ok(request) => request,
        Err(e) => {
            eprintln!("scontrol: error: {e}");
            eprintln!("(scontrol --help lists what corral's scontrol does)");
            return Ok(ExitCode::from(exit::USAGE));
        }
    };
    match execute(request, global).await {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("scontrol: error: {e:#}");
            Ok(ExitCode::from(exit::code_for(&e)))
        }
    }
}

async fn execute(request: Request, global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let connect = || -> anyhow::Result<Cluster> {
        let settings = ClusterSettings::resolve(&global.cluster_flags())
            .context("scontrol finds the cluster through CORRAL_CLUSTER, CORRAL_CA, CORRAL_CERT and CORRAL_KEY")?;
        Cluster::new(settings)
    };
    match request {
        Request::Help => print!("{USAGE}"),
        Request::Hostnames(list) => {
            let nodelist = std::env::var("SLURM_JOB_NODELIST").ok();
            print!(
                "{}",
                hosts::hostnames(list.as_deref(), nodelist.as_deref())?
            );
        }
        Request::Hostlist { list, sorted } => println!("{}", hosts::hostlist(&list, sorted)?),
        Request::ShowJob {
            job,
            oneliner,
            details,
        } => {
            let (record, _script) = jobs::fetch(&connect()?, job).await?;
            let mut text = show_job(&record, None, None, Timestamp(when::now_ms()));
            if details {
                text = with_details(&text, &crate::format::show_job::detail_lines(&record));
            }
            if oneliner {
                println!("{}", one_line(&text));
            } else {
                print!("{text}");
            }
        }
        Request::Control { action, jobs } => return control(&connect()?, action, &jobs).await,
        Request::Update { job, fields } => jobs::update(&connect()?, job, fields).await?,
        Request::ShowNodes { name, oneliner } => {
            return nodes::show_nodes(&connect()?, name.as_deref(), oneliner).await;
        }
        Request::ShowPartitions { name, oneliner } => {
            return nodes::show_partitions(&connect()?, name.as_deref(), oneliner).await;
        }
        Request::ShowReservations { name, oneliner } => {
            return reservations::show_reservations(&connect()?, name.as_deref(), oneliner).await;
        }
        Request::ShowConfig => return config::show(&connect()?).await,
        Request::UpdateNodes {
            nodes: list,
            state,
            reason,
        } => return nodes::update_nodes(&connect()?, &list, &state, reason).await,
        Request::Ping => return nodes::ping(&connect()?).await,
        Request::WriteBatchScript { job, file } => {
            return processes::write_batch_script(&connect()?, job, file.as_deref()).await;
        }
        Request::ListPids { job, step, node } => {
            return processes::list_pids(&connect()?, job, step, node.as_deref()).await;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Each job in turn, as scontrol does: one refusal does not stop the others; the
/// status is the first failure's.
async fn control(cluster: &Cluster, action: jobs::Action, ids: &[u64]) -> anyhow::Result<ExitCode> {
    let mut status = None;
    for &id in ids {
        if let Err(e) = jobs::control(cluster, id, action, false).await {
            eprintln!("scontrol: error: job {id}: {e:#}");
            status.get_or_insert(exit::code_for(&e));
        }
    }
    Ok(status.map_or(ExitCode::SUCCESS, ExitCode::from))
}

/// A controller that does not know a call this scontrol makes (one older
/// than it) says so in words; any other error is left as it is.
fn older_controller(error: anyhow::Error, command: &str) -> anyhow::Error {
    match error.downcast_ref::<StatusError>() {
        Some(StatusError(status)) if status.code() == Code::Unimplemented => anyhow::anyhow!(
            "the controller does not serve {command}: it runs an older corral than this \
             scontrol; upgrade the controllers (or use a scontrol of their version)"
        ),
        _ => error,
    }
}

/// `show job -d`: the per-node lines after the TRES lines, before `WorkDir=`.
fn with_details(text: &str, details: &[String]) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("WorkDir=") {
            for detail in details {
                out.push_str("   ");
                out.push_str(detail);
                out.push('\n');
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `show job -o`: the `Key=Value` lines joined by single spaces.
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_joins_the_indented_lines() {
        assert_eq!(
            one_line("JobId=1 JobName=x\n   UserId=a(1) GroupId=1\n   JobState=PENDING\n"),
            "JobId=1 JobName=x UserId=a(1) GroupId=1 JobState=PENDING"
        );
    }
}
