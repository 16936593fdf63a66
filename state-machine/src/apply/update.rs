//! `UpdateJob` (`scontrol update JobId=N ...`): a pending job takes the changed
//! spec only if the whole spec still resolves against the cluster, exactly as a
//! submission would; a running job may change its name, comment and time limit
//! (lengthening it takes an operator, as in Slurm). A refused update changes
//! nothing.

use super::submit::{Resolved, check_spec, resolve};
use super::{job_of, require_owner_or_operator};
use crate::command::Outcome;
use crate::ids::{Actor, JobId};
use crate::job::{JobState, PendingReason};
use crate::job_update::JobUpdate;
use crate::rejection::Rejection;
use crate::slurm::duration::{TimeLimit, format_time_limit};
use crate::state::ClusterState;

pub(super) fn update_job(
    state: &mut ClusterState,
    id: JobId,
    update: JobUpdate,
    by: &Actor,
) -> Result<Outcome, Rejection> {
    let job = job_of(state, id)?;
    require_owner_or_operator(job, by, "update")?;
    if update.is_empty() {
        return Err(Rejection::InvalidRequest(
            "nothing to change: give at least one field, e.g. TimeLimit=1:00:00".into(),
        ));
    }
    if update
        .dependency
        .as_ref()
        .and_then(Option::as_ref)
        .is_some_and(|d| d.conditions.iter().any(|c| c.job_id == id.0))
    {
        return Err(Rejection::InvalidRequest(format!(
            "job {id} cannot depend on itself"
        )));
    }
    let mut spec = job.spec.clone();
    apply_fields(&mut spec, &update);
    check_spec(&spec, by)?;
    match job.state {
        JobState::Pending | JobState::RequeueHold => {
            let Resolved {
                account,
                partition,
                qos,
                time_limit,
                resources,
            } = resolve(state, &spec)?;
            let Some(job) = state.jobs.get_mut(&id) else {
                return Err(Rejection::UnknownJob(id));
            };
            if update.dependency.is_some() && job.hold.is_none() {
                job.reason = if spec.dependency.is_some() {
                    PendingReason::Dependency
                } else {
                    PendingReason::None
                };
            }
            let before = std::mem::replace(&mut job.account, account);
            state
                .unfinished_index
                .moved(id, &spec.user, &before, &job.account);
            job.spec = spec;
            job.partition = partition;
            job.qos = qos;
            job.time_limit = time_limit;
            job.resources = resources;
        }
        JobState::Running => {
            if !update.running_job_may_take() {
                return Err(Rejection::WrongJobState {
                    job: id,
                    state: job.state.slurm_name().into(),
                    action: "change this field of".into(),
                    needed:
                        "PENDING (a running job may change only JobName, Comment and TimeLimit)"
                            .into(),
                });
            }
            let time_limit = match update.time_limit {
                Some(limit) => running_time_limit(job.time_limit, limit, by)?,
                None => job.time_limit,
            };
            let Some(job) = state.jobs.get_mut(&id) else {
                return Err(Rejection::UnknownJob(id));
            };
            job.spec = spec;
            job.time_limit = time_limit;
        }
        _ => {
            return Err(Rejection::WrongJobState {
                job: id,
                state: job.state.slurm_name().into(),
                action: "update".into(),
                needed: "PENDING, REQUEUE_HOLD or RUNNING".into(),
            });
        }
    }
    Ok(Outcome::Jobs(vec![id]))
}

/// The spec with the update's fields set.
fn apply_fields(spec: &mut crate::job::JobSpec, update: &JobUpdate) {
    let update = update.clone();
    if let Some(name) = update.name {
        spec.name = name;
    }
    if let Some(comment) = update.comment {
        spec.comment = Some(comment);
    }
    if let Some(limit) = update.time_limit {
        spec.time_limit = Some(limit);
    }
    if let Some(partition) = update.partition {
        spec.partition = Some(partition);
    }
    if let Some(account) = update.account {
        spec.account = Some(account);
    }
    if let Some(qos) = update.qos {
        spec.qos = Some(qos);
    }
    if let Some(nice) = update.nice {
        spec.nice = nice;
    }
    if let Some(dependency) = update.dependency {
        spec.dependency = dependency;
    }
    if let Some(nodes) = update.nodes {
        spec.nodes = nodes;
    }
    if let Some(features) = update.features {
        spec.features = features;
    }
    if let Some(excluded) = update.excluded_nodes {
        spec.excluded_nodes = excluded;
    }
    if let Some(begin) = update.begin_time {
        spec.begin_time = Some(begin);
    }
}

