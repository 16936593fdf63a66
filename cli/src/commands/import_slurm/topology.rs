//! topology.conf into `[topology]`: `SwitchName=` lines with `Nodes=` (leaf
//! switches) or `Switches=` (inner ones), as hostlists; and Slurm 23.11's
//! `BlockName=`/`BlockSizes=` for blocks. Nodes that slurm.conf does not
//! define are left out, and switches left empty with them.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use corral_controller::config::{BlockSection, SwitchSection, TopologySection};
use corral_state::slurm::hostlist;

use super::location::ImportError;
use super::notes::Notes;
use super::origins::Origins;
use super::parse::Pair;
use super::reasons;
use super::records::Sorted;
use super::values::{is_valid_name, list};

/// A switch as read, before empty ones are pruned.
struct Switch {
    head: Pair,
    nodes: Option<(Pair, Vec<String>, bool)>,
    children: Option<(Pair, Vec<String>)>,
}

/// Reads topology.conf (already sorted by SwitchName and BlockName) against
/// the defined nodes.
pub fn read(
    sorted: &Sorted,
    defined: &HashSet<String>,
    notes: &mut Notes,
    origins: &mut Origins,
) -> Result<TopologySection, ImportError> {
    let mut section = TopologySection::default();
    for pair in &sorted.settings {
        if pair.is("BlockSizes") {
            section.block_sizes = list(&pair.value)
                .iter()
                .map(|s| {
                    s.parse().map_err(|_| {
                        ImportError::at(
                            &pair.at,
                            format!("BlockSizes={}: '{s}' is not a whole number", pair.value),
                        )
                    })
                })
                .collect::<Result<_, _>>()?;
            origins.came_from("topology.block_sizes", pair);
        } else {
            notes.not_carried("", pair, "not a topology.conf key; nothing to carry");
        }
    }
    let mut switches = Vec::new();
    let mut names = BTreeSet::new();
    for record in sorted.of("SwitchName") {
        let head = &record.head;
        let name = head.value.trim();
        if !is_valid_name(name) {
            return Err(ImportError::at(
                &head.at,
                format!(
                    "SwitchName={} is not a name corral accepts; use letters, digits, '-', '_' or '.'",
                    head.value
                ),
            ));
        }
        if !names.insert(name.to_string()) {
            return Err(ImportError::at(
                &head.at,
                format!("switch {name} is defined twice; name each switch once"),
            ));
        }
        let mut switch = Switch {
            head: head.clone(),
            nodes: None,
            children: None,
        };
        for pair in &record.fields {
            let expand = || {
                hostlist::expand(&pair.value).map_err(|e| {
                    ImportError::at(&pair.at, format!("{}={}: {e}", pair.key, pair.value))
                })
            };
            if pair.is("Nodes") {
                let all = expand()?;
                let (known, unknown): (Vec<String>, Vec<String>) =
                    all.into_iter().partition(|n| defined.contains(n));
                if !unknown.is_empty() {
                    notes.not_carried(
                        "SwitchName",
                        pair,
                        format!(
                            "{} not defined by any NodeName line; left out of the switch",
                            hostlist::compress(&unknown)
                        ),
                    );
                }
                let whole = unknown.is_empty();
                switch.nodes = Some((pair.clone(), known, whole));
            } else if pair.is("Switches") {
                switch.children = Some((pair.clone(), expand()?));
            } else {
                let reason = reasons::topology_field(&pair.key)
                    .unwrap_or("not a topology.conf key; nothing to carry");
                notes.not_carried("SwitchName", pair, reason);
            }
        }
        match (&switch.nodes, &switch.children) {
            (Some(_), Some(_)) => {
                return Err(ImportError::at(
                    &head.at,
                    format!(
                        "switch {name} lists both Nodes= and Switches=; a switch holds nodes (a leaf) or switches, not both (Slurm refuses it too)"
                    ),
                ));
            }
            (None, None) => {
                return Err(ImportError::at(
                    &head.at,
                    format!("switch {name} lists neither Nodes= nor Switches=; give one"),
                ));
            }
            _ => switches.push(switch),
        }
    }
    for (index, (switch, written)) in prune(switches, notes).into_iter().enumerate() {
        origins.set(
            format!("topology.switches[{index}]"),
            format!("SwitchName={} ({})", switch.name, written),
        );
        section.switches.push(switch);
    }
    for record in sorted.of("BlockName") {
        let head = &record.head;
        let Some(pair) = record.get("Nodes") else {
            return Err(ImportError::at(
                &head.at,
                format!("block {} lists no Nodes=; give them", head.value),
            ));
        };
        let all = hostlist::expand(&pair.value)
            .map_err(|e| ImportError::at(&pair.at, format!("Nodes={}: {e}", pair.value)))?;
        let known: Vec<String> = all
            .iter()
            .filter(|n| defined.contains(*n))
            .cloned()
            .collect();
        if known.len() < all.len() {
            notes.not_carried(
                "BlockName",
                pair,
                "names nodes no NodeName line defines; they are left out of the block",
            );
        }
        if known.is_empty() {
            continue;
        }
        let nodes = if known.len() == all.len() {
            pair.value.trim().to_string()
        } else {
            hostlist::compress(&known)
        };
        origins.set(
            format!("topology.blocks[{}]", section.blocks.len()),
            format!("BlockName={} ({})", head.value, head.at),
        );
        section.blocks.push(BlockSection {
            name: head.value.trim().to_string(),
            nodes,
        });
    }
    Ok(section)
}

