//! MIG layouts: which of a node's GPUs are split into MIG instances of which
//! profiles, and the GPU slots the scheduler sees as a result.
//!
//! The scheduler's unit is a GPU slot: a whole GPU, or one MIG instance. Slots
//! are numbered in the order NVML enumerates them, the GPUs by index and each
//! GPU's instances in turn, so slot `i` is what Slurm calls the node's `i`-th
//! `gpu` GRES device. An instance's type is the GPU's type and the profile, as
//! Slurm's NVML plugin names it: `a100_3g.20gb` (compute slices `g`, memory in
//! GiB `gb`).
//!
//! A layout is written as entries `GPUS:PROFILES`: `GPUS` is one index or a
//! range (`4-7`), `PROFILES` is profiles joined by `+`, each with an optional
//! count: `0:3g.20gb+2g.10gb+1g.5gb*2`, `4-7:1g.10gb*7`. The same text serves
//! corral.toml's `mig` key and the simulated agent's `--gpus` value.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

use crate::node::MAX_GPUS_PER_NODE;

/// Compute slices of an A100, H100, H200 or B200: the instances of one GPU use
/// at most this many between them.
pub const MAX_SLICES_PER_GPU: u32 = 7;

/// What is wrong with a MIG layout.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "MIG layout {entry:?}: {reason}; write entries as GPUS:PROFILES, e.g. 4-7:3g.20gb*2 or 0:3g.20gb+2g.10gb+1g.5gb*2"
)]
pub struct MigError {
    /// The entry (or the whole layout) at fault.
    pub entry: String,
    /// What is wrong with it.
    pub reason: String,
}

impl MigError {
    fn new(entry: &str, reason: impl Into<String>) -> Self {
        Self {
            entry: entry.to_string(),
            reason: reason.into(),
        }
    }
}

/// A MIG profile as Slurm names it: `3g.20gb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MigProfile {
    /// GPU compute slices (the `3` of `3g.20gb`).
    pub slices: u32,
    /// Memory in GiB, rounded (the `20` of `3g.20gb`).
    pub memory_gb: u32,
}

impl fmt::Display for MigProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}g.{}gb", self.slices, self.memory_gb)
    }
}

impl FromStr for MigProfile {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not a MIG profile such as 3g.20gb");
        let (slices, memory) = text.split_once("g.").ok_or_else(bad)?;
        let memory = memory.strip_suffix("gb").ok_or_else(bad)?;
        let number = |digits: &str| -> Result<u32, String> {
            if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
                return Err(bad());
            }
            digits.parse().map_err(|_| bad())
        };
        let profile = MigProfile {
            slices: number(slices)?,
            memory_gb: number(memory)?,
        };
        if profile.slices == 0 || profile.slices > MAX_SLICES_PER_GPU {
            return Err(format!(
                "{text}: an instance has 1 to {MAX_SLICES_PER_GPU} compute slices"
            ));
        }
        if profile.memory_gb == 0 {
            return Err(format!("{text}: an instance has memory"));
        }
        Ok(profile)
    }
}

impl MigProfile {
    /// The type of an instance of this profile on a GPU of type `model`, as
    /// Slurm names it: `a100_3g.20gb`.
    pub fn instance_type(&self, model: &str) -> String {
        format!("{model}_{self}")
    }
}

/// GPUs `first..=last`, each split into `profiles`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigEntry {
    /// The first GPU index.
    pub first: u32,
    /// The last GPU index (equal to `first` for one GPU).
    pub last: u32,
    /// Each GPU's instances, in enumeration order.
    pub profiles: Vec<MigProfile>,
}

impl fmt::Display for MigEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}:", self.first)?;
        } else {
            write!(f, "{}-{}:", self.first, self.last)?;
        }
        let mut runs: Vec<(MigProfile, usize)> = Vec::new();
        for profile in &self.profiles {
            match runs.last_mut() {
                Some((last, count)) if last == profile => *count += 1,
                _ => runs.push((*profile, 1)),
            }
        }
        for (i, (profile, count)) in runs.iter().enumerate() {
            if i > 0 {
                f.write_str("+")?;
            }
            write!(f, "{profile}")?;
            if *count > 1 {
                write!(f, "*{count}")?;
            }
        }
        Ok(())
    }
}

impl FromStr for MigEntry {
    type Err = MigError;

