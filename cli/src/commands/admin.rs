//! `corral admin ...`: configuration changes and controller membership.

use std::process::ExitCode;

use corral_proto::admin::AdminChange;
use corral_proto::api::{AdminRequest, ChangeMembershipRequest};
use corral_proto::records;
use corral_state::time::Timestamp;

use crate::args::{AdminCommand, MembersAction};
use crate::connection::{Cluster, Retry};
use crate::format::cluster_status;
use crate::when;

/// Runs one admin command.
pub async fn run(cluster: &Cluster, command: AdminCommand, json: bool) -> anyhow::Result<ExitCode> {
    match command {
        AdminCommand::Change(args) => {
            send(cluster, &args.into_change(Timestamp(when::now_ms()))?).await?;
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::Members { action } => {
            let request = match action {
                MembersAction::Add { id, peer, api } => ChangeMembershipRequest {
                    id,
                    peer_addr: peer,
                    api_addr: api,
                    add: true,
                },
                MembersAction::Remove { id } => ChangeMembershipRequest {
                    id,
                    add: false,
                    ..ChangeMembershipRequest::default()
                },
            };
            let reply = cluster
                .call(Retry::Once, |mut c| {
                    let request = request.clone();
                    async move { c.change_membership(request).await }
                })
                .await?;
            if json {
                super::print_json(&serde_json::json!({
                    "members": reply.members.iter().map(|m| serde_json::json!({"id": m.id, "voter": m.voter})).collect::<Vec<_>>(),
                }))?;
            } else {
                print!("{}", cluster_status(&reply));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Sends one configuration change (admins), tried once.
pub async fn send(cluster: &Cluster, change: &AdminChange) -> anyhow::Result<()> {
    let request = AdminRequest {
        change_json: records::encode("admin change", change)?,
    };
    cluster
        .call(Retry::Once, |mut c| {
            let request = request.clone();
            async move { c.admin(request).await }
        })
        .await?;
    Ok(())
}
