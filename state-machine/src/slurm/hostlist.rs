//! Hostlist expressions: `gpu-node[001-004,007],login1` expanded to names and
//! names compressed back, keeping zero-padding.
//!
//! An expression is a comma-separated list of entries. An entry is literal text
//! with any number of bracket groups; each group holds comma-separated numbers or
//! `lo-hi` ranges, and several groups in one entry expand as a cartesian product
//! (`r[1-2]n[1-2]` is `r1n1,r1n2,r2n1,r2n2`). A range is zero-padded to the number
//! of digits its lower bound is written with (`[001-004]` gives three digits,
//! `[8-11]` gives `8,9,10,11`).

use std::cmp::Ordering;

use super::FormatError;

/// The most names one expression may expand to; larger ones are refused so a typo
/// such as `node[0-99999999]` cannot exhaust memory.
pub const MAX_HOSTS: usize = 1_000_000;

/// The format name used in errors.
const FORMAT: &str = "hostlist";

/// Expands a hostlist expression into host names, in the order written, duplicates kept.
///
/// Whitespace around entries is ignored and an empty (or all-blank) expression
/// gives no names. Errors name the smallest offending token: an unbalanced entry
/// (`node[1-`), an empty entry (`,,`), a bad range (`[3-1]`, or just `3-1` when
/// its group holds other ranges too), a nested bracket, a number too large for
/// 64 bits, whitespace inside an entry, or an expression that would expand to
/// more than [`MAX_HOSTS`] names (checked before anything is allocated).
pub fn expand(expr: &str) -> Result<Vec<String>, FormatError> {
    if expr.trim().is_empty() {
        return Ok(Vec::new());
    }
    let entries = split_top_level(expr)
        .into_iter()
        .map(|(start, end)| parse_entry(expr, start, end))
        .collect::<Result<Vec<_>, _>>()?;
    let total = count_names(&entries)?;
    let mut names = Vec::with_capacity(total);
    for entry in &entries {
        expand_entry(&entry.pieces, &mut names);
    }
    Ok(names)
}

/// Compresses host names into the shortest sorted, de-duplicated hostlist expression.
///
/// Each name is split into a prefix and its trailing decimal digits. Names are
/// sorted by prefix, then by number (a name without trailing digits first, and
/// for equal numbers the shorter spelling first), and duplicates are dropped.
/// Consecutive numbers under one prefix merge into a range when each one reads
/// back the same at the range's width (the width of its first number): so
/// `node09,node10` gives `node[09-10]` and `node9,node10` gives `node[9-10]`.
/// Ranges under one prefix share a bracket group when they admit a common
/// zero-padding width, so `node001,node1` stay separate groups. A group holding a
/// single name prints without brackets (`login1`); names without trailing digits
/// are kept verbatim. Empty names are skipped.
///
/// `expand(&compress(names))` gives back the names in that sorted order, provided
/// no name contains `,`, `[`, `]` or whitespace.
pub fn compress<S: AsRef<str>>(names: &[S]) -> String {
    let sorted = sorted_unique(names);
    let groups = group_runs(build_runs(&sorted));
    groups
        .iter()
        .map(Group::render)
        .collect::<Vec<_>>()
        .join(",")
}

// ---------------------------------------------------------------------------
// Expansion
// ---------------------------------------------------------------------------

/// An inclusive range of numbers, printed zero-padded to `width` digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    lo: u64,
    hi: u64,
    width: usize,
}

impl Range {
    /// How many numbers the range holds (at least one).
    fn len(&self) -> u128 {
        u128::from(self.hi - self.lo) + 1
    }
}

/// One piece of an entry: literal text, or a bracket group of ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'a> {
    Literal(&'a str),
    Group(Vec<Range>),
}

/// A parsed entry and its (trimmed) text, kept for error messages.
#[derive(Debug)]
struct Entry<'a> {
    text: &'a str,
    pieces: Vec<Piece<'a>>,
}

/// Splits `expr` at the commas outside brackets, returning each entry's byte span.
fn split_top_level(expr: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in expr.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                spans.push((start, i));
                start = i + 1;
            }
            _ => {}
        }
    }
    spans.push((start, expr.len()));
    spans
}

