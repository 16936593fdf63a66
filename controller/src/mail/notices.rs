//! Which mails a job's change calls for, and their words, as Slurm 22.05's
//! slurmctld writes them (pure: tested without a cluster).
//!
//! - `BEGIN` when an attempt starts: `Slurm Job_id=12 Name=train Began,
//!   Queued time 00:00:04`.
//! - `END` when the job completes or is cancelled, `FAIL` when it fails, times
//!   out, loses a node or is preempted for good (Slurm sends `END` for neither
//!   of those): `... Ended, Run time 01:00:00, COMPLETED, ExitCode 0`.
//! - `REQUEUE` when it goes back to the queue: `... Requeued, Run time 00:20:00`.
//! - `TIME_LIMIT_50/80/90` and `TIME_LIMIT` when the running attempt reaches
//!   that share of its limit: `... Reached 80% of time limit, Run time 00:48:00`.
//! - `INVALID_DEPEND` when its dependency can never be satisfied (reason
//!   `DependencyNeverSatisfied`): `... Invalid dependency`, once.
//!
//! An array's tasks are mailed about together unless `ARRAY_TASKS` is given: one
//! `Began` when its first task starts and one summary when its last task ends
//! (`Slurm Array Summary Job_id=7_* (7) Name=sweep Ended, COMPLETED, ExitCode
//! [0-0]`; `Mixed` when some failed). With `ARRAY_TASKS`, each task's own
//! (`Slurm Array Task Job_id=7_3 (10) Name=sweep Began, ...`).

use std::collections::BTreeMap;

use corral_state::ClusterState;
use corral_state::Timestamp;
use corral_state::job::{Attempt, Job, JobState, PendingReason};
use corral_state::slurm::duration::TimeLimit;
use corral_state::slurm::hostlist;
use corral_state::slurm::mail::MailTypes;

/// One mail to send: `MailProg -s SUBJECT TO`, with `environment`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mail {
    /// The recipient: `--mail-user`, or the job's user.
    pub to: String,
    /// The subject line.
    pub subject: String,
    /// `SLURM_JOB_*` variables for the mail program, as slurmctld sets them.
    pub environment: BTreeMap<String, String>,
}

/// What has been mailed about a job so far (or, for a job already there when
/// this replica began to lead, what had happened by then).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    attempts: usize,
    requeues: u32,
    ended: bool,
    /// The time-limit thresholds passed by the newest attempt (bits of
    /// [`THRESHOLDS`]).
    time_marks: u8,
    /// Its dependency was found never to be satisfied.
    invalid_dependency: bool,
}

/// The time-limit warnings: percent of the limit, the mail type, its words.
const THRESHOLDS: [(u64, MailTypes, &str); 4] = [
    (50, MailTypes::TIME_LIMIT_50, "Reached 50% of time limit"),
    (80, MailTypes::TIME_LIMIT_80, "Reached 80% of time limit"),
    (90, MailTypes::TIME_LIMIT_90, "Reached 90% of time limit"),
    (100, MailTypes::TIME_LIMIT, "Reached time limit"),
];

impl Seen {
    /// Everything that has happened to `job` by `now`, as if mailed: a leader
    /// taking over mails only what happens from then on.
    pub fn of(job: &Job, now: Timestamp) -> Seen {
        Seen {
            attempts: job.attempts.len(),
            requeues: job.requeue_count,
            ended: job.state.is_terminal(),
            time_marks: passed_thresholds(job, now),
            invalid_dependency: job.reason == PendingReason::DependencyNeverSatisfied,
        }
    }
}

/// Bits of the thresholds the running attempt of `job` has passed by `now`.
fn passed_thresholds(job: &Job, now: Timestamp) -> u8 {
    let (Some(attempt), TimeLimit::Seconds(limit)) = (job.live_attempt(), job.time_limit) else {
        return 0;
    };
    let run = now.secs_since(attempt.started_at);
    THRESHOLDS
        .iter()
        .enumerate()
        .filter(|(_, (percent, _, _))| run.saturating_mul(100) >= limit.saturating_mul(*percent))
        .fold(0, |bits, (i, _)| bits | (1 << i))
}

