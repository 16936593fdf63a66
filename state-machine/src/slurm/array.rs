//! Job array specs as `--array` takes them: `0-999%50`, `1,3,5-7`, `0-15:4`.
//!
//! A spec is comma-separated entries `N`, `A-B` or `A-B:STEP`, with one optional
//! `%THROTTLE` at the end for the whole array. Indices may overlap between
//! entries; they are sorted and de-duplicated. A `STEP` need not land on `B`
//! (`0-10:3` is 0, 3, 6, 9), as in Slurm.

use serde::{Deserialize, Serialize};

use super::FormatError;

/// The format name used in errors.
const FORMAT: &str = "array spec";

/// The largest array task index accepted (Slurm's own ceiling for MaxArraySize).
pub const MAX_ARRAY_INDEX: u32 = 4_000_000;

/// The task indices of an array job and its throttle.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ArraySpec {
    /// Task indices, sorted ascending, no duplicates, never empty.
    pub indices: Vec<u32>,
    /// At most this many tasks run at once (`%N`).
    pub throttle: Option<u32>,
}

/// One entry: the indices `first, first + step, ...` up to and including `last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Progression {
    first: u32,
    last: u32,
    step: u32,
}

impl Progression {
    fn len(self) -> u64 {
        u64::from((self.last - self.first) / self.step) + 1
    }

    fn indices(self) -> impl Iterator<Item = u32> {
        (self.first..=self.last).step_by(usize::try_from(self.step).unwrap_or(usize::MAX))
    }
}

/// Parses an array spec, refusing more than `max_tasks` tasks.
pub fn parse_array(spec: &str, max_tasks: usize) -> Result<ArraySpec, FormatError> {
    let (body, throttle) = match spec.split_once('%') {
        Some((body, throttle)) => (body, Some(parse_throttle(spec, throttle)?)),
        None => (spec, None),
    };
    if body.is_empty() {
        return Err(FormatError::new(
            FORMAT,
            spec,
            "no indices; expected e.g. 0-99, 1,3,5-7 or 0-15:4",
        ));
    }
    let mut entries = body
        .split(',')
        .map(|entry| parse_entry(spec, entry))
        .collect::<Result<Vec<_>, _>>()?;
    entries.sort_unstable();
    entries.dedup();
    let indices = collect_indices(spec, &entries, max_tasks)?;
    Ok(ArraySpec { indices, throttle })
}

fn parse_throttle(spec: &str, text: &str) -> Result<u32, FormatError> {
    if text.is_empty() {
        return Err(FormatError::new(FORMAT, spec, "missing throttle after '%'"));
    }
    match parse_number(text)? {
        0 => Err(FormatError::new(
            FORMAT,
            text,
            "throttle must be above zero",
        )),
        n => Ok(n),
    }
}

/// Parses `N`, `A-B` or `A-B:STEP`.
fn parse_entry(spec: &str, entry: &str) -> Result<Progression, FormatError> {
    if entry.is_empty() {
        return Err(FormatError::new(FORMAT, spec, "empty entry between commas"));
    }
    let (range, step) = match entry.split_once(':') {
        Some((range, step)) => (range, Some(step)),
        None => (entry, None),
    };
    let Some((first, last)) = range.split_once('-') else {
        if step.is_some() {
            return Err(FormatError::new(
                FORMAT,
                entry,
                "a step needs a range, as in A-B:STEP",
            ));
        }
        let index = parse_index(entry, range)?;
        return Ok(Progression {
            first: index,
            last: index,
            step: 1,
        });
    };
    let first = parse_index(entry, first)?;
    let last = parse_index(entry, last)?;
    if first > last {
        return Err(FormatError::new(
            FORMAT,
            entry,
            "range start is above its end",
        ));
    }
    let step = step.map_or(Ok(1), |s| parse_step(entry, s))?;
    Ok(Progression { first, last, step })
}

fn parse_step(entry: &str, text: &str) -> Result<u32, FormatError> {
    if text.is_empty() {
        return Err(FormatError::new(FORMAT, entry, "missing step after ':'"));
    }
    match parse_number(text)? {
        0 => Err(FormatError::new(FORMAT, text, "step must be above zero")),
        n => Ok(n),
    }
}