    fn from_str(text: &str) -> Result<Self, MigError> {
        let bad = |reason: String| MigError::new(text, reason);
        let (gpus, profiles) = text
            .split_once(':')
            .ok_or_else(|| bad("it names no GPUs".to_string()))?;
        let index = |digits: &str| -> Result<u32, MigError> {
            digits
                .trim()
                .parse::<u32>()
                .map_err(|_| bad(format!("{digits:?} is not a GPU index")))
        };
        let (first, last) = match gpus.split_once('-') {
            Some((first, last)) => (index(first)?, index(last)?),
            None => {
                let gpu = index(gpus)?;
                (gpu, gpu)
            }
        };
        if last < first {
            return Err(bad(format!("the range {gpus} runs backwards")));
        }
        if last as usize >= MAX_GPUS_PER_NODE {
            return Err(bad(format!(
                "GPU {last} is past the {MAX_GPUS_PER_NODE} GPUs a node may have"
            )));
        }
        let mut list = Vec::new();
        for part in profiles.split('+') {
            let (profile, count) = match part.split_once('*') {
                Some((profile, count)) => {
                    let count: usize = count
                        .trim()
                        .parse()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| bad(format!("{count:?} is not a count of instances")))?;
                    (profile, count)
                }
                None => (part, 1),
            };
            let profile: MigProfile = profile.trim().parse().map_err(bad)?;
            if count > MAX_SLICES_PER_GPU as usize - list.len().min(MAX_SLICES_PER_GPU as usize) {
                return Err(bad(format!(
                    "a GPU holds at most {MAX_SLICES_PER_GPU} MIG instances"
                )));
            }
            list.extend(std::iter::repeat_n(profile, count));
        }
        let slices: u32 = list.iter().map(|p| p.slices).sum();
        if slices > MAX_SLICES_PER_GPU {
            return Err(bad(format!(
                "these instances need {slices} compute slices and a GPU has {MAX_SLICES_PER_GPU}"
            )));
        }
        Ok(MigEntry {
            first,
            last,
            profiles: list,
        })
    }
}

/// Which GPUs of a node are split, and how. Empty: every GPU is whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigLayout {
    entries: Vec<MigEntry>,
}

/// One GPU slot: a whole GPU or one MIG instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuSlot {
    /// The index of the GPU it is on.
    pub physical: u32,
    /// Its type: the GPU's, or the instance's (`a100_3g.20gb`).
    pub gpu_type: String,
    /// The instance's profile; `None` for a whole GPU.
    pub instance: Option<MigProfile>,
}

impl MigLayout {
    /// The layout of `entries` (each `GPUS:PROFILES`), refusing a GPU named
    /// twice.
    pub fn parse_entries<S: AsRef<str>>(entries: &[S]) -> Result<Self, MigError> {
        let mut layout = MigLayout::default();
        for text in entries {
            let entry: MigEntry = text.as_ref().parse()?;
            if let Some(gpu) = (entry.first..=entry.last).find(|&g| layout.profiles_of(g).is_some())
            {
                return Err(MigError::new(
                    text.as_ref(),
                    format!("GPU {gpu} is already split by an earlier entry"),
                ));
            }
            layout.entries.push(entry);
        }
        Ok(layout)
    }

    /// True when no GPU is split.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, as written.
    pub fn entries(&self) -> &[MigEntry] {
        &self.entries
    }

    /// The instances GPU `gpu` is split into; `None` when it is whole.
    pub fn profiles_of(&self, gpu: u32) -> Option<&[MigProfile]> {
        self.entries
            .iter()
            .find(|e| (e.first..=e.last).contains(&gpu))
            .map(|e| e.profiles.as_slice())
    }

    /// The slots of a node with `count` GPUs of type `model` split as this
    /// layout says, in enumeration order. Refuses a layout naming a GPU the
    /// node does not have, and more slots than a node may have.
    pub fn slots(&self, count: u32, model: &str) -> Result<Vec<GpuSlot>, MigError> {
        if let Some(entry) = self.entries.iter().find(|e| e.last >= count) {
            return Err(MigError::new(
                &entry.to_string(),
                format!(
                    "GPU {} is not on the node, which has {count} GPUs (0-{})",
                    entry.last,
                    count.saturating_sub(1)
                ),
            ));
        }
        let mut slots = Vec::new();
        for physical in 0..count {
            match self.profiles_of(physical) {
                None => slots.push(GpuSlot {
                    physical,
                    gpu_type: model.to_string(),
                    instance: None,
                }),
                Some(profiles) => slots.extend(profiles.iter().map(|profile| GpuSlot {
                    physical,
                    gpu_type: profile.instance_type(model),
                    instance: Some(*profile),
                })),
            }
        }
        if slots.len() > MAX_GPUS_PER_NODE {
            return Err(MigError::new(
                &self.to_string(),
                format!(
                    "this makes {} GPU slots and a node may have at most {MAX_GPUS_PER_NODE}",
                    slots.len()
                ),
            ));
        }
        Ok(slots)
    }
}

