//! `corral queue` (and `squeue`).

use std::process::ExitCode;

use corral_proto::api::ListJobsRequest;
use corral_proto::records;
use corral_state::job::Job;
use corral_state::time::Timestamp;

use crate::args::QueueArgs;
use crate::connection::{Cluster, Retry};
use crate::format::{QueueOptions, queue_table};

/// Lists jobs.
pub async fn run(cluster: &Cluster, args: &QueueArgs, json: bool) -> anyhow::Result<ExitCode> {
    let mut users = args.users.clone();
    if args.me {
        let me = cluster
            .call(Retry::Idempotent, |mut c| async move {
                c.who_am_i(corral_proto::api::Empty {}).await
            })
            .await?;
        users.push(me.name);
    }
    let request = ListJobsRequest {
        users,
        partitions: args.partitions.clone(),
        accounts: args.accounts.clone(),
        states: args.states.clone(),
        job_ids: args.jobs.clone(),
        all: args.all,
        ..ListJobsRequest::default()
    };
    let (jobs, as_of_ms) = list_jobs(cluster, request).await?;
    if json {
        super::print_json(&jobs)?;
    } else {
        let options = QueueOptions {
            noheader: args.noheader,
            ..QueueOptions::default()
        };
        print!("{}", queue_table(&jobs, Timestamp(as_of_ms), &options));
    }
    Ok(ExitCode::SUCCESS)
}

/// Every job `request` matches, page by page (a reply of every job at once
/// would outgrow the message limit on a large cluster), with the state's clock
/// when the first page was read.
pub async fn list_jobs(
    cluster: &Cluster,
    mut request: ListJobsRequest,
) -> anyhow::Result<(Vec<Job>, u64)> {
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
        jobs.extend(decode_jobs(&reply.jobs_json)?);
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
