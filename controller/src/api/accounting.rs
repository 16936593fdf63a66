//! `Accounting`: job records that overlap a window (like sacct) and GPU-hours per
//! user and account within it, computed from the attempts' start and end times.

use std::collections::BTreeMap;
use std::ops::Bound;

use corral_proto::api::{AccountingReply, AccountingRequest, UsageRow};
use corral_state::ids::JobId;
use corral_state::job::Job;
use tonic::Status;

use super::caller::Caller;
use super::jobs::{LIST_PAGE_BYTES, encode_job};
use super::{ApiContext, status};

const MS_PER_HOUR: f64 = 3_600_000.0;

/// Handles one accounting query. Users see their own jobs unless they are
/// operators or admins.
pub fn query(
    ctx: &ApiContext,
    caller: &Caller,
    request: &AccountingRequest,
) -> Result<AccountingReply, Status> {
    ctx.replica
        .read_local(|state| {
            let now = state.clock().as_ms();
            let window_end = if request.end_ms == 0 {
                now
            } else {
                request.end_ms
            };
            let window = (request.start_ms, window_end);
            let keep = |job: &&Job| matches(request, caller, job) && overlaps(job, window, now);
            let mut usage: BTreeMap<(String, String), (f64, u32)> = BTreeMap::new();
            if !request.paged || request.after_job_id == 0 {
                for job in state.jobs().values().filter(keep) {
                    let gpu_ms = gpu_ms_within(job, window, now);
                    let row = usage
                        .entry((job.spec.user.clone(), job.account.clone()))
                        .or_default();
                    row.0 += gpu_ms as f64 / MS_PER_HOUR;
                    row.1 += 1;
                }
            }
            let first = if request.paged {
                Bound::Excluded(JobId(request.after_job_id))
            } else {
                Bound::Unbounded
            };
            let listed = state
                .jobs()
                .range((first, Bound::Unbounded))
                .map(|(_, job)| job)
                .filter(keep);
            let mut jobs = Vec::new();
            let (mut bytes, mut next_after_job_id) = (0, 0);
            let mut last = None;
            for job in listed {
                if request.paged && bytes >= LIST_PAGE_BYTES {
                    next_after_job_id = last.map_or(0, |id: JobId| id.0);
                    break;
                }
                let json = encode_job(job)?;
                bytes += json.len();
                jobs.push(json);
                last = Some(job.id);
            }
            Ok(AccountingReply {
                next_after_job_id,
                jobs_json: jobs,
                usage: usage
                    .into_iter()
                    .map(|((user, account), (gpu_hours, jobs))| UsageRow {
                        user,
                        account,
                        gpu_hours,
                        jobs,
                    })
                    .collect(),
                as_of_ms: now,
            })
        })
        .map_err(status::read)?
}

fn matches(request: &AccountingRequest, caller: &Caller, job: &Job) -> bool {
    caller.may_act_for(&job.spec.user)
        && (request.users.is_empty() || request.users.contains(&job.spec.user))
        && (request.accounts.is_empty() || request.accounts.contains(&job.account))
        && (request.job_ids.is_empty()
            || request.job_ids.contains(&job.id.0)
            || job
                .array
                .is_some_and(|a| request.job_ids.contains(&a.array_job_id.0)))
}

/// True when the job existed during the window: submitted before its end and not
/// finished before its start.
fn overlaps(job: &Job, (start, end): (u64, u64), now: u64) -> bool {
    let ended = job.ended_at.map_or(now, |t| t.as_ms());
    job.submitted_at.as_ms() <= end && ended >= start
}

/// GPU-milliseconds of the job's attempts inside the window.
fn gpu_ms_within(job: &Job, (start, end): (u64, u64), now: u64) -> u64 {
    job.attempts
        .iter()
        .map(|attempt| {
            let from = attempt.started_at.as_ms().max(start);
            let to = attempt.end.as_ref().map_or(now, |e| e.at.as_ms()).min(end);
            to.saturating_sub(from).saturating_mul(attempt.gpu_count())
        })
        .sum()
}
