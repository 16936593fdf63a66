//! The mailer: while this replica leads, it looks at the jobs changed since
//! its last look (the state's journal) and at running jobs with time-limit
//! warnings, and runs the configured mail program (Slurm's `MailProg`) for
//! each notice, one at a time, as `PROGRAM -s SUBJECT RECIPIENT` with the
//! notice's `SLURM_JOB_*` variables.
//!
//! At most once: a replica that starts to lead first counts everything that
//! has happened as mailed, so no mail is sent twice across a failover; one
//! whose event fell between the old leader's last look and its end is not
//! sent. A program that fails or runs past [`MAIL_TIMEOUT`] is logged, not
//! retried.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use corral_consensus::Replica;
use corral_state::JobId;
use corral_state::job_table::JobChanges;
use tokio::sync::{mpsc, watch};

use super::notices::{Mail, Seen, notices};

/// How often the mailer looks.
const POLL: Duration = Duration::from_millis(500);
/// How long the mail program may run (Slurm's MAIL_PROG_TIMEOUT).
pub const MAIL_TIMEOUT: Duration = Duration::from_secs(120);
/// Mails waiting for the program; beyond, new ones are dropped and logged.
const QUEUE: usize = 1024;

/// Runs until `stop` turns true, mailing while `replica` leads.
pub async fn run(
    replica: Arc<Replica>,
    program: PathBuf,
    cluster: String,
    mut stop: watch::Receiver<bool>,
) {
    let (tx, rx) = mpsc::channel(QUEUE);
    tokio::spawn(send_all(program, rx));
    let mut leadership = replica.leadership();
    loop {
        if *stop.borrow() {
            return;
        }
        if !leadership.borrow_and_update().is_self {
            tokio::select! {
                changed = leadership.changed() => if changed.is_err() { return },
                _ = stop.changed() => return,
            }
            continue;
        }
        lead(&replica, &cluster, &tx, &mut leadership, &mut stop).await;
    }
}

/// One term of leadership: prime, then mail what happens.
async fn lead(
    replica: &Replica,
    cluster: &str,
    tx: &mpsc::Sender<Mail>,
    leadership: &mut watch::Receiver<corral_consensus::Leadership>,
    stop: &mut watch::Receiver<bool>,
) {
    let primed = replica.read_local(|state| {
        let now = state.clock();
        let seen: BTreeMap<JobId, Seen> = state
            .jobs()
            .values()
            .filter(|j| !j.spec.mail_type.is_empty())
            .map(|j| (j.id, Seen::of(j, now)))
            .collect();
        (seen, state.job_journal_position())
    });
    let Ok((mut seen, mut position)) = primed else {
        // The state cannot be read yet: look again in a moment.
        tokio::time::sleep(POLL).await;
        return;
    };
    loop {
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            changed = leadership.changed() => {
                if changed.is_err() || !leadership.borrow().is_self {
                    return;
                }
            }
            _ = stop.changed() => return,
        }
        let looked = replica.read_local(|state| {
            let mut candidates: Vec<JobId> = match state.jobs_changed_since(position) {
                JobChanges::Since(changed) => changed.into_iter().collect(),
                JobChanges::Unknown => state.jobs().keys().copied().collect(),
            };
            // Time-limit warnings come with time, not with a change.
            candidates.extend(
                state
                    .active_jobs()
                    .filter(|j| !j.spec.mail_type.is_empty())
                    .map(|j| j.id),
            );
            candidates.sort_unstable();
            candidates.dedup();
            let mut mails = Vec::new();
            for id in candidates {
                let Some(job) = state.job(id).filter(|j| !j.spec.mail_type.is_empty()) else {
                    continue;
                };
                let before = seen.get(&id).copied().unwrap_or_default();
                let (found, after) = notices(state, job, before, cluster);
                mails.extend(found);
                seen.insert(id, after);
            }
            // Forget finished jobs that left the table.
            seen.retain(|id, _| state.job(*id).is_some());
            (mails, state.job_journal_position())
        });
        let Ok((mails, now_at)) = looked else {
            continue;
        };
        position = now_at;
        for mail in mails {
            if tx.try_send(mail).is_err() {
                tracing::warn!("the mail queue is full ({QUEUE}); a job notice was dropped");
            }
        }
    }
}

/// Sends the queued mails one at a time.
async fn send_all(program: PathBuf, mut rx: mpsc::Receiver<Mail>) {
    while let Some(mail) = rx.recv().await {
        send(&program, &mail).await;
    }
}

/// Runs the mail program for `mail`; logs what went wrong.
async fn send(program: &PathBuf, mail: &Mail) {
    let mut command = tokio::process::Command::new(program);
    command
        .args(["-s", &mail.subject, &mail.to])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .envs(&mail.environment)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(MAIL_TIMEOUT, command.output()).await {
        Ok(Ok(output)) if output.status.success() => {
            tracing::debug!(to = %mail.to, subject = %mail.subject, "mailed");
        }
        Ok(Ok(output)) => tracing::warn!(
            program = %program.display(),
            status = %output.status,
            output = %String::from_utf8_lossy(&output.stderr).trim(),
            subject = %mail.subject,
            "the mail program failed"
        ),
        Ok(Err(e)) => tracing::warn!(
            program = %program.display(),
            "cannot run the mail program: {e}; check [leader] mail_program"
        ),
        Err(_) => tracing::warn!(
            program = %program.display(),
            subject = %mail.subject,
            "the mail program ran past {} s and was killed",
            MAIL_TIMEOUT.as_secs()
        ),
    }
}
