//! Where a value came from (a file and a line), and the one error the import
//! returns: what was wrong there and what to do about it.

use std::fmt;
use std::sync::Arc;

/// A line of an input file, as the user named the file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// The file, as given on the command line or in an `Include` line.
    pub file: Arc<str>,
    /// The line, from 1; a continued line is named by its first line.
    pub line: usize,
}

impl Location {
    /// Line `line` of `file`.
    pub fn new(file: &Arc<str>, line: usize) -> Self {
        Location {
            file: Arc::clone(file),
            line,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// Input the import cannot turn into a corral.toml: the place, what is wrong
/// and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", at.as_ref().map(|at| format!("{at}: ")).unwrap_or_default())]
pub struct ImportError {
    /// Where, when one line is to blame.
    pub at: Option<Location>,
    /// What was wrong, and what to do.
    pub message: String,
}

impl ImportError {
    /// An error at `at`.
    pub fn at(at: &Location, message: impl Into<String>) -> Self {
        ImportError {
            at: Some(at.clone()),
            message: message.into(),
        }
    }

    /// An error about the input as a whole.
    pub fn general(message: impl Into<String>) -> Self {
        ImportError {
            at: None,
            message: message.into(),
        }
    }
}
