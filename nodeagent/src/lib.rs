//! corral-agent: the node agent's parts. `gpu` watches GPU health (NVML or a
//! simulated backend) and maps XID errors to actions; `job` builds Slurm's
//! environment and runs and kills job processes.

pub mod gpu;
pub mod job;
