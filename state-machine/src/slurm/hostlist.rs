//! Hostlist expressions: `gpu-node[001-004,007],login1` expanded to names and
//! names compressed back, keeping zero-padding.

use super::FormatError;

/// The most names one expression may expand to; larger ones are refused so a typo
/// such as `node[0-99999999]` cannot exhaust memory.
pub const MAX_HOSTS: usize = 1_000_000;

/// Expands a hostlist expression into host names, in the order written, duplicates kept.
pub fn expand(expr: &str) -> Result<Vec<String>, FormatError> {
    let _ = expr;
    todo!()
}

/// Compresses host names into the shortest sorted, de-duplicated hostlist expression.
pub fn compress<S: AsRef<str>>(names: &[S]) -> String {
    let _ = names;
    todo!()
}
