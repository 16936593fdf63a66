//! `SubmitJob`: sbatch options and `#SBATCH` lines become a `Submit` command here,
//! on the controller, so every client gets the same parsing and the same errors.
//! `--test-only` applies the submission to a copy of the state and runs a pass,
//! one at a time per user and off the async workers (the state's lock is held
//! only to copy it), so that a user looping it does not slow others' submits.

use corral_proto::api::{SubmitJobReply, SubmitJobRequest, TestOnlyEstimate};
use corral_scheduler::pass::Verdict;
use corral_state::ClusterState;
use corral_state::command::{Command, Outcome};
use corral_state::ids::{Actor, JobId};
use corral_state::job::{BatchScript, JobSpec};
use corral_state::job_request::{ScriptSource, SubmitContext, build_request};
use corral_state::slurm::hostlist;
use corral_state::slurm::sbatch::{SbatchOptions, parse_args, parse_script_directives};
use corral_state::time::Timestamp;
use tonic::Status;

use super::{ApiContext, status};
use crate::clock;

/// Handles one submission.
pub async fn submit(
    ctx: &ApiContext,
    actor: Actor,
    request: SubmitJobRequest,
) -> Result<SubmitJobReply, Status> {
    let key = (!request.idempotency_key.is_empty()).then(|| request.idempotency_key.clone());
    let test_only = request.test_only;
    let (spec, batch, warnings) = job_request(&actor, request)?;
    // A test waits its turn before it reads the clock, so it plans for now.
    let permit = if test_only {
        Some(ctx.planning.admit(&actor.user).await)
    } else {
        None
    };
    let now = clock::now();
    let command = Command::Submit {
        spec,
        batch,
        by: actor,
        key,
        at: now,
    };
    if let Some(permit) = permit {
        let replica = std::sync::Arc::clone(&ctx.replica);
        let (report, estimate) = permit
            .plan_on_copy(replica, move |copy| test_only_report(copy, command, now))
            .await??;
        return Ok(SubmitJobReply {
            first_job_id: 0,
            count: 0,
            test_only_report: report,
            test_only: estimate,
            warnings,
        });
    }
    match ctx.propose_one(command).await? {
        Outcome::Submitted { first, count } => {
            ctx.wake_scheduler.notify_one();
            Ok(SubmitJobReply {
                first_job_id: first.0,
                count,
                test_only_report: String::new(),
                test_only: None,
                warnings,
            })
        }
        other => Err(Status::internal(format!(
            "the submission was accepted but answered {other:?}; please report this"
        ))),
    }
}

/// Parses options and script into the job request, with the warnings of
/// options accepted without effect.
fn job_request(
    actor: &Actor,
    request: SubmitJobRequest,
) -> Result<(JobSpec, BatchScript, Vec<String>), Status> {
    let bad = |e: &dyn std::fmt::Display| Status::invalid_argument(e.to_string());
    let (cli, rest) = parse_args(&request.args).map_err(|e| bad(&e))?;
    if !rest.is_empty() {
        return Err(Status::invalid_argument(format!(
            "unexpected arguments {rest:?} among the sbatch options; the script and its arguments travel separately"
        )));
    }
    let source = if request.script_path.is_empty() && request.script_text.is_empty() {
        let Some(command) = cli.wrap.clone() else {
            return Err(Status::invalid_argument(
                "no script: give a script file, pipe one on standard input, or use --wrap=COMMAND",
            ));
        };
        ScriptSource::Wrap(command)
    } else {
        ScriptSource::File {
            path: request.script_path.clone(),
            text: request.script_text.clone(),
            argv: request.script_args.clone(),
        }
    };
    let directives = match &source {
        ScriptSource::File { text, .. } => {
            if !text.starts_with("#!") {
                return Err(Status::invalid_argument(
                    "the script does not start with '#!' (e.g. #!/bin/bash); sbatch requires an interpreter line",
                ));
            }
            parse_script_directives(text).map_err(|e| {
                Status::invalid_argument(format!("in the script's #SBATCH lines: {e}"))
            })?
        }
        ScriptSource::Wrap(_) => SbatchOptions::default(),
    };
    let options = directives.overridden_by(cli);
    let warnings = options.warnings.clone();
    let context = SubmitContext {
        user: actor.user.clone(),
        uid: request.uid,
        gid: request.gid,
        submit_host: request.submit_host,
        cwd: if request.cwd.is_empty() {
            "/".to_string()
        } else {
            request.cwd
        },
        environment: request.environment.into_iter().collect(),
        command: (!request.command.is_empty()).then_some(request.command),
        // --begin's `now+1hour` counts from the moment the cluster takes the
        // submission (this controller's clock; the leader's is within its
        // skew bound).
        now: crate::clock::now(),
    };
    let (spec, batch) = build_request(options, source, &context).map_err(|e| bad(&e))?;
    Ok((spec, batch, warnings))
}

/// Where and when the job would start: apply the submission to a copy of the
/// state and run one scheduling pass.
fn test_only_report(
    mut copy: ClusterState,
    command: Command,
    now: Timestamp,
) -> Result<(String, Option<TestOnlyEstimate>), Status> {
    let first = match copy.apply(command).map_err(status::rejection)? {
        Outcome::Submitted { first, .. } => first,
        _ => JobId(copy.next_job_id().0.saturating_sub(1)),
    };
    let (_, verdicts) = corral_scheduler::pass::run(&copy, now);
    let estimate = |start: Timestamp, nodes: Vec<String>| {
        let job = copy.job(first)?;
        let cpus = u32::try_from(nodes.len())
            .unwrap_or(u32::MAX)
            .saturating_mul(job.resources.cpus_per_node);
        Some(TestOnlyEstimate {
            job_id: first.0,
            start_ms: start.as_ms(),
            nodes,
            cpus,
            partition: job.partition.clone(),
        })
    };
    match verdicts.get(&first) {
        Some(Verdict::Starts(nodes)) => {
            let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
            let text = format!(
                "the job would start now on {} ({} node{})",
                hostlist::compress(&names),
                nodes.len(),
                if nodes.len() == 1 { "" } else { "s" }
            );
            return Ok((text, estimate(now, nodes.clone())));
        }
        Some(Verdict::Blocked {
            reservation: Some(r),
            ..
        }) => {
            let names: Vec<&str> = r.nodes.iter().map(String::as_str).collect();
            let text = format!(
                "the job would start in {} s on {}",
                r.start.secs_since(now),
                hostlist::compress(&names)
            );
            return Ok((text, estimate(r.start, r.nodes.clone())));
        }
        _ => {}
    }
    match corral_scheduler::explain(&copy, first, now) {
        Ok(explanation) => Ok((
            format!(
                "the job would not start now:\n  {}",
                explanation.lines.join("\n  ")
            ),
            None,
        )),
        Err(e) => Err(Status::internal(e.to_string())),
    }
}
