//! `corral acct` (and `sacct`): job records in a window, or GPU-hours per user
//! and account with `--usage`.

use std::process::ExitCode;

use corral_proto::api::AccountingRequest;
use corral_state::time::Timestamp;

use super::queue::decode_jobs;
use crate::args::AcctArgs;
use crate::connection::{Cluster, Retry};
use crate::format::{AcctOptions, acct_table, usage_table};
use crate::when;

/// Queries accounting.
pub async fn run(cluster: &Cluster, args: &AcctArgs, json: bool) -> anyhow::Result<ExitCode> {
    let now = when::now_ms();
    let parse = |text: &Option<String>| -> anyhow::Result<u64> {
        text.as_deref().map_or(Ok(0), |t| when::parse(t, now))
    };
    let request = AccountingRequest {
        job_ids: args.jobs.clone(),
        users: args.users.clone(),
        accounts: args.accounts.clone(),
        start_ms: parse(&args.start)?,
        end_ms: parse(&args.end)?,
    };
    let reply = cluster
        .call(Retry::Idempotent, |mut c| {
            let request = request.clone();
            async move { c.accounting(request).await }
        })
        .await?;
    let jobs = decode_jobs(&reply.jobs_json)?;
    if json {
        let usage: Vec<serde_json::Value> = reply
            .usage
            .iter()
            .map(|u| {
                serde_json::json!({
                    "user": u.user, "account": u.account, "gpu_hours": u.gpu_hours, "jobs": u.jobs,
                })
            })
            .collect();
        super::print_json(&serde_json::json!({ "jobs": jobs, "usage": usage }))?;
    } else if args.usage {
        print!("{}", usage_table(&reply.usage));
    } else {
        let options = AcctOptions {
            attempts: args.attempts,
            noheader: args.noheader,
        };
        print!("{}", acct_table(&jobs, Timestamp(reply.as_of_ms), &options));
    }
    Ok(ExitCode::SUCCESS)
}
