//! The syntax slurm.conf, gres.conf and topology.conf share, as Slurm's
//! `parse_config.c` reads it: `#` starts a comment (`\#` does not), a line
//! ending in an odd number of `\` continues on the next one (joined as written,
//! no space added), `\x` stands for `x`, a line is `Key=Value` pairs separated
//! by whitespace (keys are letters, digits, `_` and `.`, case-insensitive;
//! spaces around `=` are allowed; a value with spaces is quoted), and a line
//! that starts with the word `Include` names another file.

use std::sync::Arc;

use super::location::{ImportError, Location};

/// One `Key=Value` pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    /// The key as written.
    pub key: String,
    /// The value, quotes removed.
    pub value: String,
    /// The line it is on.
    pub at: Location,
}

impl Pair {
    /// True when the key is `name`, ignoring case.
    pub fn is(&self, name: &str) -> bool {
        self.key.eq_ignore_ascii_case(name)
    }
}

/// What one logical line holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// `Key=Value` pairs, in order.
    Pairs(Vec<Pair>),
    /// `Include FILE`: the file name as written (`%c` not yet replaced).
    Include {
        /// The line.
        at: Location,
        /// The file name.
        path: String,
    },
}

/// Parses one file's text; `file` names it in locations.
pub fn parse(file: &Arc<str>, text: &str) -> Result<Vec<Item>, ImportError> {
    let mut items = Vec::new();
    for (line, content) in logical_lines(text) {
        let at = Location::new(file, line);
        let content = strip_escapes(&content);
        let trimmed = content.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some(path) = include_target(&at, trimmed)? {
            items.push(Item::Include { at, path });
            continue;
        }
        items.push(Item::Pairs(pairs(&at, trimmed)?));
    }
    Ok(items)
}

/// Lines with comments removed and continuations joined, each with the number
/// of its first physical line.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (index, raw) in text.split('\n').enumerate() {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let without_comment = strip_comment(raw);
        let (body, continues) = split_continuation(without_comment);
        let (start, mut joined) = pending.take().unwrap_or((index + 1, String::new()));
        joined.push_str(body);
        if continues {
            pending = Some((start, joined));
        } else {
            lines.push((start, joined));
        }
    }
    if let Some(last) = pending {
        lines.push(last);
    }
    lines
}

/// The line up to its first `#` not preceded by an odd number of `\`.
fn strip_comment(line: &str) -> &str {
    let mut backslashes = 0usize;
    for (i, c) in line.char_indices() {
        match c {
            '#' if backslashes.is_multiple_of(2) => return &line[..i],
            '\\' => backslashes += 1,
            _ => backslashes = 0,
        }
    }
    line
}

/// Splits off a continuation: trailing whitespace, then an odd number of `\`
/// at the end; the last `\` (and the whitespace after it) is removed.
fn split_continuation(line: &str) -> (&str, bool) {
    let trimmed = line.trim_end();
    let backslashes = trimmed.len() - trimmed.trim_end_matches('\\').len();
    if !backslashes.is_multiple_of(2) {
        (&trimmed[..trimmed.len() - 1], true)
    } else {
        (line, false)
    }
}

