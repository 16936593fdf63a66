//! How the CLI prints: Slurm-style tables (squeue, sinfo, sacct), `show job`'s
//! field list and the cluster summary, each a pure function from domain records
//! to text so it is tested without a cluster.
