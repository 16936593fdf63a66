//! PreemptType and PreemptMode: which preemption Slurm does, and the mode a
//! partition's jobs are preempted in. corral preempts by partition tier and by
//! QOS at once, in the victim's QOS's mode or else its partition's, so a
//! partition's `preempt_mode` is where preempt/partition_prio's modes go.

use corral_controller::config::PreemptModeName;

use super::location::ImportError;
use super::notes::Notes;
use super::parse::Pair;

/// Which PreemptType.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `preempt/none` (Slurm's default): nothing is preempted.
    None,
    /// `preempt/partition_prio`: higher PriorityTier partitions preempt lower.
    PartitionPriority,
    /// `preempt/qos`: QOS preempt QOS.
    Qos,
}

/// A PreemptMode value: a base mode and the GANG flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    /// OFF, CANCEL, REQUEUE; `None` for SUSPEND.
    pub base: Option<PreemptModeName>,
    /// GANG: time-slicing.
    pub gang: bool,
}

/// The cluster's preemption: its kind and the cluster-wide mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preemption {
    /// PreemptType.
    pub kind: Kind,
    /// PreemptMode, where set.
    pub cluster_mode: Option<(Pair, Mode)>,
}

impl Preemption {
    /// Reads PreemptType and PreemptMode (either may be absent).
    pub fn read(
        preempt_type: Option<&Pair>,
        preempt_mode: Option<&Pair>,
        notes: &mut Notes,
    ) -> Result<Self, ImportError> {
        let kind = match preempt_type {
            None => Kind::None,
            Some(pair) => match pair.value.trim().to_ascii_lowercase().as_str() {
                "preempt/none" => Kind::None,
                "preempt/partition_prio" => Kind::PartitionPriority,
                "preempt/qos" => Kind::Qos,
                _ => {
                    return Err(ImportError::at(
                        &pair.at,
                        format!(
                            "PreemptType={} is not one of preempt/none, preempt/partition_prio or preempt/qos",
                            pair.value
                        ),
                    ));
                }
            },
        };
        let cluster_mode = match preempt_mode {
            Some(pair) => Some((pair.clone(), parse_mode(pair)?)),
            None => None,
        };
        if let Some((pair, mode)) = &cluster_mode {
            match kind {
                Kind::None if mode.base != Some(PreemptModeName::Off) => notes.not_carried(
                    "",
                    pair,
                    "PreemptType is preempt/none, so Slurm preempts no job; corral's partitions keep preempt_mode off",
                ),
                Kind::Qos if mode.base != Some(PreemptModeName::Off) => notes.not_carried(
                    "",
                    pair,
                    format!(
                        "with preempt/qos the mode belongs to the QOS whose jobs may be preempted; corral's QOS preemption is [[qos]] preempts and preempt_mode{}, which slurm.conf does not hold (they are sacctmgr's QOS records): add them",
                        mode.base
                            .map(|m| format!(" (here \"{}\")", mode_name(m)))
                            .unwrap_or_default()
                    ),
                ),
                _ => {}
            }
            if mode.gang {
                notes.not_carried("", pair, GANG_REASON);
            }
        }
        Ok(Preemption { kind, cluster_mode })
    }

    /// The mode to write for a partition whose own PreemptMode is `own`;
    /// `None` leaves corral's default, off.
    pub fn partition_mode(
        &self,
        own: Option<&Pair>,
        notes: &mut Notes,
    ) -> Result<Option<PreemptModeName>, ImportError> {
        let own_mode = match own {
            Some(pair) => Some((pair, parse_mode(pair)?)),
            None => None,
        };
        if let Some((pair, mode)) = own_mode {
            if mode.gang {
                notes.not_carried("PartitionName", pair, GANG_REASON);
            }
            let base_is_off = mode.base == Some(PreemptModeName::Off);
            match self.kind {
                Kind::None if !base_is_off => notes.not_carried(
                    "PartitionName",
                    pair,
                    "PreemptType is preempt/none, so Slurm preempts no job; the partition keeps preempt_mode off",
                ),
                Kind::Qos if !base_is_off => notes.not_carried(
                    "PartitionName",
                    pair,
                    "Slurm uses a partition's PreemptMode only with preempt/partition_prio; with preempt/qos the mode belongs on the QOS ([[qos]] preempt_mode)",
                ),
                _ => {}
            }
        }
        if self.kind != Kind::PartitionPriority {
            return Ok(None);
        }
        let Some((pair, mode)) = own_mode.or(self.cluster_mode.as_ref().map(|(p, m)| (p, *m)))
        else {
            return Ok(None);
        };
        match mode.base {
            Some(PreemptModeName::Off) => Ok(None),
            Some(base) => Ok(Some(base)),
            None => {
                let scope = if own.is_some() { "PartitionName" } else { "" };
                notes.not_carried(
                    scope,
                    pair,
                    "corral cannot suspend a job (its GPU memory would stay held); the partition keeps preempt_mode off: choose \"requeue\" or \"cancel\" by hand if its jobs should be preempted",
                );
                Ok(None)
            }
        }
    }
}

