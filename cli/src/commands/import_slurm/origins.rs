//! Which Slurm line each corral.toml key or table came from, written beside
//! it in the output as a comment, so the operator can check the translation.

use std::collections::BTreeMap;

use super::parse::Pair;

/// Comments by key path (`priority.weight_age`, `nodes[2]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origins {
    comments: BTreeMap<String, String>,
}

impl Origins {
    /// `path` came from `pair`.
    pub fn came_from(&mut self, path: impl Into<String>, pair: &Pair) {
        self.set(path, format!("{}={} ({})", pair.key, pair.value, pair.at));
    }

    /// `path` gets the comment `text`.
    pub fn set(&mut self, path: impl Into<String>, text: impl Into<String>) {
        self.comments.insert(path.into(), text.into());
    }

    /// The comment for `path`.
    pub fn get(&self, path: &str) -> Option<&str> {
        self.comments.get(path).map(String::as_str)
    }
}