/// The mails `job` calls for since `seen`, as of the state's clock, and what
/// is seen after them.
pub fn notices(state: &ClusterState, job: &Job, seen: Seen, cluster: &str) -> (Vec<Mail>, Seen) {
    let now = state.clock();
    let wanted = job.spec.mail_type;
    let mut mails = Vec::new();
    let mut after = Seen::of(job, now);
    if job.attempts.len() > seen.attempts {
        // A new attempt: its thresholds start afresh.
        after.time_marks = passed_thresholds(job, now);
        if wanted.contains(MailTypes::BEGIN) && job.current_attempt().is_some() {
            mails.extend(begin(state, job, cluster));
        }
    } else {
        let newly = after.time_marks & !seen.time_marks;
        for (i, (_, kind, words)) in THRESHOLDS.iter().enumerate() {
            if newly & (1 << i) != 0 && wanted.contains(*kind) && task_mails(job) {
                let run = job
                    .live_attempt()
                    .map_or(0, |a| now.secs_since(a.started_at));
                let mut mail =
                    mail_about(job, cluster, words, &format!(", Run time {}", clock(run)));
                mail.environment
                    .insert("SLURM_JOB_RUN_TIME".into(), clock(run));
                mails.push(mail);
            }
        }
    }
    if job.requeue_count > seen.requeues && wanted.contains(MailTypes::REQUEUE) && task_mails(job) {
        let run = ended_run(job.attempts.last());
        let time = run.map_or(String::new(), |r| format!(", Run time {}", clock(r)));
        let mut mail = mail_about(job, cluster, "Requeued", &time);
        if let Some(run) = run {
            mail.environment
                .insert("SLURM_JOB_RUN_TIME".into(), clock(run));
        }
        mails.push(mail);
    }
    after.invalid_dependency |= seen.invalid_dependency;
    if after.invalid_dependency
        && !seen.invalid_dependency
        && wanted.contains(MailTypes::INVALID_DEPEND)
    {
        const WORDS: &str = "Invalid dependency";
        if task_mails(job) {
            mails.push(mail_about(job, cluster, WORDS, ""));
        } else if array_tasks(state, job)
            .first()
            .is_some_and(|first| first.id == job.id)
        {
            // The array's tasks share the dependency: its first task speaks
            // for the array, once.
            mails.push(summary(job, cluster, WORDS, ""));
        }
    }
    if job.state.is_terminal() && !seen.ended {
        mails.extend(ended(state, job, cluster));
    }
    (mails, after)
}

/// Whether `job`'s own events are mailed: not an array task, or one whose
/// array asked for `ARRAY_TASKS`.
fn task_mails(job: &Job) -> bool {
    job.array.is_none() || job.spec.mail_type.contains(MailTypes::ARRAY_TASKS)
}

/// The tasks of `job`'s array (ids are consecutive from the array's id).
fn array_tasks<'a>(state: &'a ClusterState, job: &Job) -> Vec<&'a Job> {
    let Some(task) = job.array else {
        return Vec::new();
    };
    state
        .jobs()
        .range(task.array_job_id..)
        .map(|(_, j)| j)
        .take_while(|j| j.array.is_some_and(|a| a.array_job_id == task.array_job_id))
        .collect()
}

fn begin(state: &ClusterState, job: &Job, cluster: &str) -> Option<Mail> {
    let attempt = job.current_attempt()?;
    let queued = attempt.started_at.secs_since(job.submitted_at);
    if !task_mails(job) {
        // The array's first task to start (the lowest id among those that
        // started first) speaks for the array, once.
        let first_start = |t: &Job| t.attempts.first().map(|a| (a.started_at, t.id));
        let earliest = array_tasks(state, job)
            .into_iter()
            .filter_map(first_start)
            .min();
        let first = job.attempts.len() == 1 && earliest == first_start(job);
        return first.then(|| summary(job, cluster, "Began", ""));
    }
    let mut mail = mail_about(
        job,
        cluster,
        "Began",
        &format!(", Queued time {}", clock(queued)),
    );
    mail.environment
        .insert("SLURM_JOB_QUEUED_TIME".into(), clock(queued));
    Some(mail)
}

