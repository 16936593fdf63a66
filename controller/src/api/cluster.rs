//! Cluster calls: status (members, leader, term, indexes, lag), bootstrap,
//! membership changes, configuration changes, and who-am-I.

use std::collections::BTreeSet;
use std::time::Duration;

use corral_consensus::{MembershipError, ReplicaAddr};
use corral_proto::admin::AdminChange;
use corral_proto::api::{
    AdminRequest, BootstrapReply, ChangeMembershipRequest, ClusterStatusReply, Member, WhoAmIReply,
};
use corral_proto::records;
use corral_state::job::JobState;
use tonic::Status;

use super::caller::Caller;
use super::{ApiContext, status};
use crate::clock;

/// A learner this many entries behind the leader, or fewer, may become a voter.
const MAX_PROMOTION_LAG: u64 = 1_000;

/// How long a new learner may take to catch up before it is promoted.
const CATCH_UP_PATIENCE: Duration = Duration::from_secs(20);

/// How long bootstrap waits for the first leader.
const FIRST_LEADER_PATIENCE: Duration = Duration::from_secs(20);

/// How long a membership change waits for the previous one to commit.
const PREVIOUS_CHANGE_PATIENCE: Duration = Duration::from_secs(10);

/// `ClusterStatus`, as this replica sees it.
pub fn cluster_status(ctx: &ApiContext) -> Result<ClusterStatusReply, Status> {
    let metrics = ctx.replica.metrics();
    let leadership = ctx.replica.leadership().borrow().clone();
    let members = ctx
        .replica
        .members()
        .into_iter()
        .map(|m| Member {
            id: m.id,
            peer_addr: m.addr.peer,
            api_addr: m.addr.api,
            voter: m.voter,
            lag: if leadership.is_self {
                Some(metrics.follower_lag.get(&m.id).copied().unwrap_or(0))
            } else {
                None
            },
            clock_offset_ms: if m.id == ctx.replica.id() && leadership.is_self {
                Some(0)
            } else {
                ctx.clock_offsets.of(m.id)
            },
        })
        .collect();
    let (digest, pending, running, nodes, clock_ms) = ctx
        .replica
        .read_local(|s| {
            (
                s.digest().to_string(),
                s.queued_jobs()
                    .filter(|j| j.state == JobState::Pending)
                    .count() as u64,
                s.active_jobs().count() as u64,
                s.nodes().len() as u64,
                s.clock().as_ms(),
            )
        })
        .map_err(status::read)?;
    // A leader no quorum answers has stepped down (it may have been replaced
    // behind a partition): its leadership watch names no leader.
    let unconfirmed = *ctx.replica.leads_without_quorum().borrow();
    let leader = leadership.leader;
    Ok(ClusterStatusReply {
        cluster_name: ctx.config.cluster_name.clone(),
        this_id: ctx.replica.id(),
        leader_id: leader.as_ref().map(|(id, _)| *id),
        leader_api_addr: leader.map(|(_, addr)| addr.api).unwrap_or_default(),
        leadership_unconfirmed: unconfirmed,
        term: metrics.term,
        last_log_index: metrics.last_log_index,
        last_applied: metrics.last_applied,
        members,
        state_digest: digest,
        jobs_pending: pending,
        jobs_running: running,
        nodes,
        clock_ms,
    })
}