impl fmt::Display for MigLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, entry) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{entry}")?;
        }
        Ok(())
    }
}

impl FromStr for MigLayout {
    type Err = MigError;

    /// Entries joined by `,`, as the agent's `--gpus` value carries them.
    fn from_str(text: &str) -> Result<Self, MigError> {
        if text.trim().is_empty() {
            return Ok(MigLayout::default());
        }
        let entries: Vec<&str> = text.split(',').collect();
        MigLayout::parse_entries(&entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_and_print_back_with_runs_counted() {
        for text in [
            "4-7:3g.20gb*2",
            "0:3g.20gb+2g.10gb+1g.5gb*2",
            "1:7g.80gb",
            "2-3:1g.10gb*7",
        ] {
            let entry: MigEntry = text.parse().unwrap();
            assert_eq!(entry.to_string(), text);
        }
        let entry: MigEntry = "0:1g.5gb+1g.5gb".parse().unwrap();
        assert_eq!(entry.to_string(), "0:1g.5gb*2");
        assert_eq!(entry.profiles.len(), 2);
    }

    #[test]
    fn slots_follow_enumeration_order_with_slurms_type_names() {
        let layout = MigLayout::parse_entries(&["1:3g.40gb*2", "3:1g.10gb+2g.20gb"]).unwrap();
        let slots = layout.slots(4, "h100").unwrap();
        let seen: Vec<(u32, &str)> = slots
            .iter()
            .map(|s| (s.physical, s.gpu_type.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                (0, "h100"),
                (1, "h100_3g.40gb"),
                (1, "h100_3g.40gb"),
                (2, "h100"),
                (3, "h100_1g.10gb"),
                (3, "h100_2g.20gb"),
            ]
        );
        assert_eq!(MigLayout::default().slots(2, "a100").unwrap().len(), 2);
    }

    #[test]
    fn a_layout_prints_back_and_an_empty_one_splits_nothing() {
        let layout: MigLayout = "0-1:3g.20gb*2,7:1g.10gb*7".parse().unwrap();
        assert_eq!(layout.to_string(), "0-1:3g.20gb*2,7:1g.10gb*7");
        assert!("".parse::<MigLayout>().unwrap().is_empty());
        assert_eq!(layout.profiles_of(7).map(<[_]>::len), Some(7));
        assert_eq!(layout.profiles_of(2), None);
    }

    #[test]
    fn impossible_layouts_say_what_is_wrong() {
        for (text, reason) in [
            ("3g.20gb", "names no GPUs"),
            ("x:3g.20gb", "not a GPU index"),
            ("3-1:3g.20gb", "runs backwards"),
            ("0:3g", "not a MIG profile"),
            ("0:3g.20", "not a MIG profile"),
            ("0:g.20gb", "not a MIG profile"),
            ("0:8g.80gb", "1 to 7 compute slices"),
            ("0:3g.20gb*3", "need 9 compute slices"),
            ("0:1g.5gb*8", "at most 7 MIG instances"),
            ("0:1g.5gb*0", "not a count"),
            ("0:3g.20gb,0:1g.5gb", "already split"),
            (
                "0:1g.5gb+1g.5gb*18446744073709551615",
                "at most 7 MIG instances",
            ),
            ("0-4294967295:1g.5gb", "past the 64 GPUs"),
        ] {
            let message = text.parse::<MigLayout>().unwrap_err().to_string();
            assert!(message.contains(reason), "{text}: {message}");
            assert!(message.contains("GPUS:PROFILES"), "{message}");
        }
        let message = MigLayout::parse_entries(&["8:3g.20gb"])
            .unwrap()
            .slots(8, "a100")
            .unwrap_err()
            .to_string();
        assert!(message.contains("has 8 GPUs (0-7)"), "{message}");
        let many = MigLayout::parse_entries(&["0-9:1g.10gb*7"]).unwrap();
        let message = many.slots(10, "a100").unwrap_err().to_string();
        assert!(message.contains("70 GPU slots"), "{message}");
    }
}