/// The end mail of a finished job (or of its array, once every task ended).
fn ended(state: &ClusterState, job: &Job, cluster: &str) -> Option<Mail> {
    let wanted = job.spec.mail_type;
    let failed = matches!(
        job.state,
        JobState::Failed | JobState::Timeout | JobState::NodeFail | JobState::Preempted
    );
    if !task_mails(job) {
        let tasks = array_tasks(state, job);
        if !tasks.iter().all(|t| t.state.is_terminal()) {
            return None;
        }
        let codes: Vec<i32> = tasks.iter().map(|t| exit_code(t).unwrap_or(0)).collect();
        let (min, max) = (
            codes.iter().copied().min().unwrap_or(0),
            codes.iter().copied().max().unwrap_or(0),
        );
        let kind = if max != 0 && wanted.contains(MailTypes::FAIL) {
            "Failed"
        } else if wanted.contains(MailTypes::END) {
            "Ended"
        } else {
            return None;
        };
        let master = tasks.first().map_or(job.state, |t| t.state);
        let state_name = if min == 0 && max > 0 {
            "Mixed"
        } else {
            master.slurm_name()
        };
        let mut mail = summary(
            job,
            cluster,
            kind,
            &format!(", {state_name}, ExitCode [{min}-{max}]"),
        );
        mail.environment
            .insert("SLURM_JOB_EXIT_CODE_MIN".into(), min.to_string());
        mail.environment
            .insert("SLURM_JOB_EXIT_CODE_MAX".into(), max.to_string());
        return Some(mail);
    }
    let kind = if failed && wanted.contains(MailTypes::FAIL) {
        "Failed"
    } else if matches!(job.state, JobState::Completed | JobState::Cancelled)
        && wanted.contains(MailTypes::END)
    {
        "Ended"
    } else {
        return None;
    };
    let run = ended_run(job.current_attempt());
    let time = run.map_or(String::new(), |r| format!(", Run time {}", clock(r)));
    let term = match exit_code(job) {
        Some(code) => format!(", {}, ExitCode {code}", job.state.slurm_name()),
        None => format!(", {}", job.state.slurm_name()),
    };
    let mut mail = mail_about(job, cluster, kind, &format!("{time}{term}"));
    if let Some(run) = run {
        mail.environment
            .insert("SLURM_JOB_RUN_TIME".into(), clock(run));
    }
    mail.environment.insert(
        "SLURM_JOB_EXIT_CODE_MAX".into(),
        exit_code(job).unwrap_or(0).to_string(),
    );
    Some(mail)
}

/// The batch script's exit code; `None` when a signal ended it. A job that
/// never ran exits 0, as Slurm records it.
fn exit_code(job: &Job) -> Option<i32> {
    match job.current_attempt().and_then(|a| a.batch_exit.as_ref()) {
        Some(exit) if exit.signal.is_some() => None,
        Some(exit) => Some(exit.code),
        None => Some(0),
    }
}

/// How long an ended attempt ran.
fn ended_run(attempt: Option<&Attempt>) -> Option<u64> {
    let attempt = attempt?;
    let end = attempt.end.as_ref()?;
    Some(end.at.secs_since(attempt.started_at))
}

/// A mail about `job` itself: `Slurm Job_id=...` (`Slurm Array Task
/// Job_id=A_T (ID)` for an array task).
fn mail_about(job: &Job, cluster: &str, kind: &str, rest: &str) -> Mail {
    let who = match job.array {
        Some(task) => format!(
            "Slurm Array Task Job_id={}_{} ({})",
            task.array_job_id, task.task_id, job.id
        ),
        None => format!("Slurm Job_id={}", job.id),
    };
    mail(
        job,
        cluster,
        kind,
        format!("{who} Name={} {kind}{rest}", job.spec.name),
    )
}

