//! corral-scheduler: the pure scheduling policy (issue 3, not started yet).
//!
//! It will own `plan(&ClusterView, now) -> Plan`: multifactor priority, fair-share
//! over the account tree, gang allocation, topology-aware placement, backfill and
//! preemption. It reads a view of `corral-state` and returns a plan; it never does
//! I/O, reads no clock and uses no randomness.
