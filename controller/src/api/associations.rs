//! `ListAssociations` (sacctmgr show): the accounts, users and QOS as this
//! replica has applied them. Anyone may read them, as in Slurm without
//! `PrivateData=accounts,users`.

use corral_proto::api::ListAssociationsReply;
use corral_proto::records;
use serde::Serialize;
use tonic::Status;

use super::{ApiContext, status};

/// Every account, user and QOS.
pub fn list(ctx: &ApiContext) -> Result<ListAssociationsReply, Status> {
    ctx.replica
        .read_local(|state| {
            Ok(ListAssociationsReply {
                accounts_json: encode_all("account", state.accounts().values())?,
                users_json: encode_all("user", state.users().values())?,
                qos_json: encode_all("qos", state.qos().values())?,
            })
        })
        .map_err(status::read)?
}

fn encode_all<'a, T: Serialize + 'a>(
    what: &'static str,
    records: impl Iterator<Item = &'a T>,
) -> Result<Vec<String>, Status> {
    records
        .map(|r| records::encode(what, r).map_err(|e| Status::internal(e.to_string())))
        .collect()
}