/// Why GANG is not carried.
const GANG_REASON: &str = "corral does not gang-schedule (time-slice) jobs; GANG is dropped";

/// The name corral.toml writes for a mode.
pub fn mode_name(mode: PreemptModeName) -> &'static str {
    match mode {
        PreemptModeName::Off => "off",
        PreemptModeName::Requeue => "requeue",
        PreemptModeName::Cancel => "cancel",
    }
}

/// `OFF`, `CANCEL`, `REQUEUE` or `SUSPEND`, optionally with `GANG` (and
/// `WITHIN`, which changes nothing here), comma-separated.
fn parse_mode(pair: &Pair) -> Result<Mode, ImportError> {
    let mut mode = Mode {
        base: None,
        gang: false,
    };
    let mut base_named = false;
    for word in pair
        .value
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
    {
        let base = match word.to_ascii_lowercase().as_str() {
            "off" => Some(PreemptModeName::Off),
            "cancel" => Some(PreemptModeName::Cancel),
            "requeue" => Some(PreemptModeName::Requeue),
            "suspend" => None,
            "gang" => {
                mode.gang = true;
                continue;
            }
            "within" => continue,
            _ => {
                return Err(ImportError::at(
                    &pair.at,
                    format!(
                        "{}={}: '{word}' is not a preemption mode; use OFF, CANCEL, REQUEUE or SUSPEND, with GANG",
                        pair.key, pair.value
                    ),
                ));
            }
        };
        mode.base = base;
        base_named = true;
    }
    if !base_named {
        mode.base = Some(PreemptModeName::Off);
    }
    Ok(mode)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::location::Location;
    use super::super::notes::Kind as NoteKind;
    use super::*;

    fn pair(key: &str, value: &str) -> Pair {
        Pair {
            key: key.into(),
            value: value.into(),
            at: Location::new(&Arc::from("slurm.conf"), 1),
        }
    }

    #[test]
    fn partition_prio_carries_the_partitions_or_the_clusters_mode() {
        let mut notes = Notes::default();
        let kind = pair("PreemptType", "preempt/partition_prio");
        let cluster = pair("PreemptMode", "REQUEUE");
        let p = Preemption::read(Some(&kind), Some(&cluster), &mut notes).unwrap();
        assert_eq!(
            p.partition_mode(None, &mut notes).unwrap(),
            Some(PreemptModeName::Requeue)
        );
        let own = pair("PreemptMode", "cancel");
        assert_eq!(
            p.partition_mode(Some(&own), &mut notes).unwrap(),
            Some(PreemptModeName::Cancel)
        );
        let off = pair("PreemptMode", "OFF");
        assert_eq!(p.partition_mode(Some(&off), &mut notes).unwrap(), None);
        assert!(notes.all().is_empty());
    }

    #[test]
    fn suspend_and_gang_are_named_as_not_carried() {
        let mut notes = Notes::default();
        let kind = pair("PreemptType", "preempt/partition_prio");
        let cluster = pair("PreemptMode", "SUSPEND,GANG");
        let p = Preemption::read(Some(&kind), Some(&cluster), &mut notes).unwrap();
        assert_eq!(p.partition_mode(None, &mut notes).unwrap(), None);
        assert_eq!(notes.count(NoteKind::NotCarried), 2);
    }

    #[test]
    fn without_partition_prio_partitions_are_never_preempted() {
        let mut notes = Notes::default();
        let p = Preemption::read(None, None, &mut notes).unwrap();
        let own = pair("PreemptMode", "REQUEUE");
        assert_eq!(p.partition_mode(Some(&own), &mut notes).unwrap(), None);
        assert_eq!(notes.count(NoteKind::NotCarried), 1);

        let mut notes = Notes::default();
        let kind = pair("PreemptType", "preempt/qos");
        let cluster = pair("PreemptMode", "REQUEUE");
        let p = Preemption::read(Some(&kind), Some(&cluster), &mut notes).unwrap();
        assert_eq!(p.partition_mode(None, &mut notes).unwrap(), None);
        assert!(notes.render(NoteKind::NotCarried, 400)[0].contains("[[qos]]"));
    }

    #[test]
    fn unknown_modes_are_refused() {
        let err = parse_mode(&pair("PreemptMode", "REQUEUE,SOMETIMES")).unwrap_err();
        assert!(err.to_string().contains("'SOMETIMES'"), "{err}");
    }
}
