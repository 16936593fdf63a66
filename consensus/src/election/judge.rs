//! The asked side of a pre-vote: reads what this replica knows from its Raft
//! state and log, and decides with [`super::pre_vote::decide`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::ServerState;
use tokio::sync::watch;
use tokio::time::Instant;

use super::STEPPED_DOWN_PROBE;
use super::pre_vote::{self, PreVoteAnswer, PreVoteRequest, Refusal, VoterView};
use crate::log_store::LogStore;
use crate::types::{Raft, ReplicaId};

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
}

/// Why a pre-vote could not be judged: this replica's Raft stopped or its log
/// does not read.
#[derive(Debug, thiserror::Error)]
#[error("cannot judge a pre-vote: {0}")]
pub struct JudgeError(String);

impl Judge {
    /// A judge for replica `id`: `lease` is how long after a leader's last
    /// message it still counts as alive.
    pub fn new(
        id: ReplicaId,
        raft: Raft,
        log: LogStore,
        lease: Duration,
        stepped_down: watch::Receiver<bool>,
    ) -> Self {
        Judge {
            id,
            raft,
            log,
            lease,
            stepped_down,
            probed: Arc::default(),
        }
    }

    /// What this replica knows now.
    pub async fn view(&self) -> Result<VoterView, JudgeError> {
        let (id, lease) = (self.id, self.lease);
        let stepped_down = *self.stepped_down.borrow();
        let (term, leader_alive) = self
            .raft
            .with_raft_state(move |st| {
                let vote = st.vote_ref();
                let leader_alive = if st.server_state == ServerState::Leader {
                    !stepped_down
                } else {
                    vote.committed
                        && vote.leader_id.voted_for() != Some(id)
                        && st
                            .vote_last_modified()
                            .is_some_and(|at| Instant::now().saturating_duration_since(at) <= lease)
                };
                (vote.leader_id.term, leader_alive)
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
        })
    }

    /// Answers `request`. A leader that stepped down and refuses a candidate
    /// for its shorter log sends one heartbeat (at most one per
    /// [`STEPPED_DOWN_PROBE`], so its heartbeats do not keep renewing the
    /// followers' leases under other candidates' elections): a majority that
    /// hears it again takes it back, where that candidate could never win.
    pub async fn answer(&self, request: &PreVoteRequest) -> Result<PreVoteAnswer, JudgeError> {
        let answer = pre_vote::decide(request, &self.view().await?);
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
