//! Where `scancel --signal` goes, from the state alone: the running jobs a target
//! names (a job, the running tasks of an array, one task, a user's running
//! jobs), each job's live attempt, and the nodes of the scope (the batch host for
//! the batch shell; every node of the allocation for the steps' tasks). Pure.

use corral_proto::agent::SignalScope;
use corral_state::ClusterState;
use corral_state::command::CancelTarget;
use corral_state::ids::{Actor, AttemptNumber, JobId};
use corral_state::job::{Job, JobState};
use corral_state::rejection::Rejection;

/// One job's live attempt and the nodes whose agents must be handed the signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The job.
    pub job: JobId,
    /// Its running attempt.
    pub attempt: AttemptNumber,
    /// Batch host first, as in the allocation.
    pub nodes: Vec<String>,
}

/// The deliveries `target` names for `by`, or why there are none.
pub fn deliveries(
    state: &ClusterState,
    by: &Actor,
    target: &CancelTarget,
    scope: SignalScope,
) -> Result<Vec<Delivery>, String> {
    match target {
        CancelTarget::Job(id) => {
            let job = state
                .job(*id)
                .ok_or_else(|| Rejection::UnknownJob(*id).to_string())?;
            may_signal(job, by)?;
            if job.array.is_some_and(|a| a.array_job_id == *id) {
                let running: Vec<Delivery> = array_tasks(state, *id)
                    .filter_map(|task| delivery(task, scope))
                    .collect();
                if running.is_empty() {
                    return Err(format!(
                        "job array {id} has no running task; only a running job's processes can be signalled"
                    ));
                }
                Ok(running)
            } else {
                one(job, scope)
            }
        }
        CancelTarget::ArrayTask {
            array_job_id,
            task_id,
        } => {
            let job = array_tasks(state, *array_job_id)
                .find(|j| j.array.is_some_and(|a| a.task_id == *task_id))
                .ok_or_else(|| format!("job array {array_job_id} has no task {task_id}"))?;
            may_signal(job, by)?;
            one(job, scope)
        }
        CancelTarget::User(user) => {
            if *user != by.user && !by.is_operator() {
                return Err(format!(
                    "user '{}' may not signal the jobs of user '{user}'; only operators may",
                    by.user
                ));
            }
            let mut running: Vec<&Job> = state
                .active_jobs()
                .filter(|j| j.spec.user == *user)
                .collect();
            running.sort_by_key(|j| j.id);
            let running: Vec<Delivery> = running
                .into_iter()
                .filter_map(|j| delivery(j, scope))
                .collect();
            if running.is_empty() {
                return Err(format!(
                    "user '{user}' has no running job; only a running job's processes can be signalled"
                ));
            }
            Ok(running)
        }
    }
}

fn may_signal(job: &Job, by: &Actor) -> Result<(), String> {
    if job.spec.user == by.user || by.is_operator() {
        Ok(())
    } else {
        Err(format!(
            "user '{}' may not signal job {} of user '{}'; only its owner or an operator may",
            by.user, job.id, job.spec.user
        ))
    }
}

fn one(job: &Job, scope: SignalScope) -> Result<Vec<Delivery>, String> {
    delivery(job, scope).map(|d| vec![d]).ok_or_else(|| {
        format!(
            "job {} is {}; only a running job's processes can be signalled",
            job.id,
            job.state.slurm_name()
        )
    })
}

/// The delivery for a running job; `None` for any other.
fn delivery(job: &Job, scope: SignalScope) -> Option<Delivery> {
    if job.state != JobState::Running {
        return None;
    }
    let attempt = job.live_attempt().filter(|a| a.ending.is_none())?;
    let nodes = if scope.includes_steps() {
        attempt.allocation.iter().map(|a| a.node.clone()).collect()
    } else {
        attempt.batch_host().map(String::from).into_iter().collect()
    };
    Some(Delivery {
        job: job.id,
        attempt: attempt.number,
        nodes,
    })
}

