//! Node states as Slurm 22.05's sinfo names, sorts and filters them: a node's
//! base state (`idle`, `mixed`, `allocated`, `down`) with the drain and
//! not-responding flags, printed compact (`%t`: `mix`, `drng`, `down*`), long
//! (`%T`: `draining`, `drained`) or complete (`idle+drain`); the `-t/--states`
//! list (`idle,mix,drain`, `drain&idle`) parsed and matched as sinfo does; and
//! how many of a node's GPUs a new job could get now.
//!
//! corral's mapping: a node whose agent is not alive is `down`, marked `*`
//! (not responding) when corral itself declared it down (lease lapsed, never
//! registered) and unmarked when an operator did; an up node with live
//! attempts is `allocated` when held exclusively, when all its GPUs or all its
//! CPUs are held, and `mixed` otherwise. The leader's "not responding yet"
//! set (before a node is declared down) does not reach clients, so an up node
//! is never marked `*`.

use corral_state::node::{Availability, Node};
use thiserror::Error;

/// Slurm's base node states, numbered as Slurm numbers them (sinfo sorts by
/// the number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BaseState {
    /// `unk`: a line without nodes sorts as this.
    Unknown = 0,
    /// The agent is not alive.
    Down = 1,
    /// Nothing allocated.
    Idle = 2,
    /// Fully allocated.
    Allocated = 3,
    /// Partly allocated.
    Mixed = 5,
}

/// Slurm's `NODE_STATE_DRAIN` flag.
const DRAIN_FLAG: u32 = 0x200;
/// Slurm's `NODE_STATE_NO_RESPOND` flag.
const NO_RESPOND_FLAG: u32 = 0x800;

/// A node's state as sinfo shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlurmState {
    /// The base state.
    pub base: BaseState,
    /// Drain requested (no new work).
    pub drain: bool,
    /// The node does not respond (`*`).
    pub no_respond: bool,
}

/// The state sinfo would show for `node`.
pub fn slurm_state(node: &Node) -> SlurmState {
    let (base, no_respond) = match &node.availability {
        Availability::Down(why) => (BaseState::Down, why.by == "corral"),
        Availability::Up { .. } if node.allocations.is_empty() => (BaseState::Idle, false),
        Availability::Up { .. } => {
            let all_gpus_used =
                !node.gpus.is_empty() && node.gpus.iter().all(|g| g.allocated_to.is_some());
            if node.is_held_exclusively() || all_gpus_used || node.free_cpus() == 0 {
                (BaseState::Allocated, false)
            } else {
                (BaseState::Mixed, false)
            }
        }
    };
    SlurmState {
        base,
        drain: node.drain.is_some(),
        no_respond,
    }
}

impl SlurmState {
    /// What a line without nodes sorts as.
    pub const NONE: SlurmState = SlurmState {
        base: BaseState::Unknown,
        drain: false,
        no_respond: false,
    };

    /// Drained with work still running (`drng`).
    pub fn is_draining(self) -> bool {
        self.drain && matches!(self.base, BaseState::Allocated | BaseState::Mixed)
    }

    /// Drained and empty (`drain`).
    pub fn is_drained(self) -> bool {
        self.drain && !self.is_draining()
    }

    /// `%t`: `idle`, `mix`, `alloc`, `down`, `drng`, `drain`, `unk`, with `*`
    /// when not responding.
    pub fn compact(self) -> String {
        let name = if self.is_draining() {
            "drng"
        } else if self.drain {
            "drain"
        } else {
            match self.base {
                BaseState::Unknown => "unk",
                BaseState::Down => "down",
                BaseState::Idle => "idle",
                BaseState::Allocated => "alloc",
                BaseState::Mixed => "mix",
            }
        };
        self.starred(name)
    }

    /// `%T`: `idle`, `mixed`, `allocated`, `down`, `draining`, `drained`,
    /// `unknown`, with `*` when not responding.
    pub fn long(self) -> String {
        let name = if self.is_draining() {
            "draining"
        } else if self.drain {
            "drained"
        } else {
            self.base_name()
        };
        self.starred(name)
    }

    /// `-O statecomplete`: the base state and every flag, `idle+drain`.
    pub fn complete(self) -> String {
        let mut text = self.base_name().to_string();
        if self.drain {
            text.push_str("+drain");
        }
        if self.no_respond {
            text.push_str("+not_responding");
        }
        text
    }

    /// Slurm's number for the state; sinfo's default order is by this number,
    /// highest first.
    pub fn number(self) -> u32 {
        let mut n = self.base as u32;
        if self.drain {
            n |= DRAIN_FLAG;
        }
        if self.no_respond {
            n |= NO_RESPOND_FLAG;
        }
        n
    }

