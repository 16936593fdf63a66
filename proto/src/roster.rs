//! The node roster: every node defined in the cluster, with where its agent
//! answers other agents. The leader hands it to each agent; during an outage
//! of the controllers the agents ask each other, over the step channel,
//! whether they reach a leader, and keep their jobs only while a majority of
//! the roster answers that none does (see the controller's `node_majority`
//! and the agent's `outage`).
//!
//! Two rosters are the same when their digests are: a digest covers the
//! node names only (an agent that moves to another port changes the address
//! book, not who counts).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Which nodes count: SHA-256 over the sorted node names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RosterDigest(pub [u8; 32]);

impl RosterDigest {
    /// The digest of `names` (in any order; each counted once).
    pub fn of<'a>(names: impl IntoIterator<Item = &'a str>) -> RosterDigest {
        let mut sorted: Vec<&str> = names.into_iter().collect();
        sorted.sort_unstable();
        sorted.dedup();
        let mut hasher = Sha256::new();
        for name in sorted {
            // Length-prefixed, so ["ab", "c"] and ["a", "bc"] differ.
            hasher.update((name.len() as u64).to_le_bytes());
            hasher.update(name.as_bytes());
        }
        RosterDigest(hasher.finalize().into())
    }
}

impl std::fmt::Display for RosterDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for byte in &self.0[..6] {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// Every node of the cluster and its agent's step address (`None`: its agent
/// gave none, or has never registered).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Roster {
    /// The digest of the member names.
    pub digest: RosterDigest,
    /// Node name → the agent's step address.
    pub members: BTreeMap<String, Option<String>>,
}

impl Roster {
    /// The roster of `members`.
    pub fn new(members: BTreeMap<String, Option<String>>) -> Roster {
        Roster {
            digest: RosterDigest::of(members.keys().map(String::as_str)),
            members,
        }
    }

    /// How many members make a majority: more than half.
    pub fn majority(&self) -> usize {
        majority_of(self.members.len())
    }
}

/// More than half of `n`.
pub fn majority_of(n: usize) -> usize {
    n / 2 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_covers_the_names_only_and_in_no_order() {
        let ab = RosterDigest::of(["gpu01", "gpu02"]);
        assert_eq!(ab, RosterDigest::of(["gpu02", "gpu01", "gpu02"]));
        assert_ne!(ab, RosterDigest::of(["gpu01"]));
        assert_ne!(RosterDigest::of(["ab", "c"]), RosterDigest::of(["a", "bc"]));
        let one = Roster::new(BTreeMap::from([
            ("gpu01".to_string(), Some("h1:1".to_string())),
            ("gpu02".to_string(), None),
        ]));
        let moved = Roster::new(BTreeMap::from([
            ("gpu01".to_string(), Some("h1:2".to_string())),
            ("gpu02".to_string(), None),
        ]));
        assert_eq!(one.digest, moved.digest);
        assert_eq!(one.digest, ab);
    }

    #[test]
    fn a_majority_is_more_than_half() {
        assert_eq!(majority_of(1), 1);
        assert_eq!(majority_of(2), 2);
        assert_eq!(majority_of(3), 2);
        assert_eq!(majority_of(4), 3);
        assert_eq!(majority_of(5), 3);
    }
}
