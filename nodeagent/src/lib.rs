//! corral-agent: the node agent's parts. `gpu` watches GPU health (NVML or a
//! simulated backend) and maps XID errors to actions, and `gpu_probe` shows an
//! operator what it sees (`corral-agent gpus`); `job` builds Slurm's
//! environment and runs and kills job processes; `supervisor` holds the attempts
//! of this node (each an explicit state machine); `attempt_journal` remembers
//! them across agent restarts, and `recovery` deals at start with what earlier
//! agents left; `link` finds the leader and talks to it over QUIC; `lease` is
//! what fencing watches; `outbox` keeps reports until the leader acknowledges
//! them, and `fence_watch` kills a dead agent's jobs when its lease runs
//! out; `step` runs job steps (`srun`) across the allocation's agents and
//! takes checkpoint reports from jobs.

pub mod attempt_journal;
pub mod fence_watch;
pub mod gpu;
pub mod gpu_probe;
pub mod job;
pub mod job_signals;
pub mod lease;
pub mod link;
pub mod metrics;
pub mod outage;
pub mod outbox;
pub mod recovery;
pub mod resources;
pub mod step;
pub mod supervisor;
