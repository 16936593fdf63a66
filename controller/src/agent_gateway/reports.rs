//! Agent reports into commands, and one session's report proposer: reports
//! are proposed in the order the agent sent them (an XID's report must commit
//! before the exit of the script it killed), as many at a time as have queued
//! (one entry keeps their order), on a task of their own, so that a slow
//! commit never holds up the session's heartbeats.

use std::sync::Arc;

use corral_consensus::{ProposeError, Replica};
use corral_proto::agent::AgentReport;
use corral_state::rejection::Rejection;
use corral_state::{Command, Outcome};
use tokio::sync::{Notify, mpsc};

use crate::clock;

/// Most reports proposed in one entry.
const MAX_REPORTS_PER_PROPOSAL: usize = 64;

/// What a proposal of a report's commands came back with.
pub(super) type Results = Result<Vec<Result<Outcome, Rejection>>, ProposeError>;

/// Proposes the reports of `node` from `reports` in order; answers each batch
/// on `settled` (the ids to acknowledge, or why the session must end).
pub(super) async fn propose_in_order(
    replica: Arc<Replica>,
    node: String,
    mut reports: mpsc::Receiver<(u64, AgentReport)>,
    settled: mpsc::Sender<Result<Vec<(u64, bool)>, String>>,
    wake_scheduler: Arc<Notify>,
    committed: Arc<Notify>,
) {
    while let Some(first) = reports.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_REPORTS_PER_PROPOSAL {
            match reports.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        // Each report's id with how many commands it became.
        let mut ids = Vec::with_capacity(batch.len());
        let mut commands = Vec::new();
        for (id, report) in batch {
            let recorded = commands_for(&node, report);
            ids.push((id, recorded.len()));
            commands.extend(recorded);
        }
        let answer = if commands.is_empty() {
            Ok(ids.iter().map(|(id, _)| (*id, true)).collect())
        } else {
            let answer = settle(&node, ids, replica.propose_all(commands).await);
            wake_scheduler.notify_one();
            committed.notify_waiters();
            answer
        };
        let failed = answer.is_err();
        if settled.send(answer).await.is_err() || failed {
            return;
        }
    }
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn truncate(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// Whether a batch of reports (`ids`, each with how many commands it became)
/// is settled once its proposal has an outcome: yes when it was committed, or
/// refused (stale, or too large ever to commit), so the agent may stop
/// resending them, each with whether every command of it committed; no when it
/// may not have been committed, which ends the session: the agent resends
/// reports only on a new connection.
pub(super) fn settle(
    node: &str,
    ids: Vec<(u64, usize)>,
    proposed: Results,
) -> Result<Vec<(u64, bool)>, String> {
    match proposed {
        Ok(results) => {
            for rejection in results.iter().filter_map(|r| r.as_ref().err()) {
                tracing::debug!(%node, "agent report refused: {rejection}");
            }
            let mut outcomes = results.iter().map(Result::is_ok);
            Ok(ids
                .into_iter()
                .map(|(id, commands)| {
                    // Every one of its commands is consumed, refused or not.
                    let refused = outcomes.by_ref().take(commands).filter(|ok| !ok).count();
                    let committed = refused == 0;
                    (id, committed)
                })
                .collect())
        }
        Err(ProposeError::NotLeader { .. }) => Err("leadership moved".into()),
        Err(e @ (ProposeError::TooLarge { .. } | ProposeError::Unencodable(_))) => {
            tracing::warn!(%node, "agent reports dropped: {e}");
            Ok(ids.into_iter().map(|(id, _)| (id, false)).collect())
        }
        Err(e) => Err(format!(
            "agent reports {ids:?} not committed ({e}); the agent resends them on its next connection"
        )),
    }
}

/// The commands that record a report (one entry, so they commit together).
pub(super) fn commands_for(node: &str, report: AgentReport) -> Vec<Command> {
    let at = clock::now();
    if let AgentReport::XidKilled {
        gpu,
        xid,
        attempts,
        reason,
    } = &report
    {
        tracing::warn!(%node, gpu, xid, ?attempts, "application XID, GPU kept in service: {reason}");
        // One per attempt the agent killed; the state machine refuses those that
        // are no longer the jobs' running attempts.
        return attempts
            .iter()
            .map(|(job, attempt)| Command::ApplicationXid {
                job: *job,
                attempt: *attempt,
                node: node.to_string(),
                gpu: *gpu,
                xid: *xid,
                at,
            })
            .collect();
    }
    if let AgentReport::Unkillable {
        job,
        attempt,
        pids,
        after_s,
    } = &report
    {
        let listed: Vec<String> = pids.iter().map(i32::to_string).collect();
        let reason = format!(
            "job {job} attempt {attempt}: processes {} survived SIGKILL for {after_s} s (unkillable); resume the node once they are gone",
            listed.join(",")
        );
        tracing::error!(%node, "{reason}");
        return vec![
            Command::DrainNode {
                node: node.to_string(),
                reason: truncate(&reason, 1000),
                by: super::liveness::leader_actor(),
                at,
            },
            Command::AttemptLost {
                job: *job,
                attempt: *attempt,
                node: node.to_string(),
                reason: format!("its processes on {node} could not be killed"),
                at,
            },
        ];
    }
    let node = node.to_string();
    let drain = match &report {
        AgentReport::GpuFailed {
            drain_node: true,
            reason,
            ..
        } => Some(Command::DrainNode {
            node: node.clone(),
            reason: reason.clone(),
            by: super::liveness::leader_actor(),
            at,
        }),
        _ => None,
    };
    let mut commands: Vec<Command> = command_for(node, report, at).into_iter().collect();
    commands.extend(drain);
    commands
}

fn command_for(
    node: String,
    report: AgentReport,
    at: corral_state::time::Timestamp,
) -> Option<Command> {
    Some(match report {
        AgentReport::Started { job, attempt } => Command::AttemptStarted {
            job,
            attempt,
            node,
            at,
        },
        AgentReport::StepStarted {
            job,
            attempt,
            step,
            name,
            nodes,
            ntasks,
            cpus,
        } => Command::StepStarted {
            job,
            attempt,
            node,
            step,
            name,
            nodes,
            ntasks,
            cpus,
            at,
        },
        AgentReport::StepEnded {
            job,
            attempt,
            step,
            status,
        } => Command::StepEnded {
            job,
            attempt,
            node,
            step,
            status,
            at,
        },
        AgentReport::BatchExited {
            job,
            attempt,
            status,
        } => Command::BatchExited {
            job,
            attempt,
            node,
            status,
            at,
        },
        AgentReport::Released { job, attempt } => Command::NodeReleased {
            job,
            attempt,
            node,
            at,
        },
        AgentReport::Checkpoint {
            job,
            attempt,
            step,
            path,
        } => Command::ReportCheckpoint {
            job,
            attempt,
            node,
            step,
            path,
            at,
        },
        AgentReport::XidKilled { .. } | AgentReport::Unkillable { .. } => return None,
        AgentReport::Lost {
            job,
            attempt,
            reason,
        } => Command::AttemptLost {
            job,
            attempt,
            node,
            reason,
            at,
        },
        AgentReport::GpuFailed {
            gpu, xid, reason, ..
        } => Command::GpuFailed {
            node,
            gpu,
            xid,
            reason,
            at,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_acknowledged_only_once_committed_or_refused() {
        let committed = Ok(vec![(7, true)]);
        let refused = Ok(vec![(7, false)]);
        assert_eq!(
            settle("n1", vec![(7, 1)], Ok(vec![Ok(Outcome::Done)])),
            committed
        );
        let stale = || Rejection::StaleAttempt {
            job: corral_state::ids::JobId(1),
            got: 1,
            live: Some(2),
        };
        assert_eq!(settle("n1", vec![(7, 1)], Ok(vec![Err(stale())])), refused);
        // Two reports in one proposal: each gets its own commands' outcome.
        assert_eq!(
            settle(
                "n1",
                vec![(7, 2), (8, 1)],
                Ok(vec![Ok(Outcome::Done), Err(stale()), Ok(Outcome::Done)])
            ),
            Ok(vec![(7, false), (8, true)])
        );
        assert_eq!(
            settle(
                "n1",
                vec![(7, 1)],
                Err(ProposeError::TooLarge { bytes: 10, max: 1 })
            ),
            refused
        );
        // Maybe not committed: no acknowledgement, and the session ends so that
        // the agent resends the report (it resends only on a new connection).
        for failure in [
            ProposeError::Timeout(5_000),
            ProposeError::Lost("gone".into()),
            ProposeError::Unavailable("stopping".into()),
            ProposeError::NotLeader { leader: None },
        ] {
            assert!(settle("n1", vec![(7, 1)], Err(failure)).is_err());
        }
    }

    #[test]
    fn an_application_xid_ends_each_attempt_it_killed_with_its_own_cause() {
        use corral_state::ids::JobId;
        let report = AgentReport::XidKilled {
            gpu: 2,
            xid: 31,
            attempts: vec![(JobId(4), 1), (JobId(9), 3)],
            reason: "XID 31: MMU fault".into(),
        };
        let commands = commands_for("n1", report);
        assert_eq!(commands.len(), 2);
        let Command::ApplicationXid {
            job,
            attempt,
            node,
            gpu,
            xid,
            ..
        } = &commands[1]
        else {
            panic!("not an application XID: {:?}", commands[1]);
        };
        assert_eq!(
            (*job, *attempt, node.as_str(), *gpu, *xid),
            (JobId(9), 3, "n1", 2, 31)
        );
    }
}