    fn base_name(self) -> &'static str {
        match self.base {
            BaseState::Unknown => "unknown",
            BaseState::Down => "down",
            BaseState::Idle => "idle",
            BaseState::Allocated => "allocated",
            BaseState::Mixed => "mixed",
        }
    }

    fn starred(self, name: &str) -> String {
        if self.no_respond {
            format!("{name}*")
        } else {
            name.to_string()
        }
    }
}

/// GPUs a new job could get now: healthy, not drained, unallocated, on a node
/// that is up, not drained and not held exclusively.
pub fn free_gpus(node: &Node) -> usize {
    if !node.accepts_work() || node.is_held_exclusively() {
        return 0;
    }
    node.gpus.iter().filter(|g| g.is_free_and_usable()).count()
}

/// One entry of a `-t` list, as sinfo resolves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StateSpec {
    /// This base state (`idle`, `down`, `mixed`, `unknown`).
    Base(BaseState),
    /// Anything with CPUs allocated (`alloc`, which includes `mix` and `drng`).
    Allocated,
    /// The drain flag, whatever the base (`drain`).
    Drain,
    /// Drained with work running (`draining`, `drng`).
    Draining,
    /// Drained and empty (`drained`).
    Drained,
    /// Not responding (`no_respond`).
    NoRespond,
    /// A state corral nodes are never in (`future`, `fail`, `maint`, ...).
    Never,
}

/// sinfo's answer to a state name it does not know, listing those it does.
pub const VALID_STATES: &str = "unknown,down,idle,allocated,?,mixed,future,drain,drained,draining,no_respond,reserved,perfctrs,cloud,completing,powering_down,powered_down,power_down,powering_up,fail,maint,reboot,reboot^,unknown";

/// A `-t` list that names a state sinfo does not know.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("Bad state string: \"{0}\"")]
pub struct BadState(pub String);

/// The parsed `-t/--states` list: a node matches any entry (`,`) or, when the
/// list holds `&`, every entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateFilter {
    specs: Vec<StateSpec>,
    every: bool,
}

