//! `ListReservations` (scontrol show reservation): the advance reservations
//! as this replica has applied them. Anyone may read them, as any Slurm user
//! may run `scontrol show reservation`.

use corral_proto::api::ListReservationsReply;
use corral_proto::records;
use tonic::Status;

use super::{ApiContext, status};

/// Every reservation, by name.
pub fn list(ctx: &ApiContext) -> Result<ListReservationsReply, Status> {
    ctx.replica
        .read_local(|state| {
            let reservations_json = state
                .reservations()
                .values()
                .map(|r| {
                    records::encode("reservation", r).map_err(|e| Status::internal(e.to_string()))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(ListReservationsReply {
                reservations_json,
                as_of_ms: state.clock().as_ms(),
            })
        })
        .map_err(status::read)?
}
