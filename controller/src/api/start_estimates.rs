//! `StartEstimates` (squeue --start): when and where the matching pending jobs
//! are expected to start, read from one scheduling pass run on a copy of this
//! replica's state, through the same admission gate as `ExplainJob`.

use corral_proto::api::{ListJobsRequest, StartEstimate, StartEstimatesReply};
use corral_scheduler::pass::{self, Verdict};
use tonic::Status;

use super::ApiContext;
use super::jobs::JobFilter;
use crate::clock;

/// Runs a pass and reports the estimates of the jobs `request` matches: now
/// for a job the pass starts, its backfill reservation's start for a blocked
/// one that holds a reservation; other jobs have none.
pub async fn start_estimates(
    ctx: &ApiContext,
    user: &str,
    request: ListJobsRequest,
) -> Result<StartEstimatesReply, Status> {
    let filter = JobFilter::new(request)?;
    let permit = ctx.planning.admit(user).await;
    let now = clock::now();
    let replica = std::sync::Arc::clone(&ctx.replica);
    permit
        .plan_on_copy(replica, move |copy| {
            let (_, verdicts) = pass::run(&copy, now);
            let estimates = filter
                .matching(&copy)
                .filter_map(|job| {
                    let (start, nodes) = match verdicts.get(&job.id)? {
                        Verdict::Starts(nodes) => (now, nodes.clone()),
                        Verdict::Blocked {
                            reservation: Some(r),
                            ..
                        } => (r.start, r.nodes.clone()),
                        _ => return None,
                    };
                    Some(StartEstimate {
                        job_id: job.id.0,
                        start_ms: start.as_ms(),
                        nodes,
                    })
                })
                .collect();
            StartEstimatesReply { estimates }
        })
        .await
}
