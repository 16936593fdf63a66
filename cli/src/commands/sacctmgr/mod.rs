//! `sacctmgr` (through a link of that name): accounts, users and QOS as
//! Slurm sites manage them, mapped onto corral's admin changes. `show` reads
//! `ListAssociations`; `add`, `modify` and `delete` read the current records,
//! print what will change in sacctmgr's words, ask as sacctmgr does (`-i`
//! commits at once) and send one admin change per record. QOS limits are on
//! GPUs (`gres/gpu=N`), the resource corral schedules; other TRES are refused
//! by name.

mod changes;
mod parse;
mod show;

use std::io::{BufRead, Write};
use std::process::ExitCode;

use anyhow::Context;
use corral_proto::api::Empty;
use corral_proto::records;
use corral_state::account::{Account, User};
use corral_state::qos::Qos;

use self::changes::Planned;
use self::parse::{Entity, Request, USAGE, Verb};
use crate::args::GlobalArgs;
use crate::connection::{Cluster, ClusterSettings, Retry};

/// Runs `sacctmgr ARGS`.
pub async fn run(args: &[String], global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let request = match parse::parse(args) {
        Ok(Some(request)) => request,
        Ok(None) => {
            print!("{USAGE}");
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => {
            eprintln!("sacctmgr: error: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    let settings = ClusterSettings::resolve(&global.cluster_flags()).context(
        "sacctmgr finds the cluster through CORRAL_CLUSTER, CORRAL_CA, CORRAL_CERT and CORRAL_KEY",
    )?;
    let cluster = Cluster::new(settings)?;
    let current = Current::read(&cluster).await?;
    if request.verb == Verb::Show {
        let records = show::Records {
            cluster: "corral",
            accounts: &current.accounts,
            users: &current.users,
            qos: &current.qos,
        };
        return Ok(
            match show::table(
                request.entity,
                &records,
                &request.names,
                request.format.as_deref(),
                request.noheader,
                &request.layout,
            ) {
                Ok(text) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(message) => {
                    eprintln!("sacctmgr: error: {message}");
                    ExitCode::from(1)
                }
            },
        );
    }
    let planned = match changes::plan(&request, &current) {
        Ok(planned) => planned,
        Err(message) => {
            eprintln!(" {message}");
            return Ok(ExitCode::from(1));
        }
    };
    commit(&cluster, &request, planned).await
}

/// What the cluster holds now.
pub struct Current {
    /// Every account.
    pub accounts: Vec<Account>,
    /// Every user.
    pub users: Vec<User>,
    /// Every QOS.
    pub qos: Vec<Qos>,
}

impl Current {
    async fn read(cluster: &Cluster) -> anyhow::Result<Current> {
        let reply = cluster
            .call(Retry::Idempotent, |mut c| async move {
                c.list_associations(Empty {}).await
            })
            .await?;
        Ok(Current {
            accounts: decode_all("account", &reply.accounts_json)?,
            users: decode_all("user", &reply.users_json)?,
            qos: decode_all("qos", &reply.qos_json)?,
        })
    }
}

fn decode_all<T: serde::de::DeserializeOwned>(
    what: &'static str,
    json: &[String],
) -> Result<Vec<T>, records::RecordError> {
    json.iter().map(|j| records::decode(what, j)).collect()
}

/// Prints the plan, asks (unless `-i`) and sends the changes.
async fn commit(
    cluster: &Cluster,
    request: &Request,
    planned: Planned,
) -> anyhow::Result<ExitCode> {
    print!("{}", planned.summary);
    for warning in &planned.warnings {
        eprintln!("sacctmgr: warning: {warning}");
    }
    if planned.changes.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    if !request.immediate && !confirmed()? {
        println!(" Changes Discarded");
        return Ok(ExitCode::SUCCESS);
    }
    for change in &planned.changes {
        super::admin::send(cluster, change).await?;
    }
    Ok(ExitCode::SUCCESS)
}

/// sacctmgr's question, answered on standard input (`echo y | sacctmgr ...`
/// works as with Slurm); anything but `y`, or no answer, discards.
fn confirmed() -> anyhow::Result<bool> {
    print!(" Would you like to commit changes? (You have 30 seconds to decide)\n(N/y): ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    println!();
    Ok(matches!(answer.trim(), "y" | "Y"))
}

/// Which entity a change touches, for messages.
fn noun(entity: Entity) -> &'static str {
    match entity {
        Entity::Account => "accounts",
        Entity::User => "users",
        Entity::Qos => "qos",
        Entity::Association => "associations",
    }
}
