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
    /// The candidate's log is no longer than its own and it is committed to
    /// another contender: it stood for election moments ago, or said it
    /// would vote for another candidate moments ago, or asks for pre-votes
    /// itself and the candidate's id is higher (the lower id wins a tie, so
    /// two replicas that time out together do not split the vote).
    Contending,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::LeaderAlive => "it hears from a live leader",
            Refusal::LogBehind => "the candidate's log ends before its own",
            Refusal::Contending => "it contends for the same election",
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
    /// Its own id.
    pub id: ReplicaId,
    /// How it is committed for the next term.
    pub contest: Contest,
}

/// How the asked replica is committed for the next term.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Contest {
    /// It stood for election within the leader lease and votes for itself.
    pub standing: bool,
    /// It is asking for pre-votes itself now.
    pub asking: bool,
    /// It said, within the leader lease, that it would vote for this
    /// candidate, whose log ended there.
    pub promised: Option<(ReplicaId, Option<LogId>)>,
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
///
/// Two voters whose leader died time out together (they heard it last at the
/// same moment); each granting the other's pre-vote would make both stand and
/// split the real vote, the term growing once per split. So, unless the
/// candidate's log is longer than its own (and than the log of the one it
/// promised), a replica refuses every candidate but itself while it stood
/// moments ago, every candidate but the one it promised moments ago, and,
/// while it asks itself, every higher id (it gives up its own round when it
/// grants another: [`super::judge`]). A longer log always gets through: the
/// replica that holds it is the only one that can win the real vote, so no
/// rule may keep it waiting.
pub fn decide(request: &PreVoteRequest, view: &VoterView) -> PreVoteAnswer {
    let other = request.candidate != view.id;
    let longer = request.last_log_id > view.last_log_id;
    let contest = &view.contest;
    let promised_other = contest.promised.is_some_and(|(promised, promised_log)| {
        promised != request.candidate && request.last_log_id <= promised_log
    });
    let refusal = if view.leader_alive {
        Some(Refusal::LeaderAlive)
    } else if request.last_log_id < view.last_log_id {
        Some(Refusal::LogBehind)
    } else if other
        && (promised_other
            || (!longer && (contest.standing || (contest.asking && request.candidate > view.id))))
    {
        Some(Refusal::Contending)
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
            id: 9,
            contest: Contest::default(),
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

    #[test]
    fn of_two_contenders_the_lower_id_is_granted_and_a_fresh_candidate_grants_none() {
        let last = Some(log_id(4, 1, 10));
        let asking = VoterView {
            id: 2,
            contest: Contest {
                asking: true,
                ..Contest::default()
            },
            ..view(4, last, false)
        };
        assert!(decide(&ask(1, 5, last), &asking).granted());
        assert_eq!(
            decide(&ask(3, 5, last), &asking).refusal,
            Some(Refusal::Contending)
        );
        // Its own question is judged like anyone's.
        assert!(decide(&ask(2, 5, last), &asking).granted());
        let standing = VoterView {
            contest: Contest {
                standing: true,
                ..Contest::default()
            },
            ..asking
        };
        assert_eq!(
            decide(&ask(1, 5, last), &standing).refusal,
            Some(Refusal::Contending)
        );
        assert!(decide(&ask(2, 5, last), &standing).granted());
    }

    /// The review's stall: 1 (the leader) is gone, 2's log is shorter than
    /// 3's. 3 must get 2's pre-vote while 2 asks for its own, or neither
    /// ever stands (3 refuses 2 for its log, 2 would refuse 3 for its id).
    #[test]
    fn a_longer_log_gets_through_every_contest() {
        let short = Some(log_id(4, 1, 10));
        let long = Some(log_id(4, 1, 12));
        let two = |contest| VoterView {
            id: 2,
            contest,
            ..view(4, short, false)
        };
        for contest in [
            Contest {
                asking: true,
                ..Contest::default()
            },
            Contest {
                standing: true,
                ..Contest::default()
            },
            Contest {
                promised: Some((4, short)),
                ..Contest::default()
            },
        ] {
            assert!(
                decide(&ask(3, 5, long), &two(contest)).granted(),
                "{contest:?}"
            );
            assert_eq!(
                decide(&ask(3, 5, short), &two(contest)).refusal,
                Some(Refusal::Contending),
                "{contest:?}"
            );
        }
    }

    /// Five voters: 4 promised 2; 3, with a log no longer than 2's, asks 4
    /// next and is refused, so 2 and 3 never both hold a majority.
    #[test]
    fn a_promise_holds_against_a_log_no_longer_than_the_promised_ones() {
        let last = Some(log_id(4, 1, 10));
        let four = VoterView {
            id: 4,
            contest: Contest {
                promised: Some((2, last)),
                ..Contest::default()
            },
            ..view(4, last, false)
        };
        assert_eq!(
            decide(&ask(3, 5, last), &four).refusal,
            Some(Refusal::Contending)
        );
        assert!(decide(&ask(2, 5, last), &four).granted(), "asked again");
        assert!(decide(&ask(3, 5, Some(log_id(4, 1, 11))), &four).granted());
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
            // (`view` does not contend.)
            prop_assert_eq!(answer.granted(), !alive && request.last_log_id >= mine.last_log_id);
            prop_assert_eq!(answer.term, my_term);
        }
    }
}
