//! How long a job has run: the current attempt's run time, measured to the
//! attempt's end (or `now` while it runs), and the forms squeue and sacct print.

use corral_state::Timestamp;
use corral_state::job::{Attempt, Job, JobState};
use corral_state::slurm::duration::{TimeLimit, format_elapsed, format_time_limit};

/// Seconds from the attempt's start to the end decided for it (the end of its
/// accounting), or to `now` while it still runs.
pub fn attempt_elapsed_secs(attempt: &Attempt, now: Timestamp) -> u64 {
    let until = attempt
        .end
        .as_ref()
        .map(|end| end.at)
        .or_else(|| attempt.ending.as_ref().map(|ending| ending.at))
        .unwrap_or(now);
    until.secs_since(attempt.started_at)
}

/// The run time squeue shows: the newest attempt's, and zero while the job
/// waits in the queue (also after a requeue).
pub fn job_elapsed_secs(job: &Job, now: Timestamp) -> u64 {
    if matches!(job.state, JobState::Pending | JobState::RequeueHold) {
        return 0;
    }
    job.current_attempt()
        .map_or(0, |attempt| attempt_elapsed_secs(attempt, now))
}

/// squeue's TIME column: `M:SS`, `H:MM:SS` or `D-HH:MM:SS`.
pub fn squeue_time(secs: u64) -> String {
    format_elapsed(secs)
}

/// sacct's Elapsed and scontrol's RunTime: `HH:MM:SS` or `D-HH:MM:SS`.
pub fn sacct_time(secs: u64) -> String {
    format_time_limit(TimeLimit::Seconds(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::Command;
    use corral_state::testkit::{at, cluster, exit, ok, spec, start, submit};

    #[test]
    fn forms() {
        assert_eq!(squeue_time(0), "0:00");
        assert_eq!(squeue_time(83), "1:23");
        assert_eq!(squeue_time(3723), "1:02:03");
        assert_eq!(squeue_time(90_061), "1-01:01:01");
        assert_eq!(sacct_time(0), "00:00:00");
        assert_eq!(sacct_time(83), "00:01:23");
        assert_eq!(sacct_time(90_061), "1-01:01:01");
    }

    #[test]
    fn pending_is_zero_running_counts_to_now_ended_counts_to_end() {
        let mut state = cluster(1, 8);
        let id = submit(&mut state, spec("alice", 1, 8), at(10));
        assert_eq!(job_elapsed_secs(state.job(id).unwrap(), at(500)), 0);
        start(&mut state, id, at(100));
        assert_eq!(job_elapsed_secs(state.job(id).unwrap(), at(190)), 90);
        ok(
            &mut state,
            Command::BatchExited {
                job: id,
                attempt: 1,
                node: "n1".into(),
                status: exit(0),
                at: at(160),
            },
        );
        let job = state.job(id).unwrap();
        assert_eq!(job_elapsed_secs(job, at(10_000)), 60);
        assert_eq!(attempt_elapsed_secs(&job.attempts[0], at(10_000)), 60);
    }
}
