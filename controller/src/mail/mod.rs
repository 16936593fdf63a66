//! Job mail (`--mail-type`, `--mail-user`): which notices a job's changes call
//! for (`notices`, pure) and the leader's mailer that hands them to the
//! configured mail program (`sender`), as Slurm's slurmctld runs `MailProg`.

pub mod notices;
pub mod sender;