/// `Bootstrap`: initialize Raft with the configured replicas (once), wait for a
/// leader, and create the configured cluster definition when the state is empty.
pub async fn bootstrap(ctx: &ApiContext, caller: &Caller) -> Result<BootstrapReply, Status> {
    let by = caller.admin("bootstrapping the cluster")?;
    let fresh = ctx.replica.members().is_empty();
    if fresh {
        ctx.replica
            .initialize(ctx.config.members())
            .await
            .map_err(status::membership)?;
    }
    wait_for_leader(ctx).await?;
    let defined = ctx
        .replica
        .read_local(|s| !s.nodes().is_empty() || !s.partitions().is_empty())
        .map_err(status::read)?;
    if defined {
        return Ok(BootstrapReply {
            message: if fresh {
                "cluster initialized; its definition was already present".into()
            } else {
                format!(
                    "cluster '{}' was already initialized; nothing to do",
                    ctx.config.cluster_name
                )
            },
        });
    }
    let commands = ctx.config.cluster.bootstrap_commands(&by, clock::now());
    let count = commands.len();
    let results = ctx.propose(commands).await?;
    let refused: Vec<String> = results
        .into_iter()
        .filter_map(|r| r.err().map(|e| e.to_string()))
        .collect();
    if !refused.is_empty() {
        return Err(Status::failed_precondition(format!(
            "the cluster definition in {} was refused: {}; fix the file, wipe the data directories and bootstrap again",
            ctx.config.source.display(),
            refused.join("; ")
        )));
    }
    Ok(BootstrapReply {
        message: format!(
            "cluster '{}' initialized with replicas {}; {count} definition changes applied",
            ctx.config.cluster_name,
            ctx.config
                .replicas
                .iter()
                .map(|r| r.id.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

async fn wait_for_leader(ctx: &ApiContext) -> Result<(), Status> {
    let mut leadership = ctx.replica.leadership();
    let wait = leadership.wait_for(|l| l.leader.is_some());
    match tokio::time::timeout(FIRST_LEADER_PATIENCE, wait).await {
        Ok(Ok(_)) => Ok(()),
        _ => Err(Status::unavailable(format!(
            "no leader was elected within {} s; are a majority of the replicas in {} running?",
            FIRST_LEADER_PATIENCE.as_secs(),
            ctx.config.source.display()
        ))),
    }
}

/// `ChangeMembership`: add a replica as a learner, wait until it caught up, then
/// make it a voter; or remove one from the voters. Runs on the leader.
pub async fn change_membership(
    ctx: &ApiContext,
    caller: &Caller,
    request: ChangeMembershipRequest,
) -> Result<ClusterStatusReply, Status> {
    caller.admin("changing membership")?;
    let voters = voters_now(ctx);
    if request.add {
        if request.peer_addr.is_empty() || request.api_addr.is_empty() {
            return Err(Status::invalid_argument(
                "a new replica needs its peer and client API addresses (host:port)",
            ));
        }
        let addr = ReplicaAddr {
            peer: request.peer_addr,
            api: request.api_addr,
        };
        once_committed(|| ctx.replica.add_learner(request.id, addr.clone()))
            .await
            .map_err(status::membership)?;
        // Promote only a learner that has caught up: a voter that cannot be
        // reached would shrink the cluster's margin for failures.
        let deadline = tokio::time::Instant::now() + CATCH_UP_PATIENCE;
        let caught_up = loop {
            let lag = ctx.replica.follower_lag(request.id);
            if lag.is_some_and(|lag| lag <= MAX_PROMOTION_LAG) {
                break true;
            }
            if tokio::time::Instant::now() >= deadline {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if !caught_up {
            return Err(Status::failed_precondition(format!(
                "replica {} at {} was added as a learner but did not catch up within {} s (is it running, with this cluster's CA?); it was not made a voter; run this again once it runs",
                request.id,
                addr.peer,
                CATCH_UP_PATIENCE.as_secs()
            )));
        }
        // The voters as they are at each try: another change may have
        // committed meanwhile.
        once_committed(|| {
            let mut next = voters_now(ctx);
            next.insert(request.id);
            ctx.replica.change_voters(next, false)
        })
        .await
        .map_err(status::membership)?;
    } else {
        if !voters.contains(&request.id) {
            return Err(Status::not_found(format!(
                "replica {} is not a voter; `corral cluster` lists the members",
                request.id
            )));
        }
        if voters.len() == 1 {
            return Err(Status::failed_precondition(
                "the last voter cannot be removed",
            ));
        }
        once_committed(|| {
            let mut next = voters_now(ctx);
            next.remove(&request.id);
            ctx.replica.change_voters(next, false)
        })
        .await
        .map_err(status::membership)?;
    }
    cluster_status(ctx)
}

/// The voters in this replica's view now.
fn voters_now(ctx: &ApiContext) -> BTreeSet<u64> {
    ctx.replica
        .members()
        .into_iter()
        .filter(|m| m.voter)
        .map(|m| m.id)
        .collect()
}

/// Makes a membership change, again while the previous change is still
/// being committed: the leader commits it within a few heartbeats unless it
/// lost its quorum, which `PREVIOUS_CHANGE_PATIENCE` bounds.
async fn once_committed<F, Fut>(mut change: F) -> Result<(), MembershipError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), MembershipError>>,
{
    let deadline = tokio::time::Instant::now() + PREVIOUS_CHANGE_PATIENCE;
    loop {
        match change().await {
            Err(MembershipError::InProgress(_)) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

/// `Admin`: one configuration change, as the calling administrator.
pub async fn admin(ctx: &ApiContext, caller: &Caller, request: AdminRequest) -> Result<(), Status> {
    let by = caller.admin("changing the cluster configuration")?;
    let change: AdminChange = records::decode("admin change", &request.change_json)
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    let changes_nodes = ctx
        .replica
        .read_local(|s| super::node_set::changes_node_set(&change, |n| s.nodes().contains_key(n)))
        .map_err(super::status::read)?;
    if changes_nodes {
        super::node_set::change(ctx, change, by).await?;
    } else {
        ctx.propose_one(change.into_command(by, clock::now()))
            .await?;
    }
    ctx.wake_scheduler.notify_one();
    Ok(())
}

/// `WhoAmI`.
pub fn who_am_i(caller: &Caller) -> WhoAmIReply {
    WhoAmIReply {
        name: caller.identity.name.clone(),
        role: caller.identity.role.as_str().to_string(),
    }
}
