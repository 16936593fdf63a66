//! Elections only when a leader is really gone: pre-vote, and the step-down
//! of a leader no majority answers (check-quorum), which openraft 0.9 lacks.
//!
//! openraft's own election timer is off (`enable_elect: false`). Instead the
//! [`elector`] of each voter watches how long ago it last heard from a leader;
//! past an election timeout it first asks every voter whether it *would* vote
//! for it at the next term ([`pre_vote`]), without changing any term. Only
//! when a majority of every voter set would does it call openraft's election.
//! A replica cut off from the others therefore never raises its term, and
//! cannot depose a healthy leader when it comes back; a replica that still
//! hears from a live leader refuses, so neither can a replica that lost only
//! its own link to the leader ([`judge`] answers: granted when no live leader
//! is known and the candidate's log is at least as complete; terms and
//! membership are left to the real vote, see [`pre_vote::decide`]).
//!
//! A leader that no majority has acknowledged for
//! [`crate::RaftTiming::quorum_contact_timeout`] steps down (see
//! [`crate::leadership`]): it stops heartbeating, so the replicas still in
//! touch with each other elect a new leader, refuses proposals, answers as a
//! replica that knows no leader, and grants pre-votes. openraft keeps its
//! internal leader state until it sees the higher term, which changes nothing
//! it can do: it proposes nothing and sends no heartbeats. While stepped down
//! it sends one heartbeat every [`STEPPED_DOWN_PROBE`] (and one whenever it
//! refuses a pre-vote for a shorter log), so a majority that can hear it again
//! takes it back instead of waiting for an election it could not win.
//!
//! openraft 0.9's core waits for the fsync of each append, so a leader whose
//! disk holds a sync sends no heartbeats meanwhile. Its [`beacon`] speaks for
//! it, from outside the core, while its core has answered within
//! [`crate::RaftTiming::core_hold_limit`]: a slow disk costs no election, a
//! stalled one still does.

pub mod ballot;
pub mod beacon;
pub mod elector;
pub mod judge;
pub mod pre_vote;
pub mod timer;

use std::time::Duration;

/// How often a leader that stepped down sends one heartbeat to find out
/// whether a majority answers again.
pub const STEPPED_DOWN_PROBE: Duration = Duration::from_secs(2);
