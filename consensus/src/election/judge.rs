//! The asked side of a pre-vote: reads what this replica knows from its Raft
//! state and log, and decides with [`super::pre_vote::decide`]. It also keeps
//! this replica's own commitments, shared with its [`super::elector`]: whether
//! it is asking for pre-votes now, and which candidate it last said it would
//! vote for (a promise that binds for a lease against any candidate whose log
//! is no longer; the elector then waits a whole timeout before it asks itself,
//! and gives up a round during which it promised), so that two voters do not
//! both collect a majority for the same term, unless the later one's log is
//! longer.
//!
//! It also answers a leader's [`super::beacon`], outside the core, and
//! counts a beacon it followed as a leader's message.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::ServerState;
use tokio::sync::watch;
use tokio::time::Instant;

use super::STEPPED_DOWN_PROBE;
use super::beacon::{self, BeaconAnswer, BeaconRequest, LeaderContact};
use super::pre_vote::{self, Contest, PreVoteAnswer, PreVoteRequest, Refusal, VoterView};
use crate::core_watch::CoreWatch;
use crate::log_store::LogStore;
use crate::types::{LogId, Raft, ReplicaId, Vote};

/// Answers pre-votes for one replica.
#[derive(Clone)]
pub struct Judge {
    id: ReplicaId,
    raft: Raft,
    log: LogStore,
    lease: Duration,
    /// True while this replica leads without a majority (stepped down).
    stepped_down: watch::Receiver<bool>,
    /// When it last probed for a pre-vote it refused.
    probed: Arc<Mutex<Option<Instant>>>,
    /// Its own contest for the next term.
    contest: Arc<Mutex<Commitments>>,
    /// Whether its core answers, and how long it may not.
    core: CoreWatch,
    core_hold_limit: Duration,
    /// The last leader it followed through a beacon.
    beacon_contact: LeaderContact,
}

/// This replica's own commitments for the next term.
#[derive(Debug, Default)]
struct Commitments {
    /// Its pre-vote round in progress (until it stood or gave up).
    asking: bool,
    /// The last other candidate it said it would vote for: who, whose log
    /// ended where, and when.
    promised: Option<(ReplicaId, Option<LogId>, Instant)>,
}

/// Why a pre-vote could not be judged: this replica's Raft stopped or its log
/// does not read.
#[derive(Debug, thiserror::Error)]
#[error("cannot judge a pre-vote: {0}")]
pub struct JudgeError(String);

impl Judge {
    /// A judge for replica `id`: `lease` is how long after a leader's last
    /// message it still counts as alive; it follows a leader's beacon while
    /// `core` answered within `core_hold_limit`.
    pub fn new(
        id: ReplicaId,
        raft: Raft,
        log: LogStore,
        lease: Duration,
        stepped_down: watch::Receiver<bool>,
        (core, core_hold_limit): (CoreWatch, Duration),
    ) -> Self {
        Judge {
            id,
            raft,
            log,
            lease,
            stepped_down,
            probed: Arc::default(),
            contest: Arc::default(),
            core,
            core_hold_limit,
            beacon_contact: LeaderContact::default(),
        }
    }

    /// Answers a leader's beacon from the last published Raft metrics, not
    /// through the core (which may be held by this replica's own disk), and
    /// notes a beacon it follows as contact with that leader.
    pub fn beacon(&self, request: &BeaconRequest) -> BeaconAnswer {
        let now = Instant::now();
        let metrics = self.raft.metrics();
        let (vote, follower, term) = {
            let m = metrics.borrow();
            let follower = m.state == ServerState::Follower && m.running_state.is_ok();
            (m.vote, follower, m.current_term)
        };
        let core_answers = self.core.answered_within(now, self.core_hold_limit);
        let follows = beacon::follows(request, &vote, follower, core_answers);
        if follows {
            self.beacon_contact.heard(request, now);
        }
        BeaconAnswer { follows, term }
    }

    /// When this replica last followed, through a beacon, the leader `vote`
    /// commits it to.
    pub fn beacon_contact(&self, vote: &Vote) -> Option<Instant> {
        self.beacon_contact.last_for(vote)
    }

