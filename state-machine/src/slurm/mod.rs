//! Slurm's text formats, parsed into typed values and printed back.
//!
//! One module per format; each returns [`FormatError`] naming the bad token. These
//! are pure functions shared by the CLI (parsing `sbatch` options and `#SBATCH`
//! lines), the controller (configuration) and the node agent (the `SLURM_*`
//! environment).

pub mod array;
pub mod begin;
pub mod dependency;
pub mod duration;
pub mod error;
pub mod filename_pattern;
pub mod gres;
pub mod hostlist;
pub mod mail;
pub mod mail_user;
pub mod memory;
pub mod repeated_counts;
pub mod sbatch;
pub mod signal;
pub mod update_fields;

pub use error::FormatError;
