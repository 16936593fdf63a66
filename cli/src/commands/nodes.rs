//! `corral nodes` (and `sinfo`), and `corral node drain|resume|down`.

use std::process::ExitCode;

use corral_proto::api::{ListNodesRequest, NodeAction as WireAction, SetNodeStateRequest};
use corral_proto::records;
use corral_state::node::Node;
use corral_state::partition::Partition;

use crate::args::{NodeAction, NodesArgs};
use crate::connection::{Cluster, Retry};
use crate::format::{node_list, nodes_table};

/// Lists nodes.
pub async fn run(cluster: &Cluster, args: &NodesArgs, json: bool) -> anyhow::Result<ExitCode> {
    let request = ListNodesRequest {
        partitions: args.partitions.clone(),
        nodes: args.nodes.clone().unwrap_or_default(),
    };
    let reply = cluster
        .call(Retry::Idempotent, |mut c| {
            let request = request.clone();
            async move { c.list_nodes(request).await }
        })
        .await?;
    let nodes = reply
        .nodes_json
        .iter()
        .map(|n| records::decode::<Node>("node", n))
        .collect::<Result<Vec<_>, _>>()?;
    let partitions = reply
        .partitions_json
        .iter()
        .map(|p| records::decode::<Partition>("partition", p))
        .collect::<Result<Vec<_>, _>>()?;
    if json {
        super::print_json(&serde_json::json!({ "nodes": nodes, "partitions": partitions }))?;
    } else if args.node_oriented {
        print!("{}", node_list(&nodes, &partitions, false));
    } else {
        print!("{}", nodes_table(&nodes, &partitions, false));
    }
    Ok(ExitCode::SUCCESS)
}

/// Drains, resumes or downs nodes or a GPU.
pub async fn set_state(cluster: &Cluster, action: NodeAction) -> anyhow::Result<ExitCode> {
    let (nodes, action, gpu, reason) = match action {
        NodeAction::Drain { nodes, gpu, reason } => (nodes, WireAction::Drain, gpu, reason),
        NodeAction::Resume { nodes, gpu } => (nodes, WireAction::Resume, gpu, String::new()),
        NodeAction::Down { nodes, reason } => (nodes, WireAction::Down, None, reason),
    };
    let request = SetNodeStateRequest {
        nodes,
        action: action as i32,
        gpu,
        reason,
    };
    cluster
        .call(Retry::Once, |mut c| {
            let request = request.clone();
            async move { c.set_node_state(request).await }
        })
        .await?;
    Ok(ExitCode::SUCCESS)
}
