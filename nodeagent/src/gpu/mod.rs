//! GPU health behind one trait, with an NVML backend for real GPUs and a
//! simulated backend whose faults are injected from outside; and the table that
//! maps an XID error to what the agent does about it.
