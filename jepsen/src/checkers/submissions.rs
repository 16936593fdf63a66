//! Promise 1: no acknowledged submission is lost, and no job exists that no
//! client submitted (a phantom), or that a client was told was refused, or
//! twice for one submission.
//!
//! Every submission names its job uniquely, so the job a submission made is
//! found by name even when its reply was lost (an indeterminate `info`).

use std::collections::BTreeMap;

use crate::history::{Call, EventKind, History, Reply};
use crate::verdict::Verdict;

/// The checker's name.
pub const NAME: &str = "submissions";
const PROMISE: &str = "no acknowledged submission lost; no phantom or duplicate job";

/// What a submission operation came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Pending,
    Acknowledged { job: u64, t: u64 },
    Refused { t: u64 },
    Unknown,
}

/// Checks the promise.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::new(NAME, PROMISE);
    // op id -> (job name, outcome)
    let mut submissions: BTreeMap<u64, (String, Outcome)> = BTreeMap::new();
    for event in &history.events {
        match &event.kind {
            EventKind::Invoke {
                op,
                call: Call::Submit { name, .. },
                ..
            } => {
                submissions.insert(*op, (name.clone(), Outcome::Pending));
            }
            EventKind::Ok { op, reply, .. } => {
                if let Some((_, outcome)) = submissions.get_mut(op) {
                    match reply {
                        Reply::Submitted { job } => {
                            *outcome = Outcome::Acknowledged {
                                job: *job,
                                t: event.t,
                            }
                        }
                        other => verdict.violation(
                            Some(event.t),
                            None,
                            format!("submission op {op} was answered {other:?}"),
                        ),
                    }
                }
            }
            EventKind::Fail { op, .. } => {
                if let Some((_, outcome)) = submissions.get_mut(op) {
                    *outcome = Outcome::Refused { t: event.t };
                }
            }
            EventKind::Info { op, .. } => {
                if let Some((_, outcome)) = submissions.get_mut(op) {
                    *outcome = Outcome::Unknown;
                }
            }
            _ => {}
        }
    }
    let mut by_name: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for job in history.finals() {
        by_name.entry(job.name.as_str()).or_default().push(job.job);
    }
    let submitted: BTreeMap<&str, (u64, Outcome)> = submissions
        .iter()
        .map(|(op, (name, outcome))| (name.as_str(), (*op, *outcome)))
        .collect();
    let mut acknowledged = 0u32;
    for (name, (op, outcome)) in &submitted {
        let jobs = by_name.get(name).map(Vec::as_slice).unwrap_or_default();
        if jobs.len() > 1 {
            verdict.violation(
                None,
                jobs.first().copied(),
                format!(
                    "submission op {op} ({name}) made {} jobs: {jobs:?}",
                    jobs.len()
                ),
            );
        }
        match outcome {
            Outcome::Acknowledged { job, t } => {
                acknowledged += 1;
                if !jobs.contains(job) {
                    verdict.violation(
                        Some(*t),
                        Some(*job),
                        format!(
                            "job {job} ({name}) was acknowledged to op {op} but is not in the cluster at the end{}",
                            if jobs.is_empty() {
                                String::new()
                            } else {
                                format!(" (jobs named so: {jobs:?})")
                            }
                        ),
                    );
                }
            }
            Outcome::Refused { t } if !jobs.is_empty() => verdict.violation(
                Some(*t),
                jobs.first().copied(),
                format!("submission op {op} ({name}) was refused, yet made job(s) {jobs:?}"),
            ),
            _ => {}
        }
    }
    for job in history.finals() {
        if !submitted.contains_key(job.name.as_str()) {
            verdict.violation(
                None,
                Some(job.job),
                format!(
                    "job {} ({}) is in the cluster but no client submitted it",
                    job.job, job.name
                ),
            );
        }
    }
    verdict.measure("submissions", submitted.len() as f64);
    verdict.measure("acknowledged", f64::from(acknowledged));
    verdict.measure("jobs_at_end", history.finals().count() as f64);
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Builder, finished};

    fn clean() -> Builder {
        let mut b = Builder::new();
        b.submit(1, "w1", 10, Some(1));
        b.submit(2, "w2", 12, None); // indeterminate, took effect
        b.submit(3, "w3", 14, None); // indeterminate, did not
        b.final_job(finished(1, "w1"));
        b.final_job(finished(2, "w2"));
        b
    }

    #[test]
    fn a_clean_history_passes() {
        let verdict = check(&clean().history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("acknowledged"), Some(1.0));
    }

    #[test]
    fn a_lost_acknowledged_job_is_caught() {
        let mut b = Builder::new();
        b.submit(1, "w1", 10, Some(1));
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(verdict.violations[0].message.contains("not in the cluster"));
    }

    #[test]
    fn phantom_refused_and_duplicate_jobs_are_caught() {
        let mut b = clean();
        b.final_job(finished(9, "nobody-asked"));
        b.submit_refused(4, "w4", 20);
        b.final_job(finished(4, "w4"));
        b.final_job(finished(5, "w1"));
        let verdict = check(&b.history());
        let text = format!("{:?}", verdict.violations);
        assert!(text.contains("no client submitted it"), "{text}");
        assert!(text.contains("was refused, yet made"), "{text}");
        assert!(text.contains("made 2 jobs"), "{text}");
        assert_eq!(verdict.violations.len(), 3, "{text}");
    }
}