/// Parses the entry at `expr[start..end]`.
fn parse_entry(expr: &str, start: usize, end: usize) -> Result<Entry<'_>, FormatError> {
    let text = expr[start..end].trim();
    if text.is_empty() {
        return Err(empty_entry(expr, start, end));
    }
    if text.contains(char::is_whitespace) {
        return Err(FormatError::new(
            FORMAT,
            text,
            "host names cannot contain whitespace; separate names with ','",
        ));
    }
    let pieces = parse_pieces(text)?;
    Ok(Entry { text, pieces })
}

/// The error for an empty entry, quoting it with the commas around it (`,,`).
fn empty_entry(expr: &str, start: usize, end: usize) -> FormatError {
    let from = start.saturating_sub(1);
    let to = (end + 1).min(expr.len());
    FormatError::new(
        FORMAT,
        &expr[from..to],
        "empty entry; entries are host names or name[ranges] separated by single commas",
    )
}

/// Splits an entry into literal text and bracket groups.
fn parse_pieces(entry: &str) -> Result<Vec<Piece<'_>>, FormatError> {
    let mut pieces = Vec::new();
    let mut rest = entry;
    while let Some(open) = rest.find(['[', ']']) {
        if open > 0 {
            pieces.push(Piece::Literal(&rest[..open]));
        }
        if rest[open..].starts_with(']') {
            return Err(unbalanced(entry, "a ']' without a matching '['"));
        }
        let after_open = &rest[open + 1..];
        let Some(close) = after_open.find(['[', ']']) else {
            return Err(unbalanced(entry, "a '[' without a matching ']'"));
        };
        let group = &rest[open..open + close + 2];
        if after_open[close..].starts_with('[') {
            return Err(FormatError::new(
                FORMAT,
                group,
                "brackets cannot be nested; write node[1-3] or a[1-2]b[1-2]",
            ));
        }
        pieces.push(Piece::Group(parse_group(group)?));
        rest = &after_open[close + 1..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Literal(rest));
    }
    Ok(pieces)
}

/// The error for an entry whose brackets do not balance.
fn unbalanced(entry: &str, what: &str) -> FormatError {
    FormatError::new(
        FORMAT,
        entry,
        format!("unbalanced brackets: {what}; write name[1-4,7]"),
    )
}

/// Parses a bracket group, `group` including its brackets, e.g. `[001-004,007]`.
fn parse_group(group: &str) -> Result<Vec<Range>, FormatError> {
    let body = &group[1..group.len() - 1];
    if body.is_empty() || body.split(',').any(str::is_empty) {
        return Err(FormatError::new(
            FORMAT,
            group,
            "empty range; brackets hold numbers or lo-hi ranges separated by ','",
        ));
    }
    let single = !body.contains(',');
    body.split(',')
        .map(|range| parse_range(range, if single { group } else { range }))
        .collect()
}

/// Parses `lo-hi` or a single number; `token` is what an error quotes.
fn parse_range(range: &str, token: &str) -> Result<Range, FormatError> {
    let (lo_text, hi_text) = range.split_once('-').unwrap_or((range, range));
    let lo = parse_number(lo_text, token)?;
    let hi = parse_number(hi_text, token)?;
    if lo > hi {
        return Err(FormatError::new(
            FORMAT,
            token,
            "range runs backwards; the lower bound comes first, as in [1-3]",
        ));
    }
    Ok(Range {
        lo,
        hi,
        width: lo_text.len(),
    })
}

/// Parses one bound of a range: decimal digits only, fitting in 64 bits.
fn parse_number(text: &str, token: &str) -> Result<u64, FormatError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FormatError::new(
            FORMAT,
            token,
            "ranges hold decimal numbers only: a number or lo-hi, as in [1-3,7]",
        ));
    }
    text.parse().map_err(|_| {
        FormatError::new(
            FORMAT,
            text,
            "number too large; host numbers must fit in 64 bits",
        )
    })
}

