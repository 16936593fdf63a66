//! corral-jepsen: history format and checkers (not started yet).
//!
//! It will own the recorded history of a chaos run (invocations, completions,
//! indeterminate outcomes) and one checker per safety invariant: no acknowledged
//! job lost, no GPU given to two live attempts, every requeued job resumed from its
//! last committed checkpoint, leadership keyed by (term, node id).