/// A running job's new time limit: anyone who may update it may shorten it;
/// only an operator may lengthen it.
fn running_time_limit(
    current: TimeLimit,
    wanted: TimeLimit,
    by: &Actor,
) -> Result<TimeLimit, Rejection> {
    if wanted == TimeLimit::Seconds(0) {
        return Err(Rejection::InvalidRequest(
            "a time limit of zero seconds is not valid; cancel the job instead".into(),
        ));
    }
    if wanted > current && !by.is_operator() {
        return Err(Rejection::PermissionDenied(format!(
            "only an operator may lengthen a running job's time limit (from {} to {}); you may shorten it",
            format_time_limit(current),
            format_time_limit(wanted)
        )));
    }
    Ok(wanted)
}

#[cfg(test)]
mod tests {
    use crate::command::Command;
    use crate::job::JobState;
    use crate::job_update::JobUpdate;
    use crate::rejection::Rejection;
    use crate::slurm::duration::TimeLimit;
    use crate::testkit::{admin, at, cluster, spec, start, submit, user};
    use crate::{ClusterState, JobId};

    fn update(
        state: &mut ClusterState,
        job: JobId,
        update: JobUpdate,
        by: &str,
    ) -> Result<(), Rejection> {
        let by = if by == "root" { admin() } else { user(by) };
        state
            .apply(Command::UpdateJob {
                job,
                update,
                by,
                at: at(5),
            })
            .map(|_| ())
    }

    #[test]
    fn a_pending_job_takes_a_change_that_still_resolves_and_refuses_one_that_does_not() {
        let mut s = cluster(2, 8);
        let id = submit(&mut s, spec("alice", 1, 8), at(1));
        let change = JobUpdate {
            name: Some("renamed".into()),
            time_limit: Some(TimeLimit::Seconds(600)),
            nodes: Some(2),
            ..JobUpdate::default()
        };
        update(&mut s, id, change, "alice").expect("accepted");
        let job = s.job(id).expect("job");
        assert_eq!(job.spec.name, "renamed");
        assert_eq!(job.time_limit, TimeLimit::Seconds(600));
        assert_eq!(job.resources.nodes, 2);

        let before = s.clone();
        let too_big = JobUpdate {
            nodes: Some(3),
            ..JobUpdate::default()
        };
        assert!(update(&mut s, id, too_big, "alice").is_err());
        let unknown = JobUpdate {
            partition: Some("nope".into()),
            ..JobUpdate::default()
        };
        assert!(matches!(
            update(&mut s, id, unknown, "alice"),
            Err(Rejection::UnknownPartition(_))
        ));
        assert_eq!(s, before, "a refused update changes nothing");
    }

    #[test]
    fn only_the_owner_or_an_operator_may_update_and_not_to_depend_on_itself() {
        let mut s = cluster(1, 8);
        let id = submit(&mut s, spec("alice", 1, 8), at(1));
        let rename = JobUpdate {
            name: Some("x".into()),
            ..JobUpdate::default()
        };
        assert!(matches!(
            update(&mut s, id, rename.clone(), "bob"),
            Err(Rejection::PermissionDenied(_))
        ));
        update(&mut s, id, rename, "root").expect("an admin may");
        let itself = crate::slurm::dependency::parse_dependency(&format!("afterok:{}", id.0))
            .expect("parses");
        let change = JobUpdate {
            dependency: Some(Some(itself)),
            ..JobUpdate::default()
        };
        assert!(update(&mut s, id, change, "alice").is_err());
        assert!(update(&mut s, id, JobUpdate::default(), "alice").is_err());
    }

    #[test]
    fn a_running_job_may_shorten_its_limit_but_only_an_operator_lengthens_it() {
        let mut s = cluster(1, 8);
        let mut request = spec("alice", 1, 8);
        request.time_limit = Some(TimeLimit::Seconds(3600));
        let id = submit(&mut s, request, at(1));
        start(&mut s, id, at(2));
        assert_eq!(s.job(id).map(|j| j.state), Some(JobState::Running));
        let limit = |secs| JobUpdate {
            time_limit: Some(TimeLimit::Seconds(secs)),
            ..JobUpdate::default()
        };
        update(&mut s, id, limit(1800), "alice").expect("shorter is fine");
        assert!(matches!(
            update(&mut s, id, limit(7200), "alice"),
            Err(Rejection::PermissionDenied(_))
        ));
        update(&mut s, id, limit(7200), "root").expect("an operator may lengthen");
        assert_eq!(
            s.job(id).map(|j| j.time_limit),
            Some(TimeLimit::Seconds(7200))
        );
        let move_it = JobUpdate {
            partition: Some("gpu".into()),
            ..JobUpdate::default()
        };
        assert!(matches!(
            update(&mut s, id, move_it, "alice"),
            Err(Rejection::WrongJobState { .. })
        ));
    }
}
