//! Re-exports the shared test fixtures of `corral_state::testkit`.
#![allow(unused_imports)]

pub use corral_state::testkit::*;
