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
    };
    let reply = cluster
        .call(Retry::Idempotent, |mut c| {
            let request = request.clone();
            async move { c.list_jobs(request).await }
        })
        .await?;
    let jobs = decode_jobs(&reply.jobs_json)?;
    if json {
        super::print_json(&jobs)?;
    } else {
        let options = QueueOptions {
            noheader: args.noheader,
            ..QueueOptions::default()
        };
        print!(
            "{}",
            queue_table(&jobs, Timestamp(reply.as_of_ms), &options)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Decodes job records.
pub fn decode_jobs(json: &[String]) -> anyhow::Result<Vec<Job>> {
    json.iter()
        .map(|j| records::decode::<Job>("job", j).map_err(anyhow::Error::from))
        .collect()
}