fn array_tasks(state: &ClusterState, array_job_id: JobId) -> impl Iterator<Item = &Job> {
    state
        .jobs()
        .range(array_job_id..)
        .map(|(_, j)| j)
        .take_while(move |j| j.array.is_some_and(|a| a.array_job_id == array_job_id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::command::Command;
    use corral_state::slurm::array::ArraySpec;
    use corral_state::testkit::{admin, at, cluster, ok, spec, start, submit, user};

    fn job(id: JobId) -> CancelTarget {
        CancelTarget::Job(id)
    }

    #[test]
    fn the_batch_shell_is_on_the_batch_host_and_the_steps_on_every_node() {
        let mut s = cluster(3, 8);
        let id = submit(&mut s, spec("alice", 2, 8), at(1));
        let nodes = start(&mut s, id, at(2));
        let alice = user("alice");
        let batch = deliveries(&s, &alice, &job(id), SignalScope::Batch).unwrap();
        assert_eq!(
            batch,
            vec![Delivery {
                job: id,
                attempt: 1,
                nodes: vec![nodes[0].clone()],
            }]
        );
        for scope in [SignalScope::Steps, SignalScope::Full] {
            let all = deliveries(&s, &alice, &job(id), scope).unwrap();
            assert_eq!(all[0].nodes, nodes);
        }
    }

    #[test]
    fn only_running_jobs_of_ones_own_can_be_signalled() {
        let mut s = cluster(1, 8);
        let running = submit(&mut s, spec("alice", 1, 8), at(1));
        start(&mut s, running, at(2));
        let pending = submit(&mut s, spec("alice", 1, 8), at(3));
        let alice = user("alice");
        let err = deliveries(&s, &alice, &job(pending), SignalScope::Full).unwrap_err();
        assert_eq!(
            err,
            format!("job {pending} is PENDING; only a running job's processes can be signalled")
        );
        let err = deliveries(&s, &user("bob"), &job(running), SignalScope::Full).unwrap_err();
        assert!(err.contains("may not signal job"), "{err}");
        assert!(deliveries(&s, &admin(), &job(running), SignalScope::Full).is_ok());
        let err = deliveries(&s, &alice, &job(JobId(99)), SignalScope::Full).unwrap_err();
        assert!(err.contains("unknown job 99"), "{err}");
        let err = deliveries(
            &s,
            &user("bob"),
            &CancelTarget::User("alice".into()),
            SignalScope::Full,
        )
        .unwrap_err();
        assert!(err.contains("only operators"), "{err}");
        let mine = deliveries(
            &s,
            &alice,
            &CancelTarget::User("alice".into()),
            SignalScope::Full,
        )
        .unwrap();
        assert_eq!(mine.len(), 1, "the pending job is not signalled");
        assert_eq!(mine[0].job, running);
    }

    #[test]
    fn an_arrays_id_names_its_running_tasks() {
        let mut s = cluster(1, 8);
        let mut request = spec("alice", 1, 8);
        request.array = Some(ArraySpec {
            indices: vec![0, 1],
            throttle: None,
        });
        let first = submit(&mut s, request, at(1));
        let alice = user("alice");
        let err = deliveries(&s, &alice, &job(first), SignalScope::Batch).unwrap_err();
        assert!(err.contains("no running task"), "{err}");
        start(&mut s, first, at(2));
        let tasks = deliveries(&s, &alice, &job(first), SignalScope::Batch).unwrap();
        assert_eq!(tasks.len(), 1);
        let second = CancelTarget::ArrayTask {
            array_job_id: first,
            task_id: 1,
        };
        let err = deliveries(&s, &alice, &second, SignalScope::Batch).unwrap_err();
        assert!(err.contains("PENDING"), "{err}");
        let missing = CancelTarget::ArrayTask {
            array_job_id: first,
            task_id: 7,
        };
        let err = deliveries(&s, &alice, &missing, SignalScope::Batch).unwrap_err();
        assert!(err.contains("has no task 7"), "{err}");
    }

    #[test]
    fn an_ending_job_is_not_signalled() {
        let mut s = cluster(1, 8);
        let id = submit(&mut s, spec("alice", 1, 8), at(1));
        start(&mut s, id, at(2));
        ok(
            &mut s,
            Command::Cancel {
                target: job(id),
                by: user("alice"),
                at: at(3),
            },
        );
        let err = deliveries(&s, &user("alice"), &job(id), SignalScope::Full).unwrap_err();
        assert!(err.contains("COMPLETING"), "{err}");
    }
}
