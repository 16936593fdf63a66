//! Slurm's repetition form for per-node counts, as in `SLURM_TASKS_PER_NODE=4(x2),2`.
//!
//! Entries are separated by commas; each is a count, optionally followed by
//! `(xK)` meaning "K times in a row" (K at least 1).

use super::FormatError;

/// The format name used in errors.
const FORMAT: &str = "repeated counts";

/// The most counts one specification may expand to; larger ones are refused so
/// a typo such as `1(x4000000000)` cannot exhaust memory.
pub const MAX_COUNTS: usize = 1_000_000;

/// Prints per-node counts with runs folded: `[4, 4, 2]` becomes `4(x2),2`.
pub fn compress_counts(counts: &[u32]) -> String {
    counts
        .chunk_by(|a, b| a == b)
        .map(format_run)
        .collect::<Vec<_>>()
        .join(",")
}

/// Expands `4(x2),2` back into `[4, 4, 2]`.
///
/// Blank input gives no counts and whitespace around entries is ignored. Errors
/// name the offending entry (`4(x0)`, `4(2)`, `x`), or for an empty entry the
/// commas around it (`,,`); more than [`MAX_COUNTS`] counts are refused before
/// anything is allocated.
pub fn expand_counts(spec: &str) -> Result<Vec<u32>, FormatError> {
    if spec.trim().is_empty() {
        return Ok(Vec::new());
    }
    let runs = split_entries(spec)
        .into_iter()
        .map(|(start, end)| parse_entry(spec, start, end))
        .collect::<Result<Vec<_>, _>>()?;
    let mut counts = Vec::with_capacity(total_len(&runs)?);
    for run in &runs {
        counts.extend(std::iter::repeat_n(run.count, run.times));
    }
    Ok(counts)
}

/// `count` repeated `times` times, with the entry it was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run<'a> {
    count: u32,
    times: usize,
    entry: &'a str,
}

/// Prints one run of equal counts: `4` or `4(x2)`.
fn format_run(run: &[u32]) -> String {
    match run {
        [] => String::new(),
        [count] => count.to_string(),
        [count, ..] => format!("{count}(x{})", run.len()),
    }
}

/// The byte spans of the comma-separated entries of `spec`.
fn split_entries(spec: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = 0;
    for (i, _) in spec.match_indices(',') {
        spans.push((start, i));
        start = i + 1;
    }
    spans.push((start, spec.len()));
    spans
}

/// Parses the entry at `spec[start..end]`: `N` or `N(xK)`.
fn parse_entry(spec: &str, start: usize, end: usize) -> Result<Run<'_>, FormatError> {
    let entry = spec[start..end].trim();
    if entry.is_empty() {
        let quoted = &spec[start.saturating_sub(1)..(end + 1).min(spec.len())];
        return Err(FormatError::new(
            FORMAT,
            quoted,
            "empty entry; write counts separated by single commas, as in 4(x2),2",
        ));
    }
    let (count, times) = match entry.split_once('(') {
        None => (entry, 1),
        Some((count, repeat)) => (count, parse_repeat(repeat, entry)?),
    };
    let count = parse_digits(count, entry)?;
    Ok(Run {
        count,
        times,
        entry,
    })
}

/// Parses the `xK)` after a count's `(`; `entry` is what an error quotes.
fn parse_repeat(repeat: &str, entry: &str) -> Result<usize, FormatError> {
    let digits = repeat
        .strip_prefix('x')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            FormatError::new(FORMAT, entry, "a repetition is written N(xK), as in 4(x2)")
        })?;
    match parse_digits::<usize>(digits, entry)? {
        0 => Err(FormatError::new(
            FORMAT,
            entry,
            "a repetition must be at least 1, as in 4(x2)",
        )),
        times => Ok(times),
    }
}

/// Parses decimal digits (nothing else) into a number; `entry` is what an error quotes.
fn parse_digits<T: std::str::FromStr>(digits: &str, entry: &str) -> Result<T, FormatError> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FormatError::new(
            FORMAT,
            entry,
            "expected a decimal count, optionally followed by (xK), as in 4(x2),2",
        ));
    }
    digits
        .parse()
        .map_err(|_| FormatError::new(FORMAT, entry, "number too large"))
}

