//! `corral cancel --signal SIG [--batch|--full]` (`scancel -s`): signals running
//! jobs without ending them and says, per job, how many of its nodes the signal
//! reached (the leader hands it to each node's agent; a node without a
//! connected agent is named).

use std::process::ExitCode;

use corral_proto::api::{SignalJobsReply, SignalJobsRequest, SignalScope, SignalledJob};
use corral_state::slurm::hostlist;

use crate::args::CancelArgs;
use crate::connection::{Cluster, Retry};
use crate::exit;

/// Signals; exits non-zero when any target was refused or reached no node.
pub async fn run(
    cluster: &Cluster,
    args: &CancelArgs,
    scope: SignalScope,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let request = SignalJobsRequest {
        jobs: args.jobs.clone(),
        user: args.user.clone().unwrap_or_default(),
        signal: args.signal.clone().unwrap_or_default(),
        scope: scope as i32,
    };
    // Not repeated after a lost answer: the processes would get the signal twice.
    let reply = cluster
        .call(Retry::Once, |mut c| {
            let request = request.clone();
            async move { c.signal_jobs(request).await }
        })
        .await?;
    if json {
        super::print_json(&json_of(&reply, scope))?;
    } else {
        for job in &reply.signalled {
            println!("{}", reached_line(&reply.signal, job, scope));
        }
    }
    for job in &reply.signalled {
        for missed in &job.unreached {
            eprintln!(
                "corral cancel: warning: job {}: SIG{} did not reach {missed}",
                job.job_id, reply.signal
            );
        }
    }
    for error in &reply.errors {
        eprintln!("corral cancel: error: {error}");
    }
    Ok(if reply.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::REFUSED)
    })
}

/// `job 12: SIGUSR1 reached 2 of 2 nodes (n[1-2]): the batch shell and the steps' tasks`.
fn reached_line(signal: &str, job: &SignalledJob, scope: SignalScope) -> String {
    let names: Vec<&str> = job.reached.iter().map(String::as_str).collect();
    let total = job.reached.len() + job.unreached.len();
    let what = match scope {
        SignalScope::Batch => "the batch shell",
        SignalScope::Full => "the batch shell and the steps' tasks",
        _ => "the steps' tasks (the batch shell is signalled only with --batch or --full)",
    };
    format!(
        "job {}: SIG{signal} reached {} of {total} node{} ({}): {what}",
        job.job_id,
        job.reached.len(),
        if total == 1 { "" } else { "s" },
        hostlist::compress(&names),
    )
}

fn json_of(reply: &SignalJobsReply, scope: SignalScope) -> serde_json::Value {
    let scope = match scope {
        SignalScope::Batch => "batch",
        SignalScope::Full => "full",
        _ => "steps",
    };
    let jobs: Vec<serde_json::Value> = reply
        .signalled
        .iter()
        .map(|job| {
            serde_json::json!({
                "job": job.job_id,
                "attempt": job.attempt,
                "reached": job.reached,
                "unreached": job.unreached,
            })
        })
        .collect();
    serde_json::json!({
        "signal": reply.signal,
        "scope": scope,
        "signalled": jobs,
        "errors": reply.errors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(reached: &[&str], unreached: &[&str]) -> SignalledJob {
        SignalledJob {
            job_id: 12,
            attempt: 1,
            reached: reached.iter().map(|s| s.to_string()).collect(),
            unreached: unreached.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn each_job_says_how_many_of_its_nodes_the_signal_reached() {
        assert_eq!(
            reached_line("USR1", &job(&["n1"], &[]), SignalScope::Batch),
            "job 12: SIGUSR1 reached 1 of 1 node (n1): the batch shell"
        );
        assert_eq!(
            reached_line(
                "HUP",
                &job(&["n1", "n2"], &["n3: no agent is connected"]),
                SignalScope::Full
            ),
            "job 12: SIGHUP reached 2 of 3 nodes (n[1-2]): the batch shell and the steps' tasks"
        );
        assert!(
            reached_line("USR2", &job(&["n1"], &[]), SignalScope::Steps)
                .ends_with("(the batch shell is signalled only with --batch or --full)")
        );
    }

    #[test]
    fn json_names_the_scope_and_every_job() {
        let reply = SignalJobsReply {
            signal: "USR1".into(),
            signalled: vec![job(&["n1"], &[])],
            errors: vec!["7: unknown job 7".into()],
        };
        let value = json_of(&reply, SignalScope::Full);
        assert_eq!(value["scope"], "full");
        assert_eq!(value["signalled"][0]["job"], 12);
        assert_eq!(value["errors"][0], "7: unknown job 7");
    }
}
