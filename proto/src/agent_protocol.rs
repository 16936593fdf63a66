//! Versions of the agent channel: which ones this build speaks, how an
//! agent and a controller agree on one in their first exchange, and the
//! refusal that names both sides' versions when they cannot.
//!
//! Frames are postcard, which is not self-describing: a message gains a
//! field only as a new variant, and a peer that does not know a variant
//! cannot read it at all. A protocol version says which variants a session
//! may use; each side speaks a range of them, and the session uses the
//! newest both speak.
//!
//! - **1**: every build before versions (up to 4d20653). The hello is
//!   [`AgentMessage::Hello`](crate::agent::AgentMessage::Hello), answered by
//!   `Welcome`. Its frames are frozen in `tests/fixtures/agent-protocol-1.hex`.
//! - **2**: the hello is `HelloV2` and names the agent's range; the
//!   controller answers `WelcomeV2` with the version it chose and its own
//!   build, or `Refused` naming both ranges. A protocol-1 controller cannot
//!   read `HelloV2` and closes the connection unanswered; an agent that sees
//!   that says hello again in protocol 1.
//!
//! Upgrade order, as with Slurm's daemons: the controllers first, then the
//! agents. A controller keeps speaking the protocols of the previous
//! release, so old agents keep running while the controllers are upgraded.

use serde::{Deserialize, Serialize};

/// The first agent protocol (the hello without a version).
pub const UNVERSIONED: u32 = 1;

/// The agent protocols this build speaks, on either side of the channel.
pub const SPOKEN: ProtocolRange = ProtocolRange {
    oldest: 1,
    newest: 2,
};

/// The versions one side speaks, oldest to newest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtocolRange {
    /// The oldest version spoken.
    pub oldest: u32,
    /// The newest version spoken.
    pub newest: u32,
}

impl ProtocolRange {
    /// Only `version`.
    pub const fn only(version: u32) -> ProtocolRange {
        ProtocolRange {
            oldest: version,
            newest: version,
        }
    }

    /// Whether `version` is in the range.
    pub fn speaks(self, version: u32) -> bool {
        (self.oldest..=self.newest).contains(&version)
    }

    /// The version a controller speaking `self` uses with an agent speaking
    /// `agent`: the newest both speak.
    pub fn agree(self, agent: ProtocolRange) -> Result<u32, ProtocolMismatch> {
        let newest = self.newest.min(agent.newest);
        if agent.oldest > agent.newest || newest < self.oldest.max(agent.oldest) {
            return Err(ProtocolMismatch {
                controller: self,
                agent,
            });
        }
        Ok(newest)
    }
}

impl std::fmt::Display for ProtocolRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.oldest == self.newest {
            write!(f, "{}", self.oldest)
        } else {
            write!(f, "{}–{}", self.oldest, self.newest)
        }
    }
}

/// An agent and a controller share no protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolMismatch {
    /// What the controller speaks.
    pub controller: ProtocolRange,
    /// What the agent speaks.
    pub agent: ProtocolRange,
}

impl ProtocolMismatch {
    /// The refusal, naming both sides' versions and builds and what to
    /// upgrade first.
    pub fn explain(&self, node: &str, agent_build: &str, controller_build: &str) -> String {
        let (agent, controller) = (self.agent, self.controller);
        if agent.oldest > agent.newest {
            return format!(
                "node '{node}''s agent (corral {agent_build}) sent a malformed hello: its agent protocols run backwards ({} to {}); this controller (corral {controller_build}) speaks {controller}",
                agent.oldest, agent.newest
            );
        }
        let what = if agent.newest < controller.oldest {
            format!(
                "upgrade corral-agent on node '{node}' to the controllers' release ({controller_build})"
            )
        } else {
            format!(
                "upgrade the controllers to corral {agent_build} first (every one of them), then the agents"
            )
        };
        format!(
            "node '{node}''s agent (corral {agent_build}) speaks agent protocol {agent} and this controller (corral {controller_build}) speaks {controller}: {what}"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn range(oldest: u32, newest: u32) -> ProtocolRange {
        ProtocolRange { oldest, newest }
    }

    #[test]
    fn the_newest_version_both_speak_is_used() {
        assert_eq!(range(1, 2).agree(range(1, 2)), Ok(2));
        assert_eq!(range(1, 2).agree(ProtocolRange::only(1)), Ok(1));
        assert_eq!(range(2, 4).agree(range(1, 3)), Ok(3));
        assert_eq!(range(1, 2).agree(range(2, 9)), Ok(2));
    }

    #[test]
    fn ranges_that_do_not_meet_are_refused_naming_both_and_the_side_to_upgrade() {
        let old_agent = range(2, 3).agree(ProtocolRange::only(1)).unwrap_err();
        let said = old_agent.explain("gpu-a01", "0.1.0", "0.3.0");
        assert!(said.contains("speaks agent protocol 1 and"), "{said}");
        assert!(
            said.contains("this controller (corral 0.3.0) speaks 2–3"),
            "{said}"
        );
        assert!(
            said.contains("upgrade corral-agent on node 'gpu-a01'"),
            "{said}"
        );

        let new_agent = range(1, 2).agree(range(4, 5)).unwrap_err();
        let said = new_agent.explain("gpu-a01", "0.5.0", "0.1.0");
        assert!(said.contains("agent protocol 4–5"), "{said}");
        assert!(
            said.contains("upgrade the controllers to corral 0.5.0 first"),
            "{said}"
        );
    }

    #[test]
    fn a_backwards_range_meets_nothing_and_is_called_malformed() {
        let mismatch = range(1, 2).agree(range(3, 1)).unwrap_err();
        let said = mismatch.explain("gpu-a01", "0.2.0", "0.1.0");
        assert!(said.contains("malformed hello"), "{said}");
        assert!(!said.contains("upgrade"), "{said}");
    }

    #[test]
    fn this_build_still_speaks_the_unversioned_protocol() {
        // Dropping protocol 1 strands every agent of the previous release.
        // Do it only a release after the one that introduced protocol 2.
        assert!(SPOKEN.speaks(UNVERSIONED));
    }
}
