//! Node calls: list nodes and partitions; drain, resume or down a node or a GPU.

use corral_proto::api::{ListNodesReply, ListNodesRequest, NodeAction, SetNodeStateRequest};
use corral_proto::records;
use corral_state::command::Command;
use corral_state::slurm::hostlist;
use tonic::Status;

use super::caller::Caller;
use super::{ApiContext, status};
use crate::clock;

/// `ListNodes`: nodes (optionally of some partitions or a hostlist) and partitions.
pub fn list(ctx: &ApiContext, request: &ListNodesRequest) -> Result<ListNodesReply, Status> {
    let wanted: Option<Vec<String>> = if request.nodes.is_empty() {
        None
    } else {
        Some(
            hostlist::expand(&request.nodes)
                .map_err(|e| Status::invalid_argument(format!("node list: {e}")))?,
        )
    };
    ctx.replica
        .read_local(|state| {
            for name in &request.partitions {
                if !state.partitions().contains_key(name) {
                    return Err(status::rejection(
                        corral_state::Rejection::UnknownPartition(name.clone()),
                    ));
                }
            }
            let in_partitions = |node: &str| {
                request.partitions.is_empty()
                    || request.partitions.iter().any(|p| {
                        state
                            .partitions()
                            .get(p)
                            .is_some_and(|p| p.nodes.contains(node))
                    })
            };
            let encode_err = |e: records::RecordError| Status::internal(e.to_string());
            let nodes = state
                .nodes()
                .values()
                .filter(|n| wanted.as_ref().is_none_or(|w| w.contains(&n.name)))
                .filter(|n| in_partitions(&n.name))
                .map(|n| records::encode("node", n).map_err(encode_err))
                .collect::<Result<Vec<_>, _>>()?;
            let partitions = state
                .partitions()
                .values()
                .filter(|p| request.partitions.is_empty() || request.partitions.contains(&p.name))
                .map(|p| records::encode("partition", p).map_err(encode_err))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(ListNodesReply {
                nodes_json: nodes,
                partitions_json: partitions,
                as_of_ms: state.clock().as_ms(),
            })
        })
        .map_err(status::read)?
}

/// `SetNodeState`: one command per node, applied together; all or nothing per
/// node (the state machine checks the caller's role).
pub async fn set_state(
    ctx: &ApiContext,
    caller: &Caller,
    request: SetNodeStateRequest,
) -> Result<(), Status> {
    let by = caller.actor()?;
    let nodes = hostlist::expand(&request.nodes)
        .map_err(|e| Status::invalid_argument(format!("node list: {e}")))?;
    if nodes.is_empty() {
        return Err(Status::invalid_argument("name at least one node"));
    }
    let gpu = request.gpu;
    let at = clock::now();
    let reason = request.reason.clone();
    let action = NodeAction::try_from(request.action)
        .map_err(|_| Status::invalid_argument("unknown node action; use drain, resume or down"))?;
    if matches!(action, NodeAction::Drain | NodeAction::Down) && reason.trim().is_empty() {
        return Err(Status::invalid_argument(
            "give a reason (--reason TEXT): operators read it in `corral nodes`",
        ));
    }
    let mut commands = Vec::new();
    for node in nodes {
        let by = by.clone();
        let reason = reason.clone();
        commands.push(match (action, gpu) {
            (NodeAction::Drain, None) => Command::DrainNode {
                node,
                reason,
                by,
                at,
            },
            (NodeAction::Drain, Some(gpu)) => Command::DrainGpu {
                node,
                gpu,
                reason,
                by,
                at,
            },
            (NodeAction::Resume, None) => Command::ResumeNode { node, by },
            (NodeAction::Resume, Some(gpu)) => Command::ResumeGpu { node, gpu, by },
            (NodeAction::Down, None) => Command::NodeDown {
                node,
                reason,
                by,
                at,
            },
            (NodeAction::Down, Some(_)) => {
                return Err(Status::invalid_argument(
                    "a single GPU cannot be marked down; drain it instead",
                ));
            }
            (NodeAction::Unspecified, _) => {
                return Err(Status::invalid_argument(
                    "unknown node action; use drain, resume or down",
                ));
            }
        });
    }
    let results = ctx.propose(commands).await?;
    let refused: Vec<corral_state::Rejection> =
        results.into_iter().filter_map(Result::err).collect();
    ctx.wake_scheduler.notify_one();
    match refused.first() {
        None => Ok(()),
        Some(first) => {
            let code = status::rejection(first.clone()).code();
            let text: Vec<String> = refused.iter().map(ToString::to_string).collect();
            Err(Status::new(code, text.join("; ")))
        }
    }
}