/// Parses one task index, naming the whole entry when the index is missing.
fn parse_index(entry: &str, text: &str) -> Result<u32, FormatError> {
    if text.is_empty() {
        return Err(FormatError::new(
            FORMAT,
            entry,
            "missing index; expected N, A-B or A-B:STEP",
        ));
    }
    let index = parse_number(text)?;
    if index > MAX_ARRAY_INDEX {
        return Err(FormatError::new(
            FORMAT,
            text,
            format!("index above the maximum of {MAX_ARRAY_INDEX}"),
        ));
    }
    Ok(index)
}

fn parse_number(text: &str) -> Result<u32, FormatError> {
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FormatError::new(FORMAT, text, "must be a whole number"));
    }
    text.parse().map_err(|_| {
        FormatError::new(
            FORMAT,
            text,
            format!("above the maximum of {MAX_ARRAY_INDEX}"),
        )
    })
}

/// Expands the entries into sorted, distinct indices, refusing more than
/// `max_tasks` of them before allocating for them.
fn collect_indices(
    spec: &str,
    entries: &[Progression],
    max_tasks: usize,
) -> Result<Vec<u32>, FormatError> {
    let upper_bound = entries
        .iter()
        .fold(0u64, |sum, e| sum.saturating_add(e.len()));
    let max = u64::try_from(max_tasks).unwrap_or(u64::MAX);
    if upper_bound <= max && upper_bound <= u64::from(MAX_ARRAY_INDEX) + 1 {
        let mut indices: Vec<u32> = entries.iter().flat_map(|e| e.indices()).collect();
        indices.sort_unstable();
        indices.dedup();
        return Ok(indices);
    }
    // Overlapping entries may still fit: count the distinct indices in a bitset,
    // whose size is bounded by MAX_ARRAY_INDEX rather than by the spec.
    let bits = IndexSet::from_entries(entries);
    let count = bits.count();
    if count > max {
        return Err(FormatError::new(
            FORMAT,
            spec,
            format!("{count} tasks is more than the limit of {max_tasks}"),
        ));
    }
    Ok(bits.indices().collect())
}

/// A bitset over task indices.
struct IndexSet {
    words: Vec<u64>,
}

impl IndexSet {
    fn from_entries(entries: &[Progression]) -> Self {
        let top = entries.iter().map(|e| e.last).max().unwrap_or(0);
        let mut set = IndexSet {
            words: vec![0; word_of(top) + 1],
        };
        for entry in entries {
            if entry.step == 1 {
                set.insert_range(entry.first, entry.last);
            } else {
                entry.indices().for_each(|i| set.insert(i));
            }
        }
        set
    }

    fn insert(&mut self, index: u32) {
        if let Some(word) = self.words.get_mut(word_of(index)) {
            *word |= bit_of(index);
        }
    }

    /// Inserts `first..=last` a word at a time.
    fn insert_range(&mut self, first: u32, last: u32) {
        let (first_word, last_word) = (word_of(first), word_of(last));
        let low_mask = u64::MAX << (first % 64);
        let high_mask = u64::MAX >> (63 - last % 64);
        for (w, word) in self
            .words
            .iter_mut()
            .enumerate()
            .take(last_word + 1)
            .skip(first_word)
        {
            let mut mask = u64::MAX;
            if w == first_word {
                mask &= low_mask;
            }
            if w == last_word {
                mask &= high_mask;
            }
            *word |= mask;
        }
    }

    fn count(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    fn indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            (0..64u32)
                .filter(move |bit| word & (1 << bit) != 0)
                .filter_map(move |bit| u32::try_from(w * 64).ok().map(|base| base + bit))
        })
    }
}

fn word_of(index: u32) -> usize {
    usize::try_from(index / 64).unwrap_or(usize::MAX)
}

fn bit_of(index: u32) -> u64 {
    1 << (index % 64)
}

/// Prints the indices back compactly (`0-15:4`, `1,3,5-7`), with `%N` when throttled.
pub fn format_array(spec: &ArraySpec) -> String {
    let mut parts = Vec::new();
    let mut rest = spec.indices.as_slice();
    while let Some(&first) = rest.first() {
        let (text, used) = format_leading_run(first, rest);
        parts.push(text);
        rest = rest.get(used..).unwrap_or_default();
    }
    let mut out = parts.join(",");
    if let Some(throttle) = spec.throttle {
        out.push_str(&format!("%{throttle}"));
    }
    out
}

