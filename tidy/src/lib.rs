//! corral-tidy: repository rules checked by `cargo test` (see `tests/tidy.rs`):
//! every Rust module opens with a `//!` doc saying what it owns, no `utils`-style
//! grab-bag modules exist, and the pure crates depend only on what ARCHITECTURE.md
//! allows them.
