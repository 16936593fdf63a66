//! Which pairs of a local cluster's processes are parted, and the requests
//! that change it. Pure: the proxy asks [`Cuts::parts`] for every byte and
//! datagram it would carry.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// A request to the proxy, one JSON line on its control socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Request {
    /// Part each process of the first list from each of the second, both
    /// ways. Cuts add up.
    Cut(Vec<String>, Vec<String>),
    /// Lift every cut.
    Heal,
}

/// The proxy's answer: `error` when nothing was done, and why; `warning`
/// when part of a cut cannot be made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub error: Option<String>,
    #[serde(default)]
    pub warning: Option<String>,
}

/// The parted pairs, each kept once with the smaller name first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cuts {
    pairs: BTreeSet<(String, String)>,
}

impl Cuts {
    /// Applies `request` for a cluster whose processes are `members`; a
    /// request naming a process the cluster lacks, or one on both sides,
    /// changes nothing. The answer names the pairs the proxy cannot part:
    /// two agents reach each other directly.
    pub fn apply<V>(
        &mut self,
        request: &Request,
        members: &BTreeMap<String, V>,
    ) -> Result<Option<String>, String> {
        match request {
            Request::Heal => {
                self.pairs.clear();
                Ok(None)
            }
            Request::Cut(one, other) => {
                if let Some(unknown) = one.iter().chain(other).find(|n| !members.contains_key(*n)) {
                    return Err(format!(
                        "no process named {unknown} behind this cluster's fault proxy (there are: {})",
                        members.keys().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
                if let Some(both) = one.iter().find(|a| other.contains(a)) {
                    return Err(format!("{both} is on both sides of the cut"));
                }
                let mut unparted = Vec::new();
                for a in one {
                    for b in other {
                        if is_agent(a) && is_agent(b) {
                            unparted.push(format!("{a}/{b}"));
                        }
                        self.pairs.insert(ordered(a, b));
                    }
                }
                Ok((!unparted.is_empty()).then(|| {
                    format!(
                        "agents reach each other directly, not through the fault proxy: {} stay connected (a --netns cluster parts them too)",
                        unparted.join(", ")
                    )
                }))
            }
        }
    }

    /// Whether traffic between `from` and `to` is dropped. A caller the
    /// proxy cannot name (a client on this machine) is never parted, as the
    /// machine itself is never cut off in a `--netns` cluster either.
    pub fn parts(&self, from: Option<&str>, to: &str) -> bool {
        from.is_some_and(|from| self.pairs.contains(&ordered(from, to)))
    }
}

fn is_agent(name: &str) -> bool {
    !name.starts_with("controller-")
}

fn ordered(a: &str, b: &str) -> (String, String) {
    if a <= b {
        (a.to_string(), b.to_string())
    } else {
        (b.to_string(), a.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members() -> BTreeMap<String, ()> {
        [
            "controller-1",
            "controller-2",
            "controller-3",
            "agent-gpu01",
        ]
        .into_iter()
        .map(|n| (n.to_string(), ()))
        .collect()
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_cut_parts_both_ways_and_only_the_pairs_named() {
        let mut cuts = Cuts::default();
        let cut = Request::Cut(
            names(&["controller-1"]),
            names(&["controller-2", "agent-gpu01"]),
        );
        assert_eq!(cuts.apply(&cut, &members()), Ok(None));
        assert!(cuts.parts(Some("controller-1"), "controller-2"));
        assert!(cuts.parts(Some("controller-2"), "controller-1"));
        assert!(cuts.parts(Some("agent-gpu01"), "controller-1"));
        assert!(!cuts.parts(Some("controller-3"), "controller-1"));
        assert!(!cuts.parts(Some("controller-2"), "controller-3"));
        assert!(
            !cuts.parts(None, "controller-1"),
            "this machine is never cut off"
        );
    }

    #[test]
    fn cuts_add_up_until_heal() {
        let mut cuts = Cuts::default();
        let m = members();
        cuts.apply(
            &Request::Cut(names(&["controller-1"]), names(&["controller-2"])),
            &m,
        )
        .unwrap();
        cuts.apply(
            &Request::Cut(names(&["controller-3"]), names(&["controller-2"])),
            &m,
        )
        .unwrap();
        assert!(cuts.parts(Some("controller-1"), "controller-2"));
        assert!(cuts.parts(Some("controller-3"), "controller-2"));
        cuts.apply(&Request::Heal, &m).unwrap();
        assert_eq!(cuts, Cuts::default());
    }

    #[test]
    fn pairs_of_agents_are_said_to_stay_connected() {
        let mut m = members();
        m.insert("agent-gpu02".into(), ());
        let mut cuts = Cuts::default();
        let halves = Request::Cut(
            names(&["controller-1", "agent-gpu01"]),
            names(&["controller-2", "agent-gpu02"]),
        );
        let warning = cuts.apply(&halves, &m).unwrap().unwrap();
        assert!(
            warning.contains("agent-gpu01/agent-gpu02 stay connected"),
            "{warning}"
        );
        assert!(cuts.parts(Some("agent-gpu01"), "controller-2"));
    }

    #[test]
    fn a_bad_request_changes_nothing() {
        let mut cuts = Cuts::default();
        let m = members();
        let unknown = Request::Cut(names(&["controller-1"]), names(&["controller-9"]));
        let err = cuts.apply(&unknown, &m).unwrap_err();
        assert!(
            err.contains("controller-9") && err.contains("controller-2"),
            "{err}"
        );
        let both = Request::Cut(
            names(&["controller-1", "controller-2"]),
            names(&["controller-2"]),
        );
        assert!(cuts.apply(&both, &m).unwrap_err().contains("both sides"));
        assert_eq!(cuts, Cuts::default());
    }

    #[test]
    fn requests_travel_as_one_json_line() {
        let cut = Request::Cut(names(&["a"]), names(&["b", "c"]));
        let line = serde_json::to_string(&cut).unwrap();
        assert!(!line.contains('\n'));
        assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), cut);
    }
}