/// Prints the run at the start of `indices` (which begins with `first`) and says
/// how many indices it covers: a consecutive run as `A-B`, else a run of three or
/// more with one step as `A-B:S`, else the single index.
fn format_leading_run(first: u32, indices: &[u32]) -> (String, usize) {
    let consecutive = run_length(indices, 1);
    if let Some(&last) = indices.get(consecutive - 1).filter(|_| consecutive >= 2) {
        return (format!("{first}-{last}"), consecutive);
    }
    let step = indices
        .get(1)
        .and_then(|second| second.checked_sub(first))
        .filter(|&s| s > 1);
    let Some(step) = step else {
        return (first.to_string(), 1);
    };
    let stepped = run_length(indices, step);
    match indices.get(stepped - 1) {
        Some(&last) if stepped >= 3 => (format!("{first}-{last}:{step}"), stepped),
        _ => (first.to_string(), 1),
    }
}

/// How many leading elements of `indices` (at least one) go up by exactly `step`.
fn run_length(indices: &[u32], step: u32) -> usize {
    1 + indices
        .windows(2)
        .take_while(|pair| pair[1].checked_sub(pair[0]) == Some(step))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn indices(spec: &str) -> Vec<u32> {
        parse_array(spec, usize::MAX).unwrap().indices
    }

    fn err_token(spec: &str) -> String {
        parse_array(spec, usize::MAX).unwrap_err().token
    }

    fn array(indices: Vec<u32>, throttle: Option<u32>) -> ArraySpec {
        ArraySpec { indices, throttle }
    }

    #[test]
    fn single_indices_and_ranges() {
        assert_eq!(indices("7"), vec![7]);
        assert_eq!(indices("0-3"), vec![0, 1, 2, 3]);
        assert_eq!(indices("1,3,5-7"), vec![1, 3, 5, 6, 7]);
        assert_eq!(indices("5-5"), vec![5]);
        assert_eq!(indices("4000000"), vec![MAX_ARRAY_INDEX]);
    }

    #[test]
    fn steps() {
        assert_eq!(indices("0-15:4"), vec![0, 4, 8, 12]);
        assert_eq!(indices("0-10:3"), vec![0, 3, 6, 9]);
        assert_eq!(indices("1-3:1"), vec![1, 2, 3]);
        assert_eq!(indices("2-3:100"), vec![2]);
    }

    #[test]
    fn sorted_and_deduplicated() {
        assert_eq!(indices("9,1,5"), vec![1, 5, 9]);
        assert_eq!(indices("0-4,2-6,3"), vec![0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(indices("1,1,1"), vec![1]);
    }

    #[test]
    fn throttle() {
        let spec = parse_array("0-999%50", usize::MAX).unwrap();
        assert_eq!(spec.indices.len(), 1000);
        assert_eq!(spec.throttle, Some(50));
        assert_eq!(parse_array("3", 10).unwrap().throttle, None);
    }

    #[test]
    fn malformed_entries_name_the_bad_piece() {
        let cases = [
            ("", ""),
            ("1,", "1,"),
            (",1", ",1"),
            ("1,,2", "1,,2"),
            ("5-3", "5-3"),
            ("0-15:0", "0"),
            ("0-15:", "0-15:"),
            ("0-15:x", "x"),
            ("0-15:4:2", "4:2"),
            ("5:2", "5:2"),
            ("-5", "-5"),
            ("5-", "5-"),
            ("1-2-3", "2-3"),
            ("a", "a"),
            ("1-b", "b"),
            (" 1", " 1"),
            ("+1", "+1"),
            ("4000001", "4000001"),
            ("0-4000001", "4000001"),
            ("99999999999", "99999999999"),
        ];
        for (input, token) in cases {
            let err = parse_array(input, usize::MAX).unwrap_err();
            assert_eq!(err.token, token, "{input}");
            assert_eq!(err.format, "array spec");
        }
    }

    #[test]
    fn malformed_throttles_name_the_throttle() {
        assert_eq!(err_token("0-9%0"), "0");
        assert_eq!(err_token("0-9%"), "0-9%");
        assert_eq!(err_token("0-9%x"), "x");
        assert_eq!(err_token("0-9%5%6"), "5%6");
        assert_eq!(err_token("%5"), "%5");
        assert_eq!(err_token("0-9%5,10"), "5,10");
        assert_eq!(err_token("0-9%-1"), "-1");
    }

    #[test]
    fn too_many_tasks_are_refused() {
        assert_eq!(parse_array("0-9", 10).unwrap().indices.len(), 10);
        let err = parse_array("0-10", 10).unwrap_err();
        assert_eq!(err.token, "0-10");
        assert!(err.reason.contains("11 tasks"), "{}", err.reason);
        assert!(parse_array("0-4000000", 1000).is_err());
        assert!(parse_array("1", 0).is_err());
    }

    #[test]
    fn overlapping_entries_count_once_against_the_limit() {
        assert_eq!(
            parse_array("0-9,0-9,5", 10).unwrap().indices,
            (0..10).collect::<Vec<_>>()
        );
        assert_eq!(
            parse_array("0-9:2,0-8:2", 5).unwrap().indices,
            vec![0, 2, 4, 6, 8]
        );
        assert_eq!(
            parse_array("0-4000000,1-4000000,0-4000000:2", usize::MAX)
                .unwrap()
                .indices
                .len(),
            4_000_001
        );
        let err = parse_array("0-9,3-12:3", 10).unwrap_err();
        assert!(err.reason.contains("11 tasks"), "{}", err.reason);
    }

    #[test]
    fn bitset_ranges_cover_word_edges() {
        for (a, b) in [
            (0, 63),
            (63, 64),
            (1, 127),
            (64, 128),
            (5, 5),
            (0, 0),
            (127, 200),
        ] {
            let spec = format!("{a}-{b},{a}-{b}");
            let got = parse_array(&spec, (b - a + 1) as usize).unwrap().indices;
            assert_eq!(got, (a..=b).collect::<Vec<u32>>(), "{spec}");
        }
    }

    #[test]
    fn formats_compactly() {
        assert_eq!(format_array(&array(vec![7], None)), "7");
        assert_eq!(format_array(&array(vec![1, 3, 5, 6, 7], None)), "1-5:2,6-7");
        assert_eq!(format_array(&array(vec![1, 3, 6, 7, 8], None)), "1,3,6-8");
        assert_eq!(format_array(&array(vec![0, 4, 8, 12], None)), "0-12:4");
        assert_eq!(
            format_array(&array((0..1000).collect(), Some(50))),
            "0-999%50"
        );
        assert_eq!(format_array(&array(vec![1, 2], None)), "1-2");
        assert_eq!(format_array(&array(vec![1, 5], None)), "1,5");
        assert_eq!(format_array(&array(vec![], None)), "");
        // Not what parse_array produces, but printing must not panic on it.
        assert_eq!(format_array(&array(vec![5, 3, 3, 1], None)), "5,3,3,1");
    }

    fn progression_union() -> impl Strategy<Value = Vec<u32>> {
        prop::collection::vec((0u32..2000, 1u32..30, 1u32..6), 1..6).prop_map(|runs| {
            let set: BTreeSet<u32> = runs
                .into_iter()
                .flat_map(|(start, len, step)| (0..len).map(move |i| start + i * step))
                .collect();
            set.into_iter().collect()
        })
    }

    fn any_indices() -> impl Strategy<Value = Vec<u32>> {
        prop_oneof![
            prop::collection::btree_set(0u32..=MAX_ARRAY_INDEX, 1..40)
                .prop_map(|s| s.into_iter().collect()),
            progression_union(),
        ]
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(indices in any_indices(), throttle in prop::option::of(1u32..)) {
            let spec = ArraySpec { indices, throttle };
            prop_assert_eq!(parse_array(&format_array(&spec), usize::MAX), Ok(spec));
        }

        #[test]
        fn parsed_indices_are_sorted_distinct_and_bounded(text in "[0-9,:%-]{1,16}", max in 0usize..200) {
            if let Ok(spec) = parse_array(&text, max) {
                prop_assert!(!spec.indices.is_empty());
                prop_assert!(spec.indices.len() <= max);
                prop_assert!(spec.indices.windows(2).all(|w| w[0] < w[1]));
                prop_assert!(spec.indices.iter().all(|&i| i <= MAX_ARRAY_INDEX));
            }
        }

        #[test]
        fn parse_never_panics(text in "\\PC{0,24}") {
            let _ = parse_array(&text, 1000);
        }
    }
}
