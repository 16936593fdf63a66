//! `corral wait N...`: follows the jobs through the watch stream until each has
//! ended, printing state changes; the exit status says whether all completed.

use std::collections::BTreeMap;
use std::process::ExitCode;

use corral_proto::api::ListJobsRequest;
use corral_proto::records;
use corral_state::job::{Job, JobState};
use tokio_stream::StreamExt;

use crate::connection::{Cluster, Retry};
use crate::exit;

/// Waits.
pub async fn run(
    cluster: &Cluster,
    jobs: &[u64],
    quiet: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let jobs = resolve(cluster, jobs).await?;
    let last = until_all_ended(cluster, &jobs, |job| {
        if !quiet && !json {
            println!("job {}: {}", job.id, job.state.slurm_name());
        }
    })
    .await?;
    finish(&last, &jobs, json)
}

/// The jobs `ids` name (an array's id stands for all its tasks); refuses an
/// unknown id.
pub async fn resolve(cluster: &Cluster, ids: &[u64]) -> anyhow::Result<Vec<u64>> {
    let (known, _) = super::queue::list_jobs(
        cluster,
        ListJobsRequest {
            job_ids: ids.to_vec(),
            all: true,
            ..ListJobsRequest::default()
        },
    )
    .await?;
    let found: Vec<u64> = known.iter().map(|j| j.id.0).collect();
    if let Some(missing) = ids.iter().find(|id| !found.contains(id)) {
        anyhow::bail!("unknown job {missing}; `corral queue` lists current jobs");
    }
    Ok(found)
}

/// Follows `jobs` through the watch stream until every one has ended, calling
/// `changed` on each state change; the stream is reopened (on any
/// controller) when its controller stops. Returns their last records.
pub async fn until_all_ended(
    cluster: &Cluster,
    jobs: &[u64],
    mut changed: impl FnMut(&Job),
) -> anyhow::Result<BTreeMap<u64, Job>> {
    let mut last: BTreeMap<u64, Job> = BTreeMap::new();
    loop {
        let mut stream = watch(cluster, jobs).await?;
        while let Some(event) = stream.next().await {
            let Ok(event) = event else { break };
            let job: Job = records::decode("job", &event.job_json)?;
            if last.get(&job.id.0).is_none_or(|old| old.state != job.state) {
                changed(&job);
            }
            last.insert(job.id.0, job);
            let all_ended = jobs
                .iter()
                .all(|id| last.get(id).is_some_and(|j| j.state.is_terminal()));
            if all_ended {
                return Ok(last);
            }
        }
        tokio::time::sleep(REOPEN_PAUSE).await;
    }
}

fn finish(last: &BTreeMap<u64, Job>, jobs: &[u64], json: bool) -> anyhow::Result<ExitCode> {
    let states: BTreeMap<u64, &str> = jobs
        .iter()
        .filter_map(|id| last.get(id).map(|j| (*id, j.state.slurm_name())))
        .collect();
    if json {
        super::print_json(&states)?;
    }
    let all_completed = jobs
        .iter()
        .all(|id| last.get(id).is_some_and(|j| j.state == JobState::Completed));
    Ok(if all_completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::JOB_FAILED)
    })
}

/// Follows job `id` until its record satisfies `done` (or it ends: the caller
/// looks at its state), through the watch stream, which starts with the
/// current record and is reopened on another controller when its own stops.
pub async fn until(cluster: &Cluster, id: u64, done: impl Fn(&Job) -> bool) -> anyhow::Result<Job> {
    loop {
        let mut stream = watch(cluster, &[id]).await?;
        while let Some(event) = stream.next().await {
            let Ok(event) = event else { break };
            let job: Job = records::decode("job", &event.job_json)?;
            if job.id.0 == id && (done(&job) || job.state.is_terminal()) {
                return Ok(job);
            }
        }
        // The stream ended (its controller stopped): a moment before the next.
        tokio::time::sleep(REOPEN_PAUSE).await;
    }
}

/// How long [`until`] waits before opening a watch again.
const REOPEN_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);

/// A watch of `jobs`, finished ones included, on any controller: every
/// record first, then each change.
async fn watch(
    cluster: &Cluster,
    jobs: &[u64],
) -> anyhow::Result<tonic::Streaming<corral_proto::api::JobEvent>> {
    let request = ListJobsRequest {
        job_ids: jobs.to_vec(),
        all: true,
        ..ListJobsRequest::default()
    };
    cluster
        .call(Retry::Idempotent, |mut c| {
            let request = request.clone();
            async move { c.watch_jobs(request).await }
        })
        .await
}
