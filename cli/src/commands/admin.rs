//! `corral admin ...`: configuration changes and controller membership.

use std::process::ExitCode;

use corral_proto::admin::AdminChange;
use corral_proto::api::{AdminRequest, ChangeMembershipRequest};
use corral_proto::records;
use corral_state::time::Timestamp;

use crate::args::{AdminCommand, MembersAction, SnapshotAction};
use crate::connection::{Cluster, Retry};
use crate::format::cluster_status;
use crate::when;

/// Runs one admin command.
pub async fn run(cluster: &Cluster, command: AdminCommand, json: bool) -> anyhow::Result<ExitCode> {
    match command {
        AdminCommand::Change(args) => {
            let change = keep_limits(cluster, args.into_change(Timestamp(when::now_ms()))?).await?;
            send(cluster, &change).await?;
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::Snapshot { action } => match action {
            SnapshotAction::Save { file } => super::backup::save(cluster, &file, json).await,
            SnapshotAction::Inspect { file } => super::backup::inspect(&file, json),
        },
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

/// `corral admin account|user set` replaces the record but has no options for
/// sacctmgr's association limits: an existing record keeps its limits.
async fn keep_limits(cluster: &Cluster, change: AdminChange) -> anyhow::Result<AdminChange> {
    if !matches!(change, AdminChange::SetAccount(_) | AdminChange::SetUser(_)) {
        return Ok(change);
    }
    let reply = cluster
        .call(Retry::Idempotent, |mut c| async move {
            c.list_associations(corral_proto::api::Empty {}).await
        })
        .await?;
    Ok(match change {
        AdminChange::SetAccount(mut account) => {
            for json in &reply.accounts_json {
                let current: corral_state::account::Account = records::decode("account", json)?;
                if current.name == account.name {
                    account.limits = current.limits;
                }
            }
            AdminChange::SetAccount(account)
        }
        AdminChange::SetUser(mut user) => {
            for json in &reply.users_json {
                let current: corral_state::account::User = records::decode("user", json)?;
                if current.name == user.name {
                    user.limits = current.limits;
                }
            }
            AdminChange::SetUser(user)
        }
        other => other,
    })
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
