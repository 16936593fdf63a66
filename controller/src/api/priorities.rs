//! `Priorities` (sprio) and `ShareTree` (sshare), read from this replica's
//! applied state with the scheduler's own priority and fair-share code, so
//! they show exactly what the next scheduling pass weighs: each pending job's
//! normalised factors with the configured weights (in pages of job ids), and
//! the account tree with shares, decayed usage and factors, each account
//! followed by its users. Anyone may read them, as in Slurm without
//! `PrivateData`.

use std::collections::BTreeSet;

use corral_proto::api::{
    JobPriority, PrioritiesReply, PrioritiesRequest, PriorityWeights, ShareRow, ShareTreeReply,
};
use corral_scheduler::fairshare::FairShare;
use corral_scheduler::priority::PriorityContext;
use corral_state::ids::JobId;
use corral_state::job::JobState;
use tonic::Status;

use super::{ApiContext, status};

/// Most jobs in one page of `Priorities` (about 100 bytes each).
const PAGE_JOBS: usize = 10_000;

/// Pending jobs' factors, after `request.after_job_id`, at most [`PAGE_JOBS`].
pub fn priorities(ctx: &ApiContext, request: PrioritiesRequest) -> Result<PrioritiesReply, Status> {
    let ids: BTreeSet<u64> = request.job_ids.iter().copied().collect();
    let users: BTreeSet<&str> = request.users.iter().map(String::as_str).collect();
    let partitions: BTreeSet<&str> = request.partitions.iter().map(String::as_str).collect();
    ctx.replica
        .read_local(|state| {
            let context = PriorityContext::new(state);
            let now = state.clock();
            let w = &state.config().priority;
            let mut jobs = Vec::new();
            let mut next_after_job_id = 0;
            let wanted = state
                .unfinished_jobs_after(JobId(request.after_job_id))
                .filter(|job| job.state == JobState::Pending)
                .filter(|job| ids.is_empty() || ids.contains(&job.id.0))
                .filter(|job| users.is_empty() || users.contains(job.spec.user.as_str()))
                .filter(|job| partitions.is_empty() || partitions.contains(job.partition.as_str()));
            for job in wanted {
                if jobs.len() == PAGE_JOBS {
                    next_after_job_id = jobs.last().map_or(0, |j: &JobPriority| j.job_id);
                    break;
                }
                let f = context.factors(state, job, now);
                jobs.push(JobPriority {
                    job_id: job.id.0,
                    user: job.spec.user.clone(),
                    partition: job.partition.clone(),
                    account: job.account.clone(),
                    age: f.age,
                    fairshare: f.fairshare,
                    job_size: f.job_size,
                    partition_factor: f.partition,
                    qos: f.qos,
                    nice: job.spec.nice,
                    priority: context.priority(state, job, now),
                });
            }
            PrioritiesReply {
                weights: Some(PriorityWeights {
                    age: w.age,
                    fairshare: w.fairshare,
                    job_size: w.job_size,
                    partition: w.partition,
                    qos: w.qos,
                }),
                jobs,
                next_after_job_id,
            }
        })
        .map_err(status::read)
}

/// The fair-share tree, each account followed by its users (usage in GPU-seconds).
pub fn share_tree(ctx: &ApiContext) -> Result<ShareTreeReply, Status> {
    ctx.replica
        .read_local(|state| {
            let fair = FairShare::compute(state);
            let accounting = state.accounting();
            let total_ms = fair
                .tree()
                .first()
                .map_or(0.0, |root| root.raw_usage_gpu_ms);
            let mut rows = Vec::new();
            for account in fair.tree() {
                rows.push(ShareRow {
                    account: account.account.clone(),
                    user: String::new(),
                    depth: account.depth,
                    raw_shares: account.raw_shares,
                    norm_shares: account.norm_shares,
                    raw_usage: account.raw_usage_gpu_ms / 1000.0,
                    effective_usage: account.effective_usage,
                    fairshare: account.factor,
                });
                let members = state
                    .users()
                    .values()
                    .filter(|u| u.accounts.contains(&account.account));
                for user in members {
                    let used_ms = accounting
                        .by_user
                        .get(&user.name)
                        .map_or(0.0, |u| u.decayed_gpu_ms as f64);
                    rows.push(ShareRow {
                        account: account.account.clone(),
                        user: user.name.clone(),
                        depth: account.depth + 1,
                        raw_shares: 0,
                        norm_shares: account.norm_shares,
                        raw_usage: used_ms / 1000.0,
                        effective_usage: if total_ms > 0.0 {
                            used_ms / total_ms
                        } else {
                            0.0
                        },
                        fairshare: account.factor,
                    });
                }
            }
            ShareTreeReply { rows }
        })
        .map_err(status::read)
}
