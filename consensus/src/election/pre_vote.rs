//! The pre-vote question and its answer, decided purely from what the asked
//! replica knows (Raft thesis §9.6): would it vote for this candidate at the
//! next term? Nothing here changes a vote or a term.

use serde::{Deserialize, Serialize};

use crate::types::{LogId, ReplicaId};

/// Would you vote for me at `term`?
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreVoteRequest {
    /// Who asks.
    pub candidate: ReplicaId,
    /// The term it would stand in: its current term plus one.
    pub term: u64,
    /// Its last log entry.
    pub last_log_id: Option<LogId>,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreVoteAnswer {
    /// The asked replica's current term.
    pub term: u64,
    /// `None`: it would vote for the candidate.
    pub refusal: Option<Refusal>,
}

impl PreVoteAnswer {
    /// True when the asked replica would vote for the candidate.
    pub fn granted(&self) -> bool {
        self.refusal.is_none()
    }
}

/// Why a replica would not vote for the candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    /// It heard from a live leader within the leader lease (or is one).
    LeaderAlive,
    /// The candidate's log ends before its own.
    LogBehind,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::LeaderAlive => "it hears from a live leader",
            Refusal::LogBehind => "the candidate's log ends before its own",
        })
    }
}

/// What the asked replica knows, read from its Raft state at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoterView {
    /// Its current term.
    pub term: u64,
    /// Its last log entry.
    pub last_log_id: Option<LogId>,
    /// True when it heard from a leader (another replica whose election a
    /// majority confirmed) within the leader lease, or leads and a majority
    /// answers it.
    pub leader_alive: bool,
}

/// Decides a pre-vote (Raft thesis §9.6): granted when no live leader is
/// known and the candidate's log is at least as complete as this replica's.
///
/// Neither the terms nor the membership are compared. The real vote compares
/// terms, and a candidate that lost it raises its own term by standing, so a
/// pre-vote refused for a term would leave two replicas refusing each other
/// for good (the one with the longer log at the lower term). The real vote
/// does not look at membership either: a voter whose view is older than the
/// candidate's (it missed a membership change) would refuse the new voters.
/// A replica removed while it was down has missed the removal, so its log is
/// shorter and the log rule refuses it; and the voters hear their leader.
pub fn decide(request: &PreVoteRequest, view: &VoterView) -> PreVoteAnswer {
    let refusal = if view.leader_alive {
        Some(Refusal::LeaderAlive)
    } else if request.last_log_id < view.last_log_id {
        Some(Refusal::LogBehind)
    } else {
        None
    };
    PreVoteAnswer {
        term: view.term,
        refusal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;
    use proptest::prelude::*;

    fn log_id(term: u64, leader: ReplicaId, index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(term, leader), index)
    }

    fn view(term: u64, last: Option<LogId>, leader_alive: bool) -> VoterView {
        VoterView {
            term,
            last_log_id: last,
            leader_alive,
        }
    }

    fn ask(candidate: ReplicaId, term: u64, last: Option<LogId>) -> PreVoteRequest {
        PreVoteRequest {
            candidate,
            term,
            last_log_id: last,
        }
    }

    #[test]
    fn a_replica_that_hears_a_leader_refuses() {
        let answer = decide(
            &ask(2, 5, Some(log_id(4, 1, 10))),
            &view(4, Some(log_id(4, 1, 10)), true),
        );
        assert_eq!(answer.refusal, Some(Refusal::LeaderAlive));
    }

    #[test]
    fn a_lost_leader_and_an_equal_log_grant() {
        let answer = decide(
            &ask(2, 5, Some(log_id(4, 1, 10))),
            &view(4, Some(log_id(4, 1, 10)), false),
        );
        assert!(answer.granted());
        assert_eq!(answer.term, 4);
    }

    #[test]
    fn a_shorter_or_older_log_is_refused() {
        let mine = view(4, Some(log_id(4, 1, 10)), false);
        assert_eq!(
            decide(&ask(2, 5, Some(log_id(4, 1, 9))), &mine).refusal,
            Some(Refusal::LogBehind)
        );
        assert_eq!(
            decide(&ask(2, 5, Some(log_id(3, 2, 50))), &mine).refusal,
            Some(Refusal::LogBehind)
        );
        assert_eq!(
            decide(&ask(2, 5, None), &mine).refusal,
            Some(Refusal::LogBehind)
        );
        assert!(decide(&ask(2, 5, Some(log_id(4, 1, 11))), &mine).granted());
    }

    /// A stood at t+1 and lost (its log shorter); B, at t, has the longer
    /// log. B must get A's pre-vote whatever the terms, or neither ever
    /// stands: A refuses nobody for a term, B refuses A for its log.
    #[test]
    fn a_longer_log_at_a_lower_term_is_granted() {
        let a = view(8, Some(log_id(7, 3, 40)), false);
        let b_asks = ask(2, 8, Some(log_id(7, 3, 45)));
        assert!(decide(&b_asks, &a).granted());
        let b = view(7, Some(log_id(7, 3, 45)), false);
        let a_asks = ask(1, 9, Some(log_id(7, 3, 40)));
        assert_eq!(decide(&a_asks, &b).refusal, Some(Refusal::LogBehind));
    }

    proptest! {
        /// Whatever the request, a pre-vote is granted exactly when no live
        /// leader is known and the candidate's log is at least as complete.
        #[test]
        fn a_grant_is_exactly_no_leader_and_a_complete_log(
            candidate in 1u64..5,
            req_term in 0u64..6,
            req_last in proptest::option::of((0u64..6, 1u64..4, 0u64..20)),
            my_term in 0u64..6,
            my_last in proptest::option::of((0u64..6, 1u64..4, 0u64..20)),
            alive in any::<bool>(),
        ) {
            let to_id = |(t, l, i): (u64, u64, u64)| log_id(t, l, i);
            let request = ask(candidate, req_term, req_last.map(to_id));
            let mine = view(my_term, my_last.map(to_id), alive);
            let answer = decide(&request, &mine);
            prop_assert_eq!(answer.granted(), !alive && request.last_log_id >= mine.last_log_id);
            prop_assert_eq!(answer.term, my_term);
        }
    }
}