/// Drops leaves left without nodes and inner switches left without children
/// (repeatedly), and references to undefined switches.
fn prune(switches: Vec<Switch>, notes: &mut Notes) -> Vec<(SwitchSection, String)> {
    let mut alive: BTreeMap<String, bool> = switches
        .iter()
        .map(|s| {
            let has_nodes = s.nodes.as_ref().is_none_or(|(_, n, _)| !n.is_empty());
            (s.head.value.trim().to_string(), has_nodes)
        })
        .collect();
    for switch in &switches {
        if let Some((pair, children)) = &switch.children {
            let unknown: Vec<&String> = children
                .iter()
                .filter(|c| !alive.contains_key(*c))
                .collect();
            if !unknown.is_empty() {
                notes.not_carried(
                    "SwitchName",
                    pair,
                    format!(
                        "names switches topology.conf does not define ({}); they are left out",
                        unknown
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
        }
    }
    loop {
        let mut changed = false;
        for switch in &switches {
            let name = switch.head.value.trim();
            let Some((_, children)) = &switch.children else {
                continue;
            };
            let live = children
                .iter()
                .any(|c| alive.get(c).copied().unwrap_or(false));
            if !live && alive.get(name).copied().unwrap_or(false) {
                alive.insert(name.to_string(), false);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut out = Vec::new();
    for switch in switches {
        let name = switch.head.value.trim().to_string();
        if !alive.get(&name).copied().unwrap_or(false) {
            notes.not_carried(
                "SwitchName",
                &switch.head,
                "no node under this switch is defined by a NodeName line, so the switch is left out",
            );
            continue;
        }
        let written = switch.head.at.to_string();
        let section = match (switch.nodes, switch.children) {
            (Some((pair, known, whole)), _) => SwitchSection {
                name,
                nodes: Some(if whole {
                    pair.value.trim().to_string()
                } else {
                    hostlist::compress(&known)
                }),
                switches: None,
            },
            (None, Some((pair, children))) => {
                let live: Vec<String> = children
                    .iter()
                    .filter(|c| alive.get(*c).copied().unwrap_or(false))
                    .cloned()
                    .collect();
                SwitchSection {
                    name,
                    nodes: None,
                    switches: Some(if live.len() == children.len() {
                        pair.value.trim().to_string()
                    } else {
                        hostlist::compress(&live)
                    }),
                }
            }
            (None, None) => continue,
        };
        out.push((section, written));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::notes::Kind;
    use super::super::parse::{Item, parse};
    use super::super::records::sort;
    use super::*;

    fn import(text: &str, nodes: &str) -> Result<(TopologySection, Notes), ImportError> {
        let lines: Vec<Vec<Pair>> = parse(&Arc::from("topology.conf"), text)
            .unwrap()
            .into_iter()
            .filter_map(|i| match i {
                Item::Pairs(p) => Some(p),
                Item::Include { .. } => None,
            })
            .collect();
        let sorted = sort(lines, &["SwitchName", "BlockName"], &[]);
        let defined: HashSet<String> = hostlist::expand(nodes).unwrap().into_iter().collect();
        let mut notes = Notes::default();
        let section = read(&sorted, &defined, &mut notes, &mut Origins::default())?;
        Ok((section, notes))
    }

    #[test]
    fn the_man_pages_tree() {
        let (t, notes) = import(
            "SwitchName=s0 Nodes=dev[0-5]\nSwitchName=s1 Nodes=dev[6-11]\nSwitchName=s2 Nodes=dev[12-17]\nSwitchName=s3 Switches=s[0-2] LinkSpeed=100\n",
            "dev[0-17]",
        )
        .unwrap();
        assert_eq!(t.switches.len(), 4);
        assert_eq!(t.switches[0].nodes.as_deref(), Some("dev[0-5]"));
        assert_eq!(t.switches[3].switches.as_deref(), Some("s[0-2]"));
        assert_eq!(notes.count(Kind::NotCarried), 1);
    }

    #[test]
    fn undefined_nodes_and_emptied_switches_are_left_out() {
        let (t, notes) = import(
            "SwitchName=s0 Nodes=dev[0-5]\nSwitchName=s1 Nodes=gone[0-3]\nSwitchName=s2 Switches=s1\nSwitchName=top Switches=s[0-2],s9\n",
            "dev[0-3]",
        )
        .unwrap();
        let names: Vec<&str> = t.switches.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["s0", "top"]);
        assert_eq!(t.switches[0].nodes.as_deref(), Some("dev[0-3]"));
        assert_eq!(t.switches[1].switches.as_deref(), Some("s0"));
        let text = notes.render(Kind::NotCarried, 1000).join("\n");
        assert!(text.contains("dev[4-5] not defined"), "{text}");
        assert!(text.contains("(s9)"), "{text}");
    }

    #[test]
    fn blocks_and_bad_switches() {
        let (t, _) = import(
            "BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-8]\nBlockSizes=4,8\n",
            "n[1-8]",
        )
        .unwrap();
        assert_eq!(t.blocks.len(), 2);
        assert_eq!(t.block_sizes, [4, 8]);
        let err = import("SwitchName=s Nodes=n1 Switches=t\n", "n1").unwrap_err();
        assert!(
            err.to_string().contains("both Nodes= and Switches="),
            "{err}"
        );
        let err = import("SwitchName=s Nodes=n1\nSwitchName=s Nodes=n1\n", "n1").unwrap_err();
        assert!(err.to_string().contains("defined twice"), "{err}");
    }
}
