//! Running a job on this node: the environment Slurm gives a batch script and its
//! tasks ([`environment`]), and the processes (own process group, the job's user,
//! output files, signals, exit status) ([`process`]), and its checkpoint
//! directory ([`checkpoint_dir`]).

pub mod checkpoint_dir;
pub mod environment;
pub mod process;
