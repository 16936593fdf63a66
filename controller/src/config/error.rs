//! Why a configuration was refused: the file, the key path (`partitions[1].max_time`)
//! and the reason, or toml's own message with line and column for a syntax error.

use std::path::{Path, PathBuf};

/// A configuration that cannot be used. Displays as
/// `corral.toml: partitions[1].max_time: "7-25:00:00" is not a time limit (...)`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: cannot read the configuration file", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("{}: {message}", file.display())]
    Syntax {
        /// The file.
        file: PathBuf,
        /// Line of the error, from 1.
        line: usize,
        /// Column of the error, from 1.
        column: usize,
        /// toml's message, with the offending line and a caret.
        message: String,
    },
    /// A key is unknown, missing, of the wrong type, or holds a wrong value.
    #[error("{}: {key}: {reason}", file.display())]
    Invalid {
        /// The file.
        file: PathBuf,
        /// Where in the file, e.g. `partitions[1].max_time` (arrays count from 0).
        key: String,
        /// What is wrong and what is accepted instead.
        reason: String,
    },
}

impl ConfigError {
    /// The file the error is about.
    pub fn file(&self) -> &Path {
        match self {
            ConfigError::Read { file, .. }
            | ConfigError::Syntax { file, .. }
            | ConfigError::Invalid { file, .. } => file,
        }
    }

    /// The key path, for errors about one key.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { key, .. } => Some(key),
            _ => None,
        }
    }

    /// The reason, without the file and key.
    pub fn reason(&self) -> String {
        match self {
            ConfigError::Read { source, .. } => source.to_string(),
            ConfigError::Syntax { message, .. } => message.clone(),
            ConfigError::Invalid { reason, .. } => reason.clone(),
        }
    }

    /// Turns a toml error met while reading `text` into a syntax error, or into an
    /// error about `key` when the document parsed but a value did not fit.
    pub(crate) fn from_toml(
        file: &Path,
        text: &str,
        key: Option<String>,
        error: toml::de::Error,
    ) -> Self {
        let position = error.span().map(|span| line_and_column(text, span.start));
        match key {
            None => {
                let (line, column) = position.unwrap_or((1, 1));
                ConfigError::Syntax {
                    file: file.to_path_buf(),
                    line,
                    column,
                    message: error.to_string().trim_end().to_string(),
                }
            }
            Some(key) => {
                let at_top = key.is_empty();
                let (key, reason) = explain_mismatch(key, error.message());
                // A missing key is reported at the start of its table, which at
                // the top level is no help.
                let reason = match (position, at_top, reason.starts_with("missing")) {
                    (None, _, _) | (_, true, true) => reason,
                    (Some((line, _)), false, true) => format!("{reason} (table at line {line})"),
                    (Some((line, column)), _, false) => {
                        format!("{reason} (line {line}, column {column})")
                    }
                };
                ConfigError::Invalid {
                    file: file.to_path_buf(),
                    key,
                    reason,
                }
            }
        }
    }
}

/// A refusal found while checking values, before the file name is attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The key path.
    pub key: String,
    /// What is wrong.
    pub reason: String,
}

impl Refusal {
    /// A refusal of `key` for `reason`.
    pub(crate) fn new(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Refusal {
            key: key.into(),
            reason: reason.into(),
        }
    }

    /// Names the file.
    pub(crate) fn in_file(self, file: &Path) -> ConfigError {
        ConfigError::Invalid {
            file: file.to_path_buf(),
            key: self.key,
            reason: self.reason,
        }
    }
}

/// serde says "missing field `x`" about the table holding `x`; name `x` itself.
fn explain_mismatch(key: String, message: &str) -> (String, String) {
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.strip_suffix('`'));
    match missing {
        Some(field) if key.is_empty() => {
            (field.to_string(), "missing; this key is required".into())
        }
        Some(field) => (
            format!("{key}.{field}"),
            "missing; this key is required".into(),
        ),
        None if key.is_empty() => ("(top level)".into(), message.to_string()),
        None => (key, message.to_string()),
    }
}

/// Line and column (both from 1, columns in characters) of byte `offset` in `text`.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns_count_from_one() {
        assert_eq!(line_and_column("a = 1\nbc = 2", 0), (1, 1));
        assert_eq!(line_and_column("a = 1\nbc = 2", 7), (2, 2));
        assert_eq!(line_and_column("a", 99), (1, 2));
    }

    #[test]
    fn missing_fields_are_named_by_their_own_path() {
        let (key, reason) = explain_mismatch("partitions[0]".into(), "missing field `name`");
        assert_eq!(key, "partitions[0].name");
        assert!(reason.starts_with("missing"));
        let (key, _) = explain_mismatch(String::new(), "missing field `cluster_name`");
        assert_eq!(key, "cluster_name");
    }
}