    fn contest(&self) -> std::sync::MutexGuard<'_, Commitments> {
        self.contest.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// When this replica last granted another candidate's pre-vote.
    pub fn granted_other_at(&self) -> Option<Instant> {
        self.contest().promised.map(|(_, _, at)| at)
    }

    /// Starts this replica's own pre-vote round, unless it granted another
    /// candidate since `due_seen` (when it found its round due): that one
    /// goes first.
    pub fn begin_round(&self, due_seen: Instant) -> bool {
        let mut contest = self.contest();
        if contest.promised.is_some_and(|(_, _, at)| at >= due_seen) {
            return false;
        }
        contest.asking = true;
        true
    }

    /// True when this replica granted another candidate since `began` (a
    /// lower id, or a longer log), which then goes first. The round stays
    /// open (it still refuses higher ids) until [`Judge::round_over`].
    pub fn gave_way_since(&self, began: Instant) -> bool {
        self.contest()
            .promised
            .is_some_and(|(_, _, at)| at >= began)
    }

    /// Closes this replica's round: it stood (and openraft's vote now
    /// speaks for it) or gave up.
    pub fn round_over(&self) {
        self.contest().asking = false;
    }

    /// What this replica knows now.
    pub async fn view(&self) -> Result<VoterView, JudgeError> {
        let (id, lease) = (self.id, self.lease);
        let stepped_down = *self.stepped_down.borrow();
        let beacon_contact = self.beacon_contact.clone();
        let (term, leader_alive, standing) = self
            .raft
            .with_raft_state(move |st| {
                let vote = st.vote_ref();
                let heard = st.vote_last_modified().max(beacon_contact.last_for(vote));
                let recent =
                    heard.is_some_and(|at| Instant::now().saturating_duration_since(at) <= lease);
                let leader_alive = if st.server_state == ServerState::Leader {
                    !stepped_down
                } else {
                    vote.committed && vote.leader_id.voted_for() != Some(id) && recent
                };
                // Stood moments ago and votes for itself, not yet elected.
                let standing = st.server_state != ServerState::Leader
                    && !vote.committed
                    && vote.leader_id.voted_for() == Some(id)
                    && recent;
                (vote.leader_id.term, leader_alive, standing)
            })
            .await
            .map_err(|e| JudgeError(e.to_string()))?;
        let last_log_id = self
            .log
            .last_log_id()
            .map_err(|e| JudgeError(e.to_string()))?;
        Ok(VoterView {
            term,
            last_log_id,
            leader_alive,
            id,
            contest: Contest {
                standing,
                ..Contest::default()
            },
        })
    }

    /// Answers `request`. A leader that stepped down and refuses a candidate
    /// for its shorter log sends one heartbeat (at most one per
    /// [`STEPPED_DOWN_PROBE`], so its heartbeats do not keep renewing the
    /// followers' leases under other candidates' elections): a majority that
    /// hears it again takes it back, where that candidate could never win.
    pub async fn answer(&self, request: &PreVoteRequest) -> Result<PreVoteAnswer, JudgeError> {
        let mut view = self.view().await?;
        let answer = {
            let mut contest = self.contest();
            view.contest.asking = contest.asking;
            // A promise binds for a lease, as a leader's message would.
            view.contest.promised = contest
                .promised
                .filter(|(_, _, at)| at.elapsed() <= self.lease)
                .map(|(candidate, log, _)| (candidate, log));
            let answer = pre_vote::decide(request, &view);
            if answer.granted() && request.candidate != self.id {
                contest.promised = Some((request.candidate, request.last_log_id, Instant::now()));
            }
            answer
        };
        if answer.refusal == Some(Refusal::LogBehind)
            && *self.stepped_down.borrow()
            && self.probe_due()
        {
            let _ = self.raft.trigger().heartbeat().await;
        }
        tracing::debug!(
            candidate = request.candidate,
            term = request.term,
            refusal = ?answer.refusal,
            "pre-vote asked"
        );
        Ok(answer)
    }

    /// True, and noted, when no probe went out within [`STEPPED_DOWN_PROBE`].
    fn probe_due(&self) -> bool {
        let mut probed = self.probed.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let due = probed.is_none_or(|at| now.saturating_duration_since(at) >= STEPPED_DOWN_PROBE);
        if due {
            *probed = Some(now);
        }
        due
    }
}
