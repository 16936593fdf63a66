//! `Accounting`: job records that overlap a window (like sacct) and GPU-hours per
//! user and account within it, computed from the attempts' start and end times.

use std::collections::BTreeMap;

use corral_proto::api::{AccountingReply, AccountingRequest, UsageRow};
use corral_state::job::Job;
use tonic::Status;

use super::caller::Caller;
use super::jobs::encode_job;
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
            let mut usage: BTreeMap<(String, String), (f64, u32)> = BTreeMap::new();
            let mut jobs = Vec::new();
            for job in state.jobs().values() {
                if !matches(request, caller, job) || !overlaps(job, window, now) {
                    continue;
                }
                let gpu_ms = gpu_ms_within(job, window, now);
                let row = usage
                    .entry((job.spec.user.clone(), job.account.clone()))
                    .or_default();
                row.0 += gpu_ms as f64 / MS_PER_HOUR;
                row.1 += 1;
                jobs.push(encode_job(job)?);
            }
            Ok(AccountingReply {
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