/// `\x` becomes `x` (so `\\` is one backslash and `\#` a hash).
fn strip_escapes(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The file an `Include` line names, or `None` for any other line.
fn include_target(at: &Location, line: &str) -> Result<Option<String>, ImportError> {
    let Some(head) = line.get(..7) else {
        return Ok(None);
    };
    let rest = &line[7..];
    if !head.eq_ignore_ascii_case("include") || !rest.starts_with(char::is_whitespace) {
        return Ok(None);
    }
    let mut words = rest.split_whitespace();
    let path = words.next().unwrap_or_default().to_string();
    if let Some(extra) = words.next() {
        return Err(ImportError::at(
            at,
            format!(
                "'{extra}' after the file name of an Include line; name one file per Include line"
            ),
        ));
    }
    Ok(Some(path))
}

/// True for characters Slurm allows in a key.
fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// Splits a line into `Key=Value` pairs.
fn pairs(at: &Location, line: &str) -> Result<Vec<Pair>, ImportError> {
    let mut pairs = Vec::new();
    let mut rest = line.trim_start();
    while !rest.is_empty() {
        let key_len = rest.find(|c: char| !is_key_char(c)).unwrap_or(rest.len());
        let token = rest.split_whitespace().next().unwrap_or(rest);
        if key_len == 0 {
            return Err(ImportError::at(
                at,
                format!("'{token}' is not a Key=Value pair; keys are letters, digits, '_' and '.'"),
            ));
        }
        let key = &rest[..key_len];
        let after_key = rest[key_len..].trim_start();
        let after_op = match after_key.chars().next() {
            Some(op @ ('+' | '-' | '*' | '/')) if after_key[1..].starts_with('=') => {
                return Err(ImportError::at(
                    at,
                    format!(
                        "{key}{op}= changes a value in place, which an import cannot follow; write {key}=VALUE"
                    ),
                ));
            }
            Some('=') => &after_key[1..],
            _ => {
                return Err(ImportError::at(
                    at,
                    format!("'{token}' has no '='; write {key}=VALUE"),
                ));
            }
        };
        let (value, remaining) = value(at, key, after_op)?;
        pairs.push(Pair {
            key: key.to_string(),
            value,
            at: at.clone(),
        });
        rest = remaining.trim_start();
    }
    Ok(pairs)
}

/// The value after `=` and what follows it. A quoted value may hold spaces; an
/// unquoted one runs to the next whitespace. `Key= Other=1` (and `Key=` at the
/// end of the line) gives an empty value, as slurm.conf's `Nodes= ` does.
fn value<'a>(at: &Location, key: &str, text: &'a str) -> Result<(String, &'a str), ImportError> {
    let spaced = text.starts_with(char::is_whitespace);
    let text_after = text.trim_start();
    if let Some(quoted) = text_after.strip_prefix('"') {
        let Some(end) = quoted.find('"') else {
            return Err(ImportError::at(
                at,
                format!("the quoted value of {key} has no closing '\"'"),
            ));
        };
        let remaining = &quoted[end + 1..];
        if !(remaining.is_empty() || remaining.starts_with(char::is_whitespace)) {
            return Err(ImportError::at(
                at,
                format!(
                    "text right after the closing quote of {key}; put a space before the next Key=Value"
                ),
            ));
        }
        return Ok((quoted[..end].to_string(), remaining));
    }
    let end = text_after
        .find(char::is_whitespace)
        .unwrap_or(text_after.len());
    let word = &text_after[..end];
    if word.is_empty() || (spaced && word.contains('=')) {
        return Ok((String::new(), text));
    }
    Ok((word.to_string(), &text_after[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> Arc<str> {
        Arc::from("slurm.conf")
    }

    fn keys_values(text: &str) -> Vec<Vec<(String, String)>> {
        parse(&file(), text)
            .unwrap()
            .into_iter()
            .map(|item| match item {
                Item::Pairs(pairs) => pairs.into_iter().map(|p| (p.key, p.value)).collect(),
                Item::Include { path, .. } => vec![("Include".to_string(), path)],
            })
            .collect()
    }

    fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn pairs_comments_and_blank_lines() {
        let text =
            "# a comment\n\nClusterName=tux   # trailing\nSlurmctldPort=7002 SlurmdPort=7003\n";
        assert_eq!(
            keys_values(text),
            vec![
                kv(&[("ClusterName", "tux")]),
                kv(&[("SlurmctldPort", "7002"), ("SlurmdPort", "7003")]),
            ]
        );
    }

    #[test]
    fn quoted_values_keep_their_spaces() {
        assert_eq!(
            keys_values("DownNodes=dev20 State=DOWN Reason=\"power,ETA=Dec25\"\n"),
            vec![kv(&[
                ("DownNodes", "dev20"),
                ("State", "DOWN"),
                ("Reason", "power,ETA=Dec25")
            ])]
        );
        assert_eq!(
            keys_values("NodeName=a Reason=\"two words\" CPUs=2"),
            vec![kv(&[
                ("NodeName", "a"),
                ("Reason", "two words"),
                ("CPUs", "2")
            ])]
        );
    }

    #[test]
    fn continuation_joins_lines_as_written_and_names_the_first_line() {
        let text = "ClusterName=c\nNodeName=gpu[01-02] \\\n   CPUs=64 \\  \n   RealMemory=1000\nPartitionName=p Nodes=gpu[01-\\\n02]\n";
        let items = parse(&file(), text).unwrap();
        assert_eq!(items.len(), 3);
        let Item::Pairs(node) = &items[1] else {
            panic!("not pairs")
        };
        assert_eq!(node[0].at.line, 2);
        assert_eq!(
            keys_values(text)[1],
            kv(&[
                ("NodeName", "gpu[01-02]"),
                ("CPUs", "64"),
                ("RealMemory", "1000")
            ])
        );
        assert_eq!(
            keys_values(text)[2],
            kv(&[("PartitionName", "p"), ("Nodes", "gpu[01-02]")])
        );
    }

    #[test]
    fn escaped_hashes_and_backslashes() {
        assert_eq!(
            keys_values("MailProg=/bin/mail\\#x  # comment\nA=b\\\\\n"),
            vec![kv(&[("MailProg", "/bin/mail#x")]), kv(&[("A", "b\\")])]
        );
    }

    #[test]
    fn spaces_around_equals_and_blank_values() {
        assert_eq!(
            keys_values("KillWait = 30\nPartitionName=empty Nodes= State=UP\nNodes="),
            vec![
                kv(&[("KillWait", "30")]),
                kv(&[("PartitionName", "empty"), ("Nodes", ""), ("State", "UP")]),
                kv(&[("Nodes", "")]),
            ]
        );
    }

    #[test]
    fn include_lines_name_a_file() {
        assert_eq!(
            keys_values("include /etc/slurm/%c_nodes.conf\nIncludeX=1\n"),
            vec![
                kv(&[("Include", "/etc/slurm/%c_nodes.conf")]),
                kv(&[("IncludeX", "1")]),
            ]
        );
    }

    #[test]
    fn bad_lines_say_where_and_what_to_do() {
        let err = parse(&file(), "A=1\nNodeName gpu1\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "slurm.conf:2: 'NodeName' has no '='; write NodeName=VALUE"
        );
        let err = parse(&file(), "Reason=\"open\n").unwrap_err();
        assert!(err.to_string().contains("no closing"), "{err}");
        let err = parse(&file(), "Nodes+=a\n").unwrap_err();
        assert!(err.to_string().contains("write Nodes=VALUE"), "{err}");
        let err = parse(&file(), "=x\n").unwrap_err();
        assert!(err.to_string().contains("not a Key=Value pair"), "{err}");
    }
}
