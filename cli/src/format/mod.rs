//! How the CLI prints: Slurm-style tables (squeue, sinfo, sacct), `show job`'s
//! field list and the cluster summary, each a pure function from domain records
//! to text so it is tested without a cluster. Times are printed in UTC.

pub mod acct;
pub mod acct_fields;
pub mod acct_step_fields;
pub mod cluster;
pub mod datetime;
pub mod elapsed;
pub mod format_spec;
pub mod job_fields;
pub mod node_list;
pub mod node_state;
pub mod nodes;
pub mod print_fields;
pub mod queue;
pub mod queue_fields;
pub mod queue_rows;
pub mod reason;
pub mod show_config;
pub mod show_job;
pub mod show_node;
pub mod show_reservation;
pub mod sinfo_fields;
pub mod sinfo_reservations;
pub mod sprio;
pub mod sshare;
pub mod sstat_fields;
pub mod table;
pub mod terminal_safe;
pub mod usage;

pub use cluster::cluster_status;
pub use nodes::{Columns, SinfoOptions, sinfo};
pub use queue::{QueueOptions, queue_table};
pub use show_job::show_job;
pub use usage::usage_table;
#[cfg(test)]
mod test_jobs;