/// A mail about `job`'s whole array: `Slurm Array Summary Job_id=A_* (A)`.
fn summary(job: &Job, cluster: &str, kind: &str, rest: &str) -> Mail {
    let array = job.array.map_or(job.id, |a| a.array_job_id);
    mail(
        job,
        cluster,
        kind,
        format!(
            "Slurm Array Summary Job_id={array}_* ({array}) Name={} {kind}{rest}",
            job.spec.name
        ),
    )
}

fn mail(job: &Job, cluster: &str, kind: &str, subject: String) -> Mail {
    // The state the notice is about, not the one the mailer finds (a short
    // job may have ended by the time its `Began` is sent).
    let state = match kind {
        "Requeued" => JobState::Pending,
        _ if kind == "Began" || kind.starts_with("Reached") => JobState::Running,
        _ => job.state,
    };
    let mut environment = BTreeMap::from([
        ("SLURM_CLUSTER_NAME".to_string(), cluster.to_string()),
        ("SLURM_JOB_ACCOUNT".to_string(), job.account.clone()),
        ("SLURM_JOB_ID".to_string(), job.id.to_string()),
        ("SLURM_JOB_MAIL_TYPE".to_string(), kind.to_string()),
        ("SLURM_JOB_NAME".to_string(), job.spec.name.clone()),
        ("SLURM_JOB_PARTITION".to_string(), job.partition.clone()),
        (
            "SLURM_JOB_STATE".to_string(),
            state.slurm_name().to_string(),
        ),
        ("SLURM_JOB_UID".to_string(), job.spec.uid.to_string()),
        ("SLURM_JOB_USER".to_string(), job.spec.user.clone()),
        ("SLURM_JOB_WORK_DIR".to_string(), job.spec.workdir.clone()),
    ]);
    if let Some(attempt) = job.current_attempt() {
        let nodes: Vec<&str> = attempt.allocation.iter().map(|n| n.node.as_str()).collect();
        environment.insert("SLURM_JOB_NODELIST".into(), hostlist::compress(&nodes));
    }
    if let Some(task) = job.array {
        environment.insert("SLURM_ARRAY_JOB_ID".into(), task.array_job_id.to_string());
        environment.insert("SLURM_ARRAY_TASK_ID".into(), task.task_id.to_string());
    }
    Mail {
        to: job
            .spec
            .mail_user
            .clone()
            .unwrap_or_else(|| job.spec.user.clone()),
        subject,
        environment,
    }
}