/// The number of counts the runs expand to, refusing more than [`MAX_COUNTS`].
fn total_len(runs: &[Run<'_>]) -> Result<usize, FormatError> {
    let mut total = 0usize;
    for run in runs {
        total = total.saturating_add(run.times);
        if total > MAX_COUNTS {
            return Err(FormatError::new(
                FORMAT,
                run.entry,
                format!("expands to more than {MAX_COUNTS} counts"),
            ));
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn err_token(spec: &str) -> String {
        let err = expand_counts(spec).unwrap_err();
        assert_eq!(err.format, "repeated counts");
        err.token
    }

    #[test]
    fn compress_examples() {
        assert_eq!(compress_counts(&[4, 4, 2]), "4(x2),2");
        assert_eq!(compress_counts(&[1]), "1");
        assert_eq!(compress_counts(&[]), "");
        assert_eq!(compress_counts(&[2, 4, 4, 4, 2, 2]), "2,4(x3),2(x2)");
        assert_eq!(compress_counts(&[0, 0]), "0(x2)");
        assert_eq!(compress_counts(&[u32::MAX]), "4294967295");
    }

    #[test]
    fn expand_examples() {
        assert_eq!(expand_counts("4(x2),2").unwrap(), [4, 4, 2]);
        assert_eq!(expand_counts("1").unwrap(), [1]);
        assert_eq!(expand_counts("").unwrap(), Vec::<u32>::new());
        assert_eq!(expand_counts(" 3(x1) , 1 ").unwrap(), [3, 1]);
        assert_eq!(expand_counts("2(x3)").unwrap(), [2, 2, 2]);
    }

    #[test]
    fn bad_repetitions_are_refused() {
        assert_eq!(err_token("4(x0)"), "4(x0)");
        assert_eq!(err_token("1,4(2)"), "4(2)");
        assert_eq!(err_token("4(x)"), "4(x)");
        assert_eq!(err_token("4(x2"), "4(x2");
        assert_eq!(err_token("4(x2))"), "4(x2))");
        assert_eq!(err_token("4(x-1)"), "4(x-1)");
        assert_eq!(err_token("(x2)"), "(x2)");
    }

    #[test]
    fn bad_counts_are_refused() {
        assert_eq!(err_token("x"), "x");
        assert_eq!(err_token("2,+3"), "+3");
        assert_eq!(err_token("4294967296"), "4294967296");
        assert_eq!(err_token("4 4"), "4 4");
    }

    #[test]
    fn empty_entries_are_refused() {
        assert_eq!(err_token("4,,2"), ",,");
        assert_eq!(err_token(",4"), ",");
        assert_eq!(err_token("4,"), ",");
    }

    #[test]
    fn huge_expansions_are_refused_before_allocating() {
        assert_eq!(err_token("1(x4000000000)"), "1(x4000000000)");
        assert_eq!(
            err_token("1(x99999999999999999999999)"),
            "1(x99999999999999999999999)"
        );
        assert_eq!(err_token("1(x600000),2(x600000)"), "2(x600000)");
        assert_eq!(expand_counts("1(x1000000)").unwrap().len(), MAX_COUNTS);
    }

    #[test]
    fn error_message_reads_well() {
        let err = expand_counts("4(x0)").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid repeated counts '4(x0)': ")
        );
    }

    proptest! {
        #[test]
        fn expand_inverts_compress(counts in prop::collection::vec(0u32..4, 0..50)) {
            prop_assert_eq!(expand_counts(&compress_counts(&counts)).unwrap(), counts);
        }

        #[test]
        fn expand_inverts_compress_any_value(counts in prop::collection::vec(any::<u32>(), 0..20)) {
            prop_assert_eq!(expand_counts(&compress_counts(&counts)).unwrap(), counts);
        }

        #[test]
        fn expand_never_panics(spec in "\\PC{0,30}") {
            let _ = expand_counts(&spec);
        }

        #[test]
        fn expand_never_panics_on_count_like_text(spec in "[0-9x(),]{0,20}") {
            let _ = expand_counts(&spec);
        }
    }
}
