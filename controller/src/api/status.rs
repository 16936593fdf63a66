//! How refusals and Raft failures become gRPC statuses. Every status message says
//! what was wrong and what to do; a follower that cannot reach a leader names the
//! leader's client address in the `corral-leader` metadata so clients retry there.

use corral_consensus::{MembershipError, ProposeError, ReadError, ReplicaAddr, ReplicaId};
use corral_proto::LEADER_METADATA;
use corral_state::Rejection;
use tonic::{Code, Status};

/// A command the state machine refused.
pub fn rejection(rejection: Rejection) -> Status {
    let code = match &rejection {
        Rejection::PermissionDenied(_) => Code::PermissionDenied,
        Rejection::UnknownJob(_)
        | Rejection::UnknownNode(_)
        | Rejection::UnknownGpu { .. }
        | Rejection::UnknownPartition(_)
        | Rejection::UnknownAccount(_)
        | Rejection::UnknownUser(_)
        | Rejection::UnknownQos(_)
        | Rejection::UnknownReservation(_) => Code::NotFound,
        Rejection::InvalidRequest(_) | Rejection::InvalidConfig(_) => Code::InvalidArgument,
        Rejection::WrongJobState { .. }
        | Rejection::StaleAttempt { .. }
        | Rejection::NotInAllocation { .. } => Code::FailedPrecondition,
        Rejection::LimitReached(_) => Code::ResourceExhausted,
    };
    Status::new(code, rejection.to_string())
}

/// A proposal that did not commit (or whose fate is unknown).
pub fn propose(error: ProposeError) -> Status {
    match error {
        ProposeError::NotLeader { leader } => not_leader(leader),
        ProposeError::Timeout(ms) => Status::deadline_exceeded(format!(
            "no answer from the cluster within {ms} ms: the change may or may not have been made; \
             check with `corral queue` before retrying (submissions retried with the same idempotency key are never duplicated)"
        )),
        ProposeError::Unavailable(why) => Status::unavailable(format!(
            "the cluster could not take the change: {why}; retry, or check `corral cluster`"
        )),
        // Not `unavailable`: clients repeat that freely, and this change may
        // have been made.
        ProposeError::Lost(why) => Status::unknown(format!(
            "the answer was lost ({why}): the change may or may not have been made; \
             check with `corral queue` before retrying"
        )),
        ProposeError::TooLarge { .. } => Status::invalid_argument(error.to_string()),
        ProposeError::Unencodable(_) => Status::internal(error.to_string()),
    }
}

/// A linearizable read that could not be served.
pub fn read(error: ReadError) -> Status {
    match error {
        ReadError::NotLeader { leader } => not_leader(leader),
        ReadError::Unavailable(why) => Status::unavailable(format!(
            "this controller cannot read its state: {why}; try another controller"
        )),
    }
}

/// A membership change that failed.
pub fn membership(error: MembershipError) -> Status {
    match error {
        MembershipError::NotLeader { leader } => not_leader(leader),
        MembershipError::InProgress(why) => Status::failed_precondition(format!(
            "the previous membership change is still not committed ({why}); \
             is a majority of the voters running and reachable? `corral cluster` shows them"
        )),
        MembershipError::Refused(why) => {
            Status::failed_precondition(format!("membership change refused: {why}"))
        }
    }
}

/// "Not the leader": unavailable, naming the leader when known.
pub fn not_leader(leader: Option<(ReplicaId, ReplicaAddr)>) -> Status {
    match leader {
        Some((id, addr)) if !addr.api.is_empty() => {
            let mut status = Status::unavailable(format!(
                "this controller is not the leader; the leader is replica {id} at {}",
                addr.api
            ));
            if let Ok(value) = addr.api.parse() {
                status.metadata_mut().insert(LEADER_METADATA, value);
            }
            status
        }
        Some((id, _)) => Status::unavailable(format!(
            "this controller is not the leader; the leader is replica {id}; retry through it"
        )),
        None => Status::unavailable(
            "no leader is known (an election is in progress or a majority is unreachable); retry in a moment",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_with_an_unknown_fate_is_not_answered_as_unavailable() {
        // The CLI repeats any change answered `unavailable` (nothing was done).
        let lost = propose(ProposeError::Lost("connection reset".into()));
        assert_eq!(lost.code(), Code::Unknown);
        assert!(lost.message().contains("may or may not"));
        let timeout = propose(ProposeError::Timeout(5_000));
        assert_eq!(timeout.code(), Code::DeadlineExceeded);
        let refused = propose(ProposeError::Unavailable("shutting down".into()));
        assert_eq!(refused.code(), Code::Unavailable);
    }
}