/// Slurm's `secs2time_str`: `HH:MM:SS`, `D-HH:MM:SS` past a day.
fn clock(secs: u64) -> String {
    let (days, hours, minutes, seconds) =
        (secs / 86_400, secs / 3_600 % 24, secs / 60 % 60, secs % 60);
    if days > 0 {
        format!("{days}-{hours:02}:{minutes:02}:{seconds:02}")
    } else {
        format!("{hours:02}:{minutes:02}:{seconds:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::Command;
    use corral_state::slurm::array::ArraySpec;
    use corral_state::testkit::{at, cluster, exit, ok, spec, start, submit};

    fn mail_types(text: &str) -> MailTypes {
        MailTypes::parse(text).expect("mail types parse")
    }

    /// Ends the running attempt of `id` with `code` at `secs`.
    fn finish(state: &mut ClusterState, id: corral_state::JobId, code: i32, secs: u64) {
        let job = state.job(id).expect("job").clone();
        let attempt = job.current_attempt().expect("attempt");
        let host = attempt.batch_host().expect("batch host").to_string();
        ok(
            state,
            Command::BatchExited {
                job: id,
                attempt: attempt.number,
                node: host,
                status: exit(code),
                at: at(secs),
            },
        );
        for node in attempt.allocation.iter().map(|n| n.node.clone()) {
            let _ = state.apply(Command::NodeReleased {
                job: id,
                attempt: attempt.number,
                node,
                at: at(secs),
            });
        }
    }

    /// Every mail `id` calls for since `seen`, and the next `seen`.
    fn look(state: &ClusterState, id: corral_state::JobId, seen: Seen) -> (Vec<String>, Seen) {
        let job = state.job(id).expect("job");
        let (mails, after) = notices(state, job, seen, "c1");
        (mails.into_iter().map(|m| m.subject).collect(), after)
    }

    #[test]
    fn a_dependency_that_can_never_be_met_is_mailed_once() {
        let mut state = cluster(1, 8);
        let mut asked = spec("alice", 1, 1);
        asked.mail_type = mail_types("INVALID_DEPEND");
        let id = submit(&mut state, asked, at(10));
        let (none, seen) = look(&state, id, Seen::default());
        assert!(none.is_empty(), "{none:?}");
        ok(
            &mut state,
            Command::ApplyPlan {
                allocations: vec![],
                preemptions: vec![],
                reasons: vec![(id, PendingReason::DependencyNeverSatisfied)],
                at: at(11),
            },
        );
        let (mails, seen) = look(&state, id, seen);
        assert_eq!(
            mails,
            [format!("Slurm Job_id={id} Name=train Invalid dependency")]
        );
        assert!(look(&state, id, seen).0.is_empty(), "once");
    }

    #[test]
    fn a_job_is_mailed_when_it_begins_and_ends_in_slurms_words() {
        let mut state = cluster(1, 8);
        let mut asked = spec("alice", 1, 1);
        asked.mail_type = mail_types("BEGIN,END");
        asked.mail_user = Some("alice@example.org".into());
        let id = submit(&mut state, asked, at(10));
        let (none, seen) = look(&state, id, Seen::default());
        assert!(none.is_empty(), "{none:?}");
        start(&mut state, id, at(14));
        let job = state.job(id).expect("job");
        let (mails, seen) = notices(&state, job, seen, "c1");
        assert_eq!(mails.len(), 1);
        assert_eq!(
            mails[0].subject,
            format!("Slurm Job_id={id} Name=train Began, Queued time 00:00:04")
        );
        assert_eq!(mails[0].to, "alice@example.org");
        assert_eq!(mails[0].environment["SLURM_JOB_MAIL_TYPE"], "Began");
        assert_eq!(mails[0].environment["SLURM_JOB_QUEUED_TIME"], "00:00:04");
        // Nothing new: nothing mailed twice.
        assert!(look(&state, id, seen).0.is_empty());
        finish(&mut state, id, 0, 3_614);
        let (mails, seen) = look(&state, id, seen);
        assert_eq!(
            mails,
            [format!(
                "Slurm Job_id={id} Name=train Ended, Run time 01:00:00, COMPLETED, ExitCode 0"
            )]
        );
        assert!(look(&state, id, seen).0.is_empty());
    }

    #[test]
    fn a_failure_is_mailed_only_to_who_asked_for_fail() {
        for (types, expected) in [("END", 0), ("FAIL", 1), ("ALL", 1)] {
            let mut state = cluster(1, 8);
            let mut asked = spec("alice", 1, 1);
            asked.mail_type = mail_types(types);
            let id = submit(&mut state, asked, at(1));
            start(&mut state, id, at(2));
            let seen = Seen::of(state.job(id).expect("job"), state.clock());
            finish(&mut state, id, 3, 32);
            let (mails, _) = look(&state, id, seen);
            assert_eq!(mails.len(), expected, "{types}: {mails:?}");
            if expected == 1 {
                assert_eq!(
                    mails[0],
                    format!(
                        "Slurm Job_id={id} Name=train Failed, Run time 00:00:30, FAILED, ExitCode 3"
                    )
                );
            }
        }
    }

    #[test]
    fn a_new_leader_mails_only_what_happens_after_it_took_over() {
        let mut state = cluster(1, 8);
        let mut asked = spec("alice", 1, 1);
        asked.mail_type = mail_types("ALL,TIME_LIMIT_50");
        asked.time_limit = Some(TimeLimit::Seconds(600));
        let id = submit(&mut state, asked, at(1));
        start(&mut state, id, at(2));
        ok(&mut state, Command::Tick { at: at(400) });
        let seen = Seen::of(state.job(id).expect("job"), state.clock());
        assert!(
            look(&state, id, seen).0.is_empty(),
            "began and 50% are past"
        );
        ok(&mut state, Command::Tick { at: at(500) });
        let (mails, _) = look(&state, id, seen);
        assert_eq!(mails, Vec::<String>::new(), "80% was not asked for");
    }

    #[test]
    fn time_limit_warnings_come_once_per_threshold() {
        let mut state = cluster(1, 8);
        let mut asked = spec("alice", 1, 1);
        asked.mail_type = mail_types("TIME_LIMIT_80,TIME_LIMIT_90");
        asked.time_limit = Some(TimeLimit::Seconds(1_000));
        let id = submit(&mut state, asked, at(1));
        start(&mut state, id, at(2));
        let (_, seen) = look(&state, id, Seen::default());
        ok(&mut state, Command::Tick { at: at(850) });
        let (mails, seen) = look(&state, id, seen);
        assert_eq!(
            mails,
            [format!(
                "Slurm Job_id={id} Name=train Reached 80% of time limit, Run time 00:14:08"
            )]
        );
        ok(&mut state, Command::Tick { at: at(860) });
        let (mails, seen) = look(&state, id, seen);
        assert!(mails.is_empty(), "{mails:?}");
        ok(&mut state, Command::Tick { at: at(905) });
        let (mails, _) = look(&state, id, seen);
        assert_eq!(
            mails,
            [format!(
                "Slurm Job_id={id} Name=train Reached 90% of time limit, Run time 00:15:03"
            )]
        );
    }

    #[test]
    fn an_array_is_summarised_unless_its_tasks_are_asked_for() {
        for (types, per_task) in [
            ("BEGIN,END,FAIL", false),
            ("BEGIN,END,FAIL,ARRAY_TASKS", true),
        ] {
            let mut state = cluster(1, 8);
            let mut asked = spec("alice", 1, 1);
            asked.mail_type = mail_types(types);
            asked.array = Some(ArraySpec {
                indices: vec![0, 1],
                throttle: None,
            });
            let first = submit(&mut state, asked, at(1));
            let second = corral_state::JobId(first.0 + 1);
            let mut seen = BTreeMap::new();
            let mut all = Vec::new();
            let mut sweep = |state: &ClusterState, all: &mut Vec<String>| {
                for id in [first, second] {
                    let before = seen.get(&id).copied().unwrap_or_default();
                    let (mails, after) = look(state, id, before);
                    seen.insert(id, after);
                    all.extend(mails);
                }
            };
            sweep(&state, &mut all);
            start(&mut state, first, at(3));
            start(&mut state, second, at(3));
            sweep(&state, &mut all);
            finish(&mut state, first, 0, 10);
            sweep(&state, &mut all);
            finish(&mut state, second, 2, 12);
            sweep(&state, &mut all);
            if per_task {
                assert_eq!(
                    all,
                    [
                        format!(
                            "Slurm Array Task Job_id={first}_0 ({first}) Name=train Began, Queued time 00:00:02"
                        ),
                        format!(
                            "Slurm Array Task Job_id={first}_1 ({second}) Name=train Began, Queued time 00:00:02"
                        ),
                        format!(
                            "Slurm Array Task Job_id={first}_0 ({first}) Name=train Ended, Run time 00:00:07, COMPLETED, ExitCode 0"
                        ),
                        format!(
                            "Slurm Array Task Job_id={first}_1 ({second}) Name=train Failed, Run time 00:00:09, FAILED, ExitCode 2"
                        ),
                    ]
                );
            } else {
                assert_eq!(
                    all,
                    [
                        format!("Slurm Array Summary Job_id={first}_* ({first}) Name=train Began"),
                        format!(
                            "Slurm Array Summary Job_id={first}_* ({first}) Name=train Failed, Mixed, ExitCode [0-2]"
                        ),
                    ]
                );
            }
        }
    }
}
