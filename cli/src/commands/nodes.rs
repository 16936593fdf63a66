//! `corral nodes` (and `sinfo`), and `corral node drain|resume|down`.
//!
//! sinfo's checks come first, before the cluster is asked (`-l` with `-o`, a
//! bad `-t` state, a bad `-n` hostlist), with its messages and status 1; then
//! every partition and the nodes named (all without `-n`) are fetched and the
//! output is made here, so an unknown `-p` partition shows nothing, as in
//! sinfo (`corral nodes` refuses it by name). Invoked through a link named
//! `sinfo` (the link adds the hidden `--sinfo`), the output is Slurm's; as
//! `corral nodes`, the default views add corral's GPU columns (see
//! [`crate::format::nodes`]). `--json` prints the records as they are.

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use corral_proto::api::{ListNodesRequest, NodeAction as WireAction, SetNodeStateRequest};
use corral_proto::records;
use corral_state::Timestamp;
use corral_state::node::Node;
use corral_state::partition::Partition;
use corral_state::slurm::hostlist;

use crate::args::{NodeAction, NodesArgs};
use crate::connection::{Cluster, Retry};
use crate::format::node_state::{VALID_STATES, parse_states};
use crate::format::sinfo_fields::{UserIds, reason_of};
use crate::format::sinfo_reservations::sinfo_reservations;
use crate::format::{Columns, SinfoOptions, sinfo};

/// Lists nodes.
pub async fn run(cluster: &Cluster, args: &NodesArgs, json: bool) -> anyhow::Result<ExitCode> {
    let as_sinfo = args.sinfo;
    let program = if as_sinfo { "sinfo" } else { "corral nodes" };
    let options = match options(args, as_sinfo, program) {
        Ok(options) => options,
        Err(messages) => {
            for message in messages {
                eprintln!("{message}");
            }
            return Ok(ExitCode::from(1));
        }
    };
    if args.reservation {
        let reservations =
            super::scontrol::reservations::fetch(cluster, &format!("{program} -T")).await?;
        if json {
            super::print_json(&reservations)?;
        } else {
            let now = Timestamp(crate::when::now_ms());
            print!("{}", sinfo_reservations(&reservations, args.noheader, now));
        }
        return Ok(ExitCode::SUCCESS);
    }
    // sinfo shows nothing for an unknown partition; `corral nodes` and
    // `--json` let the controller refuse it by name.
    let request = ListNodesRequest {
        partitions: if json || !as_sinfo {
            args.partitions.clone()
        } else {
            Vec::new()
        },
        nodes: args.nodes.clone().unwrap_or_default(),
    };
    let (nodes, partitions) = fetch(cluster, request).await?;
    if json {
        super::print_json(&serde_json::json!({ "nodes": nodes, "partitions": partitions }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let options = SinfoOptions {
        users: user_ids(&nodes),
        ..options
    };
    let printed = sinfo(&nodes, &partitions, &options);
    for error in &printed.errors {
        eprintln!("{error}");
    }
    print!("{}", printed.text);
    Ok(ExitCode::SUCCESS)
}

/// The options, or sinfo's complaints about them.
fn options(args: &NodesArgs, as_sinfo: bool, program: &str) -> Result<SinfoOptions, Vec<String>> {
    if args.long && (args.format.is_some() || args.format_names.is_some()) {
        return Err(vec![format!(
            "{program}: fatal: Options -o(--format) and -l(--long) are mutually exclusive. \
             Please remove one and retry."
        )]);
    }
    let states = match args.states.as_deref().map(parse_states).transpose() {
        Ok(states) => states,
        Err(bad) => {
            return Err(vec![
                format!("{program}: error: {bad}"),
                format!("{program}: error: valid states: {VALID_STATES}"),
            ]);
        }
    };
    let nodes = match args.nodes.as_deref().map(hostlist::expand).transpose() {
        Ok(nodes) => nodes,
        Err(_) => {
            let given = args.nodes.as_deref().unwrap_or_default();
            return Err(vec![format!(
                "{program}: error: '{given}' invalid entry for --nodes"
            )]);
        }
    };
    let columns = match (&args.format_names, &args.format) {
        (Some(names), _) => Columns::Names(names.clone()),
        (None, Some(letters)) => Columns::Letters(letters.clone()),
        (None, None) => Columns::Default,
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Ok(SinfoOptions {
        columns,
        env_format: std::env::var("SINFO_FORMAT").ok(),
        node_oriented: args.node_oriented,
        long: args.long,
        summarize: args.summarize,
        list_reasons: args.list_reasons,
        noheader: args.noheader,
        states,
        partitions: args.partitions.clone(),
        nodes,
        corral_columns: !as_sinfo,
        program: program.to_string(),
        now: Timestamp::from_secs(now),
        users: UserIds::new(),
    })
}

/// The uids this machine knows for the users named in the nodes' reasons.
fn user_ids(nodes: &[Node]) -> UserIds {
    let names: BTreeSet<&str> = nodes
        .iter()
        .filter_map(reason_of)
        .map(|r| r.by.as_str())
        .collect();
    names
        .into_iter()
        .filter_map(|name| {
            let user = nix::unistd::User::from_name(name).ok().flatten()?;
            Some((name.to_string(), user.uid.as_raw()))
        })
        .collect()
}

/// The nodes and partitions `request` asks for.
pub async fn fetch(
    cluster: &Cluster,
    request: ListNodesRequest,
) -> anyhow::Result<(Vec<Node>, Vec<Partition>)> {
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
    Ok((nodes, partitions))
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
