//! `SignalJobs` (`scancel --signal`): the leader reads the targets' live
//! attempts (a linearizable read, so a follower answers with the leader's
//! address, which clients follow) and hands the signal to the session of each
//! node of the scope. Nothing goes through Raft: like Slurm's, a signal is an
//! instantaneous act, not state. The reply says which nodes it reached.

use std::time::Duration;

use corral_proto::agent::{ControllerMessage, SignalScope};
use corral_proto::api::{self, SignalJobsReply, SignalJobsRequest, SignalledJob};
use corral_state::slurm::signal::{Signal, parse_signal};
use tokio::task::JoinSet;
use tonic::Status;

use super::caller::Caller;
use super::signal_targets::{Delivery, deliveries};
use super::{ApiContext, job_target, status};
use crate::agent_gateway::registry::AgentSessions;

/// How long one node's session may take to write the signal to its agent.
const RELAY_PATIENCE: Duration = Duration::from_secs(5);

/// Signals the targets' processes; each target is answered separately, as in
/// `cancel`.
pub async fn signal(
    ctx: &ApiContext,
    caller: &Caller,
    request: SignalJobsRequest,
) -> Result<SignalJobsReply, Status> {
    let actor = caller.actor()?;
    let signal = parse_signal(request.signal.trim())
        .map_err(|e| Status::invalid_argument(format!("--signal: {e}")))?;
    let scope = scope_of(request.scope)?;
    let (targets, mut errors) = job_target::parse_all(&request.jobs, &request.user);
    if targets.is_empty() && errors.is_empty() {
        return Err(Status::invalid_argument(
            "name the jobs to signal (ids; 123_4 for an array task) or a user with -u",
        ));
    }
    let planned = ctx
        .replica
        .read(|state| {
            targets
                .iter()
                .map(|(text, target)| (text.clone(), deliveries(state, &actor, target, scope)))
                .collect::<Vec<_>>()
        })
        .await
        .map_err(status::read)?;
    let mut seen = std::collections::BTreeSet::new();
    let mut jobs: Vec<(String, Delivery)> = Vec::new();
    for (text, found) in planned {
        match found {
            Ok(found) => jobs.extend(
                found
                    .into_iter()
                    .filter(|d| seen.insert(d.job))
                    .map(|d| (text.clone(), d)),
            ),
            Err(e) => errors.push(format!("{text}: {e}")),
        }
    }
    let mut signalled = Vec::new();
    for ((text, delivery), outcome) in jobs
        .iter()
        .zip(relay_all(&ctx.agents, &jobs, signal, scope).await)
    {
        tracing::info!(
            job = %delivery.job,
            attempt = delivery.attempt,
            signal = %signal.name(),
            ?scope,
            by = %actor.user,
            reached = ?outcome.reached,
            unreached = ?outcome.unreached,
            "signal relayed to the job's agents"
        );
        if outcome.reached.is_empty() {
            errors.push(format!(
                "{text}: job {}: the signal reached none of its nodes ({}); retry once their agents are connected (`corral nodes`)",
                delivery.job,
                outcome.unreached.join("; ")
            ));
        } else {
            signalled.push(SignalledJob {
                job_id: delivery.job.0,
                attempt: delivery.attempt,
                reached: outcome.reached,
                unreached: outcome.unreached,
            });
        }
    }
    Ok(SignalJobsReply {
        signal: signal.name(),
        signalled,
        errors,
    })
}

/// The agent-channel scope of a request's scope.
fn scope_of(scope: i32) -> Result<SignalScope, Status> {
    match api::SignalScope::try_from(scope) {
        Ok(api::SignalScope::Steps) => Ok(SignalScope::Steps),
        Ok(api::SignalScope::Batch) => Ok(SignalScope::Batch),
        Ok(api::SignalScope::Full) => Ok(SignalScope::Full),
        _ => Err(Status::invalid_argument(
            "say which processes to signal: the steps' tasks (the default of scancel -s), \
             the batch shell (--batch) or both (--full)",
        )),
    }
}

/// Which nodes of one delivery the signal reached, and why not the others.
#[derive(Debug, Default)]
struct Reach {
    reached: Vec<String>,
    unreached: Vec<String>,
}

/// Relays the signal to every node of every delivery at once; one `Reach` per
/// delivery, in order, nodes in allocation order.
async fn relay_all(
    agents: &AgentSessions,
    jobs: &[(String, Delivery)],
    signal: Signal,
    scope: SignalScope,
) -> Vec<Reach> {
    let mut relays = JoinSet::new();
    for (index, (_, delivery)) in jobs.iter().enumerate() {
        for (position, node) in delivery.nodes.iter().enumerate() {
            let agents = agents.clone();
            let node = node.clone();
            let message = ControllerMessage::Signal {
                job: delivery.job,
                attempt: delivery.attempt,
                signal,
                scope,
            };
            relays.spawn(async move {
                let result = agents.relay(&node, message, RELAY_PATIENCE).await;
                (index, position, node, result)
            });
        }
    }
    let mut results = Vec::new();
    while let Some(joined) = relays.join_next().await {
        match joined {
            Ok(result) => results.push(result),
            Err(e) => tracing::error!("a signal relay task failed: {e}"),
        }
    }
    results.sort_by_key(|(index, position, _, _)| (*index, *position));
    let mut reach: Vec<Reach> = jobs.iter().map(|_| Reach::default()).collect();
    for (index, _, node, result) in results {
        let Some(entry) = reach.get_mut(index) else {
            continue;
        };
        match result {
            Ok(()) => entry.reached.push(node),
            Err(why) => entry.unreached.push(format!("{node}: {why}")),
        }
    }
    reach
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::ids::JobId;

    #[test]
    fn a_request_must_say_which_processes() {
        assert_eq!(
            scope_of(api::SignalScope::Batch as i32).unwrap(),
            SignalScope::Batch
        );
        assert_eq!(
            scope_of(api::SignalScope::Steps as i32).unwrap(),
            SignalScope::Steps
        );
        assert!(scope_of(api::SignalScope::Unspecified as i32).is_err());
        assert!(scope_of(42).is_err());
    }

    #[tokio::test]
    async fn each_job_hears_which_of_its_nodes_the_signal_reached() {
        let agents = AgentSessions::default();
        let (_registration, mut rx) = agents.register("n1");
        let session = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(relay) = rx.recv().await {
                got.push(relay.message);
                let _ = relay.written.send(Ok(()));
                if got.len() == 2 {
                    break;
                }
            }
            got
        });
        let jobs = vec![
            (
                "1".to_string(),
                Delivery {
                    job: JobId(1),
                    attempt: 2,
                    nodes: vec!["n1".into(), "n2".into()],
                },
            ),
            (
                "3".to_string(),
                Delivery {
                    job: JobId(3),
                    attempt: 1,
                    nodes: vec!["n1".into()],
                },
            ),
        ];
        let reach = relay_all(&agents, &jobs, Signal::USR1, SignalScope::Full).await;
        assert_eq!(reach[0].reached, vec!["n1".to_string()]);
        assert_eq!(
            reach[0].unreached,
            vec!["n2: no agent is connected".to_string()]
        );
        assert_eq!(reach[1].reached, vec!["n1".to_string()]);
        assert!(reach[1].unreached.is_empty());
        let got = session.await.unwrap();
        assert!(got.contains(&ControllerMessage::Signal {
            job: JobId(1),
            attempt: 2,
            signal: Signal::USR1,
            scope: SignalScope::Full,
        }));
    }
}
