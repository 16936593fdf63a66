//! Job steps (`srun` inside an allocation), run by the agents without the
//! controllers: `coordinator` takes `srun`'s request on the node's step socket
//! and fans it out; `peer` carries a node's share between agents over QUIC;
//! `tasks` runs a node's share; `shape` lays a step out on the allocation.
//!
//! Steps survive a controller failover untouched. They end with their attempt:
//! the tasks' process groups belong to the attempt in the
//! [`Supervisor`](crate::supervisor::Supervisor), so a kill, an XID or fencing
//! ends them with the batch script.

pub mod allocation;
pub mod coordinator;
pub mod peer;
pub mod shape;
pub mod tasks;
pub mod usage;
