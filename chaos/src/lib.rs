//! corral-chaos: the fault-injection harness (not started yet).
//!
//! It will start controllers and agents as real processes, kill (SIGKILL), pause
//! (SIGSTOP) and partition them, inject XID errors through the simulated GPU
//! backend, drive workloads, and record histories that `corral-jepsen` checks.
