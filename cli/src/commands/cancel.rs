//! `corral cancel` (and `scancel`).

use std::process::ExitCode;

use corral_proto::api::CancelJobsRequest;

use crate::args::CancelArgs;
use crate::connection::{Cluster, Retry};
use crate::exit;

/// Cancels; exits non-zero when any target was refused.
pub async fn run(cluster: &Cluster, args: &CancelArgs, json: bool) -> anyhow::Result<ExitCode> {
    if args.jobs.is_empty() && args.user.is_none() {
        anyhow::bail!("name the jobs to cancel (ids; 123_4 for an array task) or a user with -u");
    }
    let request = CancelJobsRequest {
        jobs: args.jobs.clone(),
        user: args.user.clone().unwrap_or_default(),
        signal: args.signal.clone().unwrap_or_default(),
    };
    let reply = cluster
        .call(Retry::Once, |mut c| {
            let request = request.clone();
            async move { c.cancel_jobs(request).await }
        })
        .await?;
    if json {
        super::print_json(&serde_json::json!({
            "cancelled": reply.affected,
            "errors": reply.errors,
        }))?;
    }
    for error in &reply.errors {
        eprintln!("corral cancel: error: {error}");
    }
    Ok(if reply.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::REFUSED)
    })
}
