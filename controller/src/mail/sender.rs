//! The mailer: while this replica leads, it looks at the jobs changed since
//! its last look (the state's journal) and at running jobs with time-limit
//! warnings, and runs the configured mail program (Slurm's `MailProg`) for
//! each notice, one at a time, as `PROGRAM -s SUBJECT -- RECIPIENTS` with the
//! notice's `SLURM_JOB_*` variables.
//!
//! The arguments come from a user's job, and the program runs as the
//! controller's user: the recipients are checked again here (a job an older
//! build accepted may name anything; one that fails is not mailed), `--` ends
//! the program's options whatever they are, and the subject's control
//! characters (a job name with a newline would add mail headers) become spaces.
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
use corral_state::slurm::FormatError;
use corral_state::slurm::mail_user;
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

/// The mail program's arguments for `mail`, or why it must not be mailed.
fn arguments(mail: &Mail) -> Result<Vec<String>, FormatError> {
    let recipients = mail_user::recipients(&mail.to)?;
    let subject: String = mail
        .subject
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    Ok([
        "-s".to_string(),
        subject,
        "--".to_string(),
        recipients.join(","),
    ]
    .into())
}

/// Runs the mail program for `mail`; logs what went wrong.
async fn send(program: &PathBuf, mail: &Mail) {
    let arguments = match arguments(mail) {
        Ok(arguments) => arguments,
        Err(e) => {
            tracing::warn!(
                subject = %mail.subject,
                "not mailed: {e} (the recipient is the job's --mail-user, or its user's name; a job an older build accepted may name anything)"
            );
            return;
        }
    };
    run_program(program, &arguments, mail).await;
}

/// Runs `program` with `arguments` and the notice's environment; logs what
/// went wrong.
async fn run_program(program: &PathBuf, arguments: &[String], mail: &Mail) {
    let mut command = tokio::process::Command::new(program);
    command
        .args(arguments)
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn mail_to(to: &str, subject: &str) -> Mail {
        Mail {
            to: to.to_string(),
            subject: subject.to_string(),
            environment: BTreeMap::from([("SLURM_JOB_ID".to_string(), "7".to_string())]),
        }
    }

    const HOSTILE: &str = "--exec=!touch PWNED";

    fn hostile_in(dir: &Path) -> String {
        HOSTILE.replace("PWNED", &dir.join("pwned").display().to_string())
    }

    #[test]
    fn recipients_follow_the_end_of_options_and_the_subject_is_one_line() {
        let args = arguments(&mail_to(
            "a@x.org, bob",
            "Slurm Job_id=7 Name=a\nBcc: eve Began",
        ))
        .expect("arguments");
        assert_eq!(
            args,
            [
                "-s",
                "Slurm Job_id=7 Name=a Bcc: eve Began",
                "--",
                "a@x.org,bob"
            ]
        );
    }

    #[test]
    fn a_recipient_that_is_not_one_is_never_given_to_the_program() {
        for to in [
            HOSTILE,
            "-Ssendmail=/tmp/x",
            "|/bin/sh",
            "/etc/passwd",
            "a b",
        ] {
            assert!(arguments(&mail_to(to, "s")).is_err(), "{to}");
        }
    }

    #[tokio::test]
    async fn a_hostile_recipient_from_an_older_build_runs_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A "mail program" that shows whether it ran at all.
        let program = dir.path().join("mail");
        let ran = dir.path().join("ran");
        std::fs::write(&program, format!("#!/bin/sh\ntouch {}\n", ran.display())).expect("write");
        std::fs::set_permissions(
            &program,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("chmod");
        send(&program, &mail_to(&hostile_in(dir.path()), "s")).await;
        assert!(
            !ran.exists(),
            "the mail program ran for a hostile recipient"
        );
        send(&program, &mail_to("alice", "s")).await;
        assert!(
            ran.exists(),
            "the mail program did not run for a good recipient"
        );
    }

    /// GNU mailutils' `mail` (Debian's `mailutils`, which `.ci/run` installs)
    /// runs `--exec`'s command when it reads it as an option. Given as corral
    /// gives arguments, it must read it as an address.
    #[tokio::test]
    async fn the_real_mail_program_reads_what_follows_the_end_of_options_as_an_address() {
        let program = PathBuf::from("/usr/bin/mail.mailutils");
        if !program.exists() {
            eprintln!("skipped: no GNU mail (apt-get install --no-install-recommends mailutils)");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let hostile = hostile_in(dir.path());
        let mail = mail_to(&hostile, "Slurm Job_id=7 Began");
        run_program(
            &program,
            &[
                "-s".into(),
                mail.subject.clone(),
                "--".into(),
                hostile.clone(),
            ],
            &mail,
        )
        .await;
        assert!(
            !dir.path().join("pwned").exists(),
            "the mail program ran a command named by the recipient"
        );
        // The control: without the end of options (as corral gave it before),
        // the same program runs the command, so the check above can fail.
        run_program(
            &program,
            &["-s".into(), mail.subject.clone(), hostile],
            &mail,
        )
        .await;
        assert!(
            dir.path().join("pwned").exists(),
            "this mail program has no --exec; the test proves nothing here"
        );
    }
}