/// Parses a `-t` list as sinfo does: each name matches a state whose compact or
/// long name it begins (case-insensitive, the base states first: `i` is idle,
/// `d` down, `dr` drain), then the flag names; `all` matches every node.
pub fn parse_states(list: &str) -> Result<StateFilter, BadState> {
    if list.eq_ignore_ascii_case("all") {
        return Ok(StateFilter {
            specs: Vec::new(),
            every: false,
        });
    }
    let specs = list
        .split([',', '&'])
        .filter(|s| !s.is_empty())
        .map(|s| state_spec(s).ok_or_else(|| BadState(s.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(StateFilter {
        specs,
        every: list.contains('&'),
    })
}

/// The base states in Slurm's order, by compact and long name (`?` is the
/// retired ERROR state).
const BASE_NAMES: [(&str, &str, Option<BaseState>); 7] = [
    ("UNK", "UNKNOWN", Some(BaseState::Unknown)),
    ("DOWN", "DOWN", Some(BaseState::Down)),
    ("IDLE", "IDLE", Some(BaseState::Idle)),
    ("ALLOC", "ALLOCATED", None),
    ("?", "?", None),
    ("MIX", "MIXED", Some(BaseState::Mixed)),
    ("FUTR", "FUTURE", None),
];

/// The flag names sinfo tries after the base states, in its order.
const FLAG_NAMES: [(&[&str], StateSpec); 17] = [
    (&["PLANNED", "PLND"], StateSpec::Never),
    (&["DRAIN"], StateSpec::Drain),
    (&["DRAINED"], StateSpec::Drained),
    (&["RESV", "RESERVED"], StateSpec::Never),
    (&["PERFCTRS", "NPC"], StateSpec::Never),
    (&["DRAINING", "DRNG"], StateSpec::Draining),
    (&["COMPLETING", "COMP"], StateSpec::Never),
    (&["NO_RESPOND"], StateSpec::NoRespond),
    (&["POWERING_DOWN", "POWRING_DN"], StateSpec::Never),
    (&["POWERED_DOWN", "POWERED_DN"], StateSpec::Never),
    (&["POWER_DOWN", "POW_DN"], StateSpec::Never),
    (&["POWERING_UP", "POW_UP"], StateSpec::Never),
    (&["FAIL"], StateSpec::Never),
    (&["MAINT"], StateSpec::Never),
    (&["REBOOT_REQUESTED", "REBOOT^"], StateSpec::Never),
    (&["REBOOT_ISSUED", "REBOOT@"], StateSpec::Never),
    (&["CLOUD"], StateSpec::Never),
];

fn state_spec(name: &str) -> Option<StateSpec> {
    let begins =
        |full: &str| full.len() >= name.len() && full[..name.len()].eq_ignore_ascii_case(name);
    for (compact, long, base) in BASE_NAMES {
        if begins(compact) || begins(long) {
            return Some(match base {
                Some(base) => StateSpec::Base(base),
                None if compact == "ALLOC" => StateSpec::Allocated,
                None => StateSpec::Never,
            });
        }
    }
    FLAG_NAMES
        .iter()
        .find(|(names, _)| names.iter().any(|n| begins(n)))
        .map(|(_, spec)| *spec)
}

impl StateFilter {
    /// The list `-R` uses when no `-t` is given: down, failing or drained nodes.
    pub fn reasons() -> StateFilter {
        StateFilter {
            specs: vec![
                StateSpec::Base(BaseState::Down),
                StateSpec::Never,
                StateSpec::Drain,
            ],
            every: false,
        }
    }

    /// Whether `node` is shown.
    pub fn matches(&self, node: &Node) -> bool {
        if self.specs.is_empty() {
            return true;
        }
        let state = slurm_state(node);
        let one = |spec: &StateSpec| match spec {
            StateSpec::Base(base) => state.base == *base,
            StateSpec::Allocated => !node.allocations.is_empty(),
            StateSpec::Drain => state.drain,
            StateSpec::Draining => state.is_draining(),
            StateSpec::Drained => state.is_drained(),
            StateSpec::NoRespond => state.no_respond,
            StateSpec::Never => false,
        };
        if self.every {
            self.specs.iter().all(one)
        } else {
            self.specs.iter().any(one)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::test_jobs::{nodes, scenario};

    fn named<'a>(all: &'a [Node], name: &str) -> &'a Node {
        all.iter().find(|n| n.name == name).expect("node")
    }

    #[test]
    fn names_of_the_scenario_nodes() {
        let all = nodes(&scenario());
        let shown: Vec<(String, String, String)> = all
            .iter()
            .map(|n| {
                let s = slurm_state(n);
                (s.compact(), s.long(), s.complete())
            })
            .collect();
        let expected = [
            ("alloc", "allocated", "allocated"),
            ("down", "down", "down"),
            ("idle", "idle", "idle"),
            ("alloc", "allocated", "allocated"),
        ];
        let expected: Vec<(String, String, String)> = expected
            .iter()
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
            .collect();
        assert_eq!(shown, expected);
    }

    #[test]
    fn drain_flags_and_not_responding() {
        let all = nodes(&scenario());
        let mut busy = named(&all, "n1").clone();
        busy.drain = down_reason(named(&all, "n2"));
        let draining = slurm_state(&busy);
        assert_eq!(
            (draining.compact(), draining.long()),
            ("drng".to_string(), "draining".to_string())
        );
        let mut lost = named(&all, "n2").clone();
        if let Availability::Down(why) = &mut lost.availability {
            why.by = "corral".into();
        }
        assert_eq!(slurm_state(&lost).compact(), "down*");
        lost.drain = busy.drain.clone();
        let state = slurm_state(&lost);
        assert_eq!(
            (state.compact(), state.long(), state.complete()),
            (
                "drain*".to_string(),
                "drained*".to_string(),
                "down+drain+not_responding".to_string()
            )
        );
        assert!(state.number() > slurm_state(&busy).number());
    }

    /// The reason `node` is down, as a drain reason for another node.
    fn down_reason(node: &Node) -> Option<corral_state::node::StateReason> {
        match &node.availability {
            Availability::Down(why) => Some(why.clone()),
            Availability::Up { .. } => None,
        }
    }

    #[test]
    fn state_lists_match_as_sinfo_does() {
        let all = nodes(&scenario());
        let shown = |list: &str| -> Vec<String> {
            let filter = parse_states(list).expect("valid");
            all.iter()
                .filter(|n| filter.matches(n))
                .map(|n| n.name.clone())
                .collect()
        };
        assert_eq!(shown("idle"), ["n3"]);
        assert_eq!(shown("i,d"), ["n2", "n3"]);
        assert_eq!(shown("ALLOC"), ["n1", "n4"]);
        assert_eq!(shown("mix,drain"), Vec::<String>::new());
        assert_eq!(shown("all"), ["n1", "n2", "n3", "n4"]);
        assert_eq!(shown("alloc&idle"), Vec::<String>::new());
        assert_eq!(shown("fail"), Vec::<String>::new());
        assert_eq!(parse_states("bogus"), Err(BadState("bogus".into())));
        assert_eq!(BadState("x".into()).to_string(), "Bad state string: \"x\"");
    }

    #[test]
    fn drained_nodes_match_their_base_state_and_drain() {
        let all = nodes(&scenario());
        let mut drained = named(&all, "n3").clone();
        drained.drain = down_reason(named(&all, "n2"));
        for list in ["idle", "drain", "drained", "dr"] {
            assert!(
                parse_states(list).expect("valid").matches(&drained),
                "{list}"
            );
        }
        assert!(!parse_states("draining").expect("valid").matches(&drained));
        assert!(StateFilter::reasons().matches(&drained));
        assert!(StateFilter::reasons().matches(named(&all, "n2")));
        assert!(!StateFilter::reasons().matches(named(&all, "n1")));
    }
}