/// Counts the names the entries expand to, refusing more than [`MAX_HOSTS`].
fn count_names(entries: &[Entry<'_>]) -> Result<usize, FormatError> {
    let mut total: u128 = 0;
    for entry in entries {
        total = total.saturating_add(entry_size(&entry.pieces));
        if total > MAX_HOSTS as u128 {
            return Err(FormatError::new(
                FORMAT,
                entry.text,
                format!("the hostlist expands to more than {MAX_HOSTS} names"),
            ));
        }
    }
    // At most MAX_HOSTS here, so the conversion cannot fail.
    Ok(usize::try_from(total).unwrap_or(MAX_HOSTS))
}

/// How many names one entry expands to (saturating).
fn entry_size(pieces: &[Piece<'_>]) -> u128 {
    pieces
        .iter()
        .map(|piece| match piece {
            Piece::Literal(_) => 1,
            Piece::Group(ranges) => ranges
                .iter()
                .fold(0u128, |sum, range| sum.saturating_add(range.len())),
        })
        .fold(1u128, u128::saturating_mul)
}

/// Appends the names of one entry: groups vary fastest from the right.
fn expand_entry(pieces: &[Piece<'_>], out: &mut Vec<String>) {
    let mut names = vec![String::new()];
    for piece in pieces {
        match piece {
            Piece::Literal(text) => names.iter_mut().for_each(|name| name.push_str(text)),
            Piece::Group(ranges) => names = append_group(&names, ranges),
        }
    }
    out.extend(names);
}

/// Every name in `heads` followed by every number of the group, in order.
fn append_group(heads: &[String], ranges: &[Range]) -> Vec<String> {
    heads
        .iter()
        .flat_map(|head| {
            ranges.iter().flat_map(move |range| {
                (range.lo..=range.hi).map(move |n| format!("{head}{n:0w$}", w = range.width))
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Compression
// ---------------------------------------------------------------------------

/// A host name split into its prefix and trailing decimal digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Name<'a> {
    /// No trailing digits (or too many to be a 64-bit number): kept verbatim.
    Plain(&'a str),
    /// `prefix` followed by `digits`, which read as `number`.
    Numbered {
        prefix: &'a str,
        digits: &'a str,
        number: u64,
    },
}

impl<'a> Name<'a> {
    /// Splits `name` at its trailing digits.
    fn split(name: &'a str) -> Self {
        let prefix = name.trim_end_matches(|c: char| c.is_ascii_digit());
        let digits = &name[prefix.len()..];
        match digits.parse() {
            Ok(number) if !digits.is_empty() => Name::Numbered {
                prefix,
                digits,
                number,
            },
            _ => Name::Plain(name),
        }
    }

    /// The order [`compress`] sorts by: prefix, then number, then spelling length.
    fn sort_key(&self) -> (&'a str, Option<(u64, usize)>) {
        match *self {
            Name::Plain(name) => (name, None),
            Name::Numbered {
                prefix,
                digits,
                number,
            } => (prefix, Some((number, digits.len()))),
        }
    }
}

/// Compares host names the way [`compress`] orders them.
fn compare_names(a: &str, b: &str) -> Ordering {
    Name::split(a).sort_key().cmp(&Name::split(b).sort_key())
}

/// The non-empty names, sorted as [`compress`] orders them, without duplicates.
fn sorted_unique<S: AsRef<str>>(names: &[S]) -> Vec<&str> {
    let mut sorted: Vec<&str> = names
        .iter()
        .map(AsRef::as_ref)
        .filter(|name| !name.is_empty())
        .collect();
    sorted.sort_by(|a, b| compare_names(a, b));
    sorted.dedup();
    sorted
}

/// Whether the number spelt `digits`, printed zero-padded to `width` digits,
/// reads back as `digits` (so `09` fits width 2 only, `10` fits widths 1 and 2).
fn reads_back(digits: &str, width: usize) -> bool {
    let significant = digits.trim_start_matches('0').len().max(1);
    digits.len() == width.max(significant)
}

/// A run of consecutive numbers under one prefix, e.g. `09-12`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run<'a> {
    first: &'a str,
    last: &'a str,
    last_number: u64,
}

impl<'a> Run<'a> {
    /// A run holding one name's digits.
    fn new(digits: &'a str, number: u64) -> Self {
        Run {
            first: digits,
            last: digits,
            last_number: number,
        }
    }

    /// Extends the run by `digits` if it is the next number at the run's width.
    fn try_extend(&mut self, digits: &'a str, number: u64) -> bool {
        let next = self.last_number.checked_add(1) == Some(number);
        if next && reads_back(digits, self.first.len()) {
            self.last = digits;
            self.last_number = number;
            true
        } else {
            false
        }
    }

    /// The zero-padding widths, inclusive, at which every number of the run reads back.
    fn widths(&self) -> (usize, usize) {
        let len = self.first.len();
        if reads_back(self.first, 1) {
            (1, len)
        } else {
            (len, len)
        }
    }

    /// `first` or `first-last`.
    fn render(&self) -> String {
        if self.first == self.last {
            self.first.to_owned()
        } else {
            format!("{}-{}", self.first, self.last)
        }
    }
}

/// A name kept verbatim or a run of numbered names, in output order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item<'a> {
    Plain(&'a str),
    Run { prefix: &'a str, run: Run<'a> },
}

/// Folds sorted names into runs of consecutive numbers.
fn build_runs<'a>(sorted: &[&'a str]) -> Vec<Item<'a>> {
    let mut items: Vec<Item<'a>> = Vec::new();
    for name in sorted {
        match Name::split(name) {
            Name::Plain(name) => items.push(Item::Plain(name)),
            Name::Numbered {
                prefix,
                digits,
                number,
            } => {
                let extended = match items.last_mut() {
                    Some(Item::Run { prefix: p, run }) if *p == prefix => {
                        run.try_extend(digits, number)
                    }
                    _ => false,
                };
                if !extended {
                    let run = Run::new(digits, number);
                    items.push(Item::Run { prefix, run });
                }
            }
        }
    }
    items
}

/// One printed group: a verbatim name or `prefix[run,run]`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Group<'a> {
    Plain(&'a str),
    Ranges {
        prefix: &'a str,
        runs: Vec<Run<'a>>,
        widths: (usize, usize),
    },
}

impl Group<'_> {
    /// Prints the group; a single name goes without brackets.
    fn render(&self) -> String {
        match self {
            Group::Plain(name) => (*name).to_owned(),
            Group::Ranges { prefix, runs, .. } => match runs.as_slice() {
                [run] if run.first == run.last => format!("{prefix}{}", run.first),
                _ => {
                    let body: Vec<String> = runs.iter().map(Run::render).collect();
                    format!("{prefix}[{}]", body.join(","))
                }
            },
        }
    }
}

/// Puts consecutive runs under one prefix in one group when they share a width.
fn group_runs(items: Vec<Item<'_>>) -> Vec<Group<'_>> {
    let mut groups: Vec<Group<'_>> = Vec::new();
    for item in items {
        match item {
            Item::Plain(name) => groups.push(Group::Plain(name)),
            Item::Run { prefix, run } => {
                let joined = match groups.last_mut() {
                    Some(Group::Ranges {
                        prefix: p,
                        runs,
                        widths,
                    }) if *p == prefix => join_run(runs, widths, run),
                    _ => false,
                };
                if !joined {
                    let widths = run.widths();
                    let runs = vec![run];
                    groups.push(Group::Ranges {
                        prefix,
                        runs,
                        widths,
                    });
                }
            }
        }
    }
    groups
}

/// Adds `run` to a group if their padding widths overlap, narrowing the group's.
fn join_run<'a>(runs: &mut Vec<Run<'a>>, widths: &mut (usize, usize), run: Run<'a>) -> bool {
    let (lo, hi) = run.widths();
    let common = (widths.0.max(lo), widths.1.min(hi));
    if common.0 > common.1 {
        return false;
    }
    *widths = common;
    runs.push(run);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok(expr: &str) -> Vec<String> {
        expand(expr).unwrap()
    }

    fn err_token(expr: &str) -> String {
        let err = expand(expr).unwrap_err();
        assert_eq!(err.format, "hostlist");
        err.token
    }

    #[test]
    fn expands_padded_ranges_and_plain_names_in_order() {
        assert_eq!(
            ok("gpu-node[001-004,007],login1"),
            [
                "gpu-node001",
                "gpu-node002",
                "gpu-node003",
                "gpu-node004",
                "gpu-node007",
                "login1"
            ]
        );
    }

    #[test]
    fn width_comes_from_the_lower_bound() {
        assert_eq!(ok("n[8-11]"), ["n8", "n9", "n10", "n11"]);
        assert_eq!(ok("n[098-101]"), ["n098", "n099", "n100", "n101"]);
        assert_eq!(ok("n[0-2]"), ["n0", "n1", "n2"]);
        assert_eq!(ok("n[007]"), ["n007"]);
        assert_eq!(ok("n[1,03-04]"), ["n1", "n03", "n04"]);
    }

    #[test]
    fn keeps_order_and_duplicates() {
        assert_eq!(ok("b,a,b"), ["b", "a", "b"]);
        assert_eq!(ok("n[3,1,3]"), ["n3", "n1", "n3"]);
    }

    #[test]
    fn suffix_and_cartesian_product() {
        assert_eq!(ok("rack[1-2]-ib"), ["rack1-ib", "rack2-ib"]);
        assert_eq!(ok("r[1-2]n[1-2]"), ["r1n1", "r1n2", "r2n1", "r2n2"]);
        assert_eq!(ok("[1-2]"), ["1", "2"]);
        assert_eq!(ok("a[1-2]b[3]c"), ["a1b3c", "a2b3c"]);
    }

    #[test]
    fn trims_whitespace_and_accepts_empty_input() {
        assert_eq!(ok(" a , n[1-2] "), ["a", "n1", "n2"]);
        assert!(ok("").is_empty());
        assert!(ok("  \t").is_empty());
    }

    #[test]
    fn unbalanced_brackets_name_the_entry() {
        assert_eq!(err_token("a,node[1-"), "node[1-");
        assert_eq!(err_token("node1]"), "node1]");
        assert_eq!(err_token("node]1["), "node]1[");
        assert_eq!(err_token("n[1-2],x[3"), "x[3");
    }

    #[test]
    fn empty_entries_are_refused() {
        assert_eq!(err_token("a,,b"), ",,");
        assert_eq!(err_token(",a"), ",");
        assert_eq!(err_token("a,"), ",");
        assert_eq!(err_token("a, ,b"), ", ,");
    }

    #[test]
    fn bad_ranges_name_the_range() {
        assert_eq!(err_token("node[3-1]"), "[3-1]");
        assert_eq!(err_token("node[1,3-1]"), "3-1");
        assert_eq!(err_token("node[]"), "[]");
        assert_eq!(err_token("node[1,,2]"), "[1,,2]");
        assert_eq!(err_token("node[a-b]"), "[a-b]");
        assert_eq!(err_token("node[1-2-3]"), "[1-2-3]");
        assert_eq!(err_token("node[-3]"), "[-3]");
        assert_eq!(err_token("node[1-]"), "[1-]");
        assert_eq!(err_token("node[+1]"), "[+1]");
        assert_eq!(err_token("node[1,x]"), "x");
    }

    #[test]
    fn nested_brackets_are_refused() {
        assert_eq!(err_token("node[1[2]]"), "[1[");
    }

    #[test]
    fn overflowing_numbers_are_refused() {
        assert_eq!(
            err_token("n[1-99999999999999999999]"),
            "99999999999999999999"
        );
        assert_eq!(ok("n[18446744073709551615]"), ["n18446744073709551615"]);
    }

    #[test]
    fn whitespace_inside_an_entry_is_refused() {
        assert_eq!(err_token("a b"), "a b");
        assert_eq!(err_token("n[1, 2]"), "n[1, 2]");
    }

    #[test]
    fn too_many_names_are_refused_before_allocating() {
        assert_eq!(err_token("n[0-99999999]"), "n[0-99999999]");
        assert_eq!(
            err_token("n[0-18446744073709551615]"),
            "n[0-18446744073709551615]"
        );
        assert_eq!(err_token("a[1-1000]b[1-1001]"), "a[1-1000]b[1-1001]");
        let half = "n[1-500000]";
        assert_eq!(err_token(&format!("{half},{half},x")), "x");
        assert_eq!(ok(&format!("{half},{half}")).len(), MAX_HOSTS);
    }

    #[test]
    fn error_message_reads_well() {
        let err = expand("node[3-1]").unwrap_err();
        assert!(err.to_string().starts_with("invalid hostlist '[3-1]': "));
    }

    #[test]
    fn compress_examples() {
        assert_eq!(
            compress(&["n3", "n1", "n2", "n5", "login"]),
            "login,n[1-3,5]"
        );
        assert_eq!(compress(&["node09", "node10"]), "node[09-10]");
        assert_eq!(compress(&["node9", "node10"]), "node[9-10]");
        assert_eq!(compress(&["node001", "node1"]), "node1,node001");
        assert_eq!(compress(&["login1"]), "login1");
        assert_eq!(compress::<&str>(&[]), "");
    }

    #[test]
    fn compress_sorts_and_deduplicates() {
        assert_eq!(compress(&["b2", "a1", "b1", "a1", "b2"]), "a1,b[1-2]");
        assert_eq!(compress(&["n10", "n9", "n2"]), "n[2,9-10]");
        assert_eq!(compress(&["n", "n1", "m"]), "m,n,n1");
    }

    #[test]
    fn compress_keeps_padding_groups_apart() {
        let names = ["gpu-node001", "gpu-node002", "gpu-node003", "gpu-node007"];
        assert_eq!(compress(&names), "gpu-node[001-003,007]");
        assert_eq!(compress(&["n098", "n099", "n100", "n101"]), "n[098-101]");
        assert_eq!(compress(&["n09", "n10", "n12"]), "n[09-10,12]");
        assert_eq!(compress(&["n1", "n01", "n2"]), "n1,n01,n2");
        assert_eq!(compress(&["n8", "n09"]), "n8,n09");
    }

    #[test]
    fn compress_handles_names_without_prefix_or_digits() {
        assert_eq!(compress(&["3", "1", "2"]), "[1-3]");
        assert_eq!(compress(&["", "a"]), "a");
        let huge = "n123456789012345678901234567890";
        assert_eq!(compress(&[huge]), huge);
    }

    #[test]
    fn compress_does_not_overflow_at_the_top() {
        let names = ["n18446744073709551614", "n18446744073709551615"];
        let expr = compress(&names);
        assert_eq!(expr, "n[18446744073709551614-18446744073709551615]");
        assert_eq!(ok(&expr), names);
    }

    fn host_name() -> impl Strategy<Value = String> {
        let number = prop::option::of((0u64..2000, 0usize..5));
        ("[a-c][a-c0-9-]{0,3}", number).prop_map(|(prefix, number)| match number {
            Some((n, width)) => format!("{prefix}{n:0width$}"),
            None => prefix,
        })
    }

    fn sorted_unique_owned(names: &[String]) -> Vec<String> {
        let mut sorted = names.to_vec();
        sorted.sort_by(|a, b| compare_names(a, b));
        sorted.dedup();
        sorted
    }

    proptest! {
        #[test]
        fn expand_inverts_compress(names in prop::collection::vec(host_name(), 0..40)) {
            let expr = compress(&names);
            prop_assert_eq!(expand(&expr).unwrap(), sorted_unique_owned(&names));
        }

        #[test]
        fn compress_is_idempotent_through_expand(
            names in prop::collection::vec(host_name(), 0..40)
        ) {
            let expr = compress(&names);
            prop_assert_eq!(compress(&expand(&expr).unwrap()), expr);
        }

        #[test]
        fn expand_never_panics(expr in "\\PC{0,40}") {
            let _ = expand(&expr);
        }

        #[test]
        fn expand_never_panics_on_hostlist_like_text(expr in "[a-c0-9\\[\\],\\- ]{0,30}") {
            let _ = expand(&expr);
        }
    }
}
