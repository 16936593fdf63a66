//! `WatchJobs`: a server stream of job records as they change. It first sends
//! every matching job, then, each time this replica applies new entries, the jobs
//! whose state, reason, attempts or checkpoint changed. It compares only the
//! jobs the state's journal names as changed since its last look (see
//! `corral_state::job_table`), not every job: a thousand watches of a queue
//! of 100,000 jobs cost what the changes cost. Jobs that finish stay in
//! the watch until the stream ends: when the client goes away or this controller
//! stops (clients then reopen it on another controller).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use corral_proto::api::{JobEvent, ListJobsRequest};
use corral_state::ids::JobId;
use corral_state::job::{Job, JobState, PendingReason};
use corral_state::job_table::JobChanges;
use tokio::sync::mpsc;
use tonic::Status;

use super::ApiContext;
use super::jobs::{JobFilter, encode_job};

/// How often the stream looks for newly applied entries.
const POLL: Duration = Duration::from_millis(100);

/// What a watcher is told about when it changes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    state: JobState,
    reason: PendingReason,
    attempts: usize,
    started_on: usize,
    checkpoint_step: Option<u64>,
    ended: bool,
}

fn fingerprint(job: &Job) -> Fingerprint {
    Fingerprint {
        state: job.state,
        reason: job.reason,
        attempts: job.attempts.len(),
        started_on: job.current_attempt().map_or(0, |a| a.started_on.len()),
        checkpoint_step: job.last_checkpoint.as_ref().map(|c| c.step),
        ended: job.current_attempt().is_some_and(|a| a.end.is_some()),
    }
}

/// Starts the stream's task; the receiver is the stream.
pub fn start(
    ctx: Arc<ApiContext>,
    request: ListJobsRequest,
) -> Result<mpsc::Receiver<Result<JobEvent, Status>>, Status> {
    // Checked once: a bad state name fails the call, not the stream.
    let filter = JobFilter::new(request)?;
    let (tx, rx) = mpsc::channel(256);
    let mut stopping = ctx.stopping.clone();
    tokio::spawn(async move {
        let mut seen: BTreeMap<JobId, Fingerprint> = BTreeMap::new();
        let mut position: Option<u64> = None;
        let mut applied = None;
        loop {
            let now_applied = ctx.replica.last_applied();
            if applied.is_none() || now_applied != applied {
                applied = now_applied;
                let changed = ctx.replica.read_local(|state| {
                    // Only the jobs changed since the last look, from the
                    // state's journal; every matching job on the first look
                    // and when the journal no longer reaches back that far.
                    let candidates: BTreeSet<JobId> =
                        match position.map(|p| state.jobs_changed_since(p)) {
                            Some(JobChanges::Since(changed)) => changed,
                            _ => filter
                                .matching(state)
                                .map(|j| j.id)
                                .chain(seen.keys().copied())
                                .collect(),
                        };
                    position = Some(state.job_journal_position());
                    let mut changed = Vec::new();
                    for id in candidates {
                        let Some(job) = state.job(id).filter(|j| filter.accepts(j)) else {
                            continue;
                        };
                        let print = fingerprint(job);
                        if seen.get(&id) != Some(&print) {
                            seen.insert(id, print);
                            changed.push(encode_job(job).map(|json| JobEvent {
                                job_json: json,
                                as_of_ms: state.clock().as_ms(),
                            }));
                        }
                    }
                    changed
                });
                let events = match changed {
                    Ok(events) => events,
                    Err(e) => vec![Err(super::status::read(e))],
                };
                for event in events {
                    tokio::select! {
                        sent = tx.send(event) => if sent.is_err() { return },
                        _ = stopping.wait_for(|stop| *stop) => return,
                    }
                }
            }
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                () = tx.closed() => return,
                _ = stopping.wait_for(|stop| *stop) => return,
            }
        }
    });
    Ok(rx)
}
