//! Running a job on this node: the environment Slurm gives a batch script and its
//! tasks, and the processes (own process group, the job's user, output files,
//! signals, exit status).
