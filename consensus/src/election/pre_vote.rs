//! The pre-vote question and its answer, decided purely from what the asked
//! replica knows (Raft thesis §9.6): would it vote for this candidate at the
//! next term? Nothing here changes a vote or a term.

use std::collections::BTreeSet;

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
    /// The candidate's term is not above its own.
    TermBehind,
    /// The candidate is not a voter in its view of the membership.
    NotAVoter,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::LeaderAlive => "it hears from a live leader",
            Refusal::LogBehind => "the candidate's log ends before its own",
            Refusal::TermBehind => "the candidate's term is not above its own",
            Refusal::NotAVoter => "the candidate is not a voter",
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
    /// The voters of its effective membership (every voter set, joint or not).
    pub voters: BTreeSet<ReplicaId>,
}

/// Decides a pre-vote: granted only when the candidate is a voter (or this
/// replica knows no membership yet), no live
/// leader is known, the candidate's next term is above this replica's term
/// and its log is at least as complete (the real vote's own rules, so a
/// granted pre-vote predicts a granted vote).
pub fn decide(request: &PreVoteRequest, view: &VoterView) -> PreVoteAnswer {
    // A replica that knows no membership yet (its cluster's first election
    // failed before it heard the configuration) cannot tell who votes: it
    // leaves that to the candidate's own view, as the real vote does.
    let refusal = if !view.voters.is_empty() && !view.voters.contains(&request.candidate) {
        Some(Refusal::NotAVoter)
    } else if view.leader_alive {
        Some(Refusal::LeaderAlive)
    } else if request.term <= view.term {
        Some(Refusal::TermBehind)
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
            voters: [1, 2, 3].into(),
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

    #[test]
    fn a_replica_that_knows_no_membership_judges_term_and_log_only() {
        let blank = VoterView {
            term: 0,
            last_log_id: None,
            leader_alive: false,
            voters: BTreeSet::new(),
        };
        assert!(decide(&ask(1, 2, Some(log_id(0, 0, 0))), &blank).granted());
    }

    #[test]
    fn a_term_not_above_mine_and_a_non_voter_are_refused() {
        let mine = view(6, None, false);
        assert_eq!(
            decide(&ask(2, 6, None), &mine).refusal,
            Some(Refusal::TermBehind)
        );
        assert_eq!(
            decide(&ask(9, 7, None), &mine).refusal,
            Some(Refusal::NotAVoter)
        );
    }

    proptest! {
        /// Whatever the request, a granted pre-vote means: a voter asked, no
        /// live leader, a higher term and a log at least as complete.
        #[test]
        fn a_grant_always_meets_every_rule(
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
            if answer.granted() {
                prop_assert!(mine.voters.is_empty() || mine.voters.contains(&candidate));
                prop_assert!(!alive);
                prop_assert!(req_term > my_term);
                prop_assert!(request.last_log_id >= mine.last_log_id);
            }
            prop_assert_eq!(answer.term, my_term);
        }
    }
}
