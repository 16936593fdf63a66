//! The scenario fixture format: splitting a `.txt` file into its input (cluster,
//! queue, `now`) and its expected plan, building the state through `Command`s
//! ([`build`]), and rendering a plan as canonical text ([`render`]). The format
//! itself is documented at the top of `tests/scenarios.rs`.

pub mod build;
pub mod render;

use corral_state::Timestamp;

/// The line separating the input from the expected plan.
pub const SEPARATOR: &str = "---";

/// One input line: its 1-based number in the file and its words, comments removed.
#[derive(Debug, Clone)]
pub struct Line {
    /// Line number in the file, for messages.
    pub number: usize,
    /// Whitespace-separated words.
    pub words: Vec<String>,
}

/// A parsed scenario file.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Everything up to and including the separator line, verbatim (kept by BLESS).
    pub input_text: String,
    /// The input lines that carry words, in file order (`now` excluded).
    pub lines: Vec<Line>,
    /// When the pass runs.
    pub now: Timestamp,
    /// The expected section, normalised (trimmed lines, blank lines dropped).
    pub expected: String,
}

/// Removes a comment: `#` at the start of the line or after whitespace.
fn strip_comment(line: &str) -> &str {
    let mut previous_is_space = true;
    for (i, c) in line.char_indices() {
        if c == '#' && previous_is_space {
            return &line[..i];
        }
        previous_is_space = c.is_whitespace();
    }
    line
}

/// Trims every line and drops blank ones.
pub fn normalise(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Parses a whole number of seconds (`3600`) into a timestamp.
pub fn parse_secs(value: &str) -> Result<Timestamp, String> {
    value
        .parse::<u64>()
        .map(Timestamp::from_secs)
        .map_err(|_| format!("'{value}' is not a whole number of seconds"))
}

impl Scenario {
    /// Splits and parses a scenario file.
    pub fn parse(text: &str) -> Result<Scenario, String> {
        let mut lines = Vec::new();
        let mut now = None;
        let mut input_end = None;
        let mut offset = 0;
        for (index, raw) in text.split_inclusive('\n').enumerate() {
            offset += raw.len();
            let number = index + 1;
            if raw.trim_end() == SEPARATOR {
                input_end = Some(offset);
                break;
            }
            let words: Vec<String> = strip_comment(raw)
                .split_whitespace()
                .map(str::to_string)
                .collect();
            if words.is_empty() {
                continue;
            }
            if now.is_some() {
                return Err(format!(
                    "line {number}: nothing but comments may follow `now` before `{SEPARATOR}`"
                ));
            }
            if words[0] == "now" {
                let [_, secs] = words.as_slice() else {
                    return Err(format!("line {number}: expected `now SECONDS`"));
                };
                now = Some(parse_secs(secs).map_err(|e| format!("line {number}: {e}"))?);
                continue;
            }
            lines.push(Line { number, words });
        }
        let input_end = input_end.ok_or_else(|| {
            format!("no `{SEPARATOR}` line separating the input from the expected plan")
        })?;
        let now = now.ok_or("the input has no `now SECONDS` line")?;
        Ok(Scenario {
            input_text: text[..input_end].to_string(),
            lines,
            now,
            expected: normalise(&text[input_end..]),
        })
    }

    /// The file with its expected section replaced by `actual` (for BLESS).
    pub fn blessed(&self, actual: &str) -> String {
        let mut text = self.input_text.clone();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        if !actual.is_empty() {
            text.push_str(actual);
            text.push('\n');
        }
        text
    }
}

/// A line-by-line diff of `expected` and `actual` (longest common subsequence),
/// `-` for expected lines missing, `+` for actual lines not expected.
pub fn diff(expected: &str, actual: &str) -> String {
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = actual.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = String::new();
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!("    {}\n", a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("  + {}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("  - {}\n", a[i]));
            i += 1;
        }
    }
    out
}
