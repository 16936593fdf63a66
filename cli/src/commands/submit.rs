//! `corral submit` (and `sbatch`): split sbatch options from the script, read the
//! script (or standard input), and submit with an idempotency key so a retry after
//! a controller dies never submits twice.

use std::io::Read;
use std::process::ExitCode;

use anyhow::Context;
use corral_proto::api::SubmitJobRequest;
use corral_state::job::{Job, JobState};
use corral_state::job_request::command_of_script;
use corral_state::slurm::sbatch::parse_args;

use crate::connection::{Cluster, Retry};

/// Submits. Invoked as `sbatch` (`as_sbatch`), a refused option prints
/// getopt's or sbatch's first line and exits 255, and a refused request
/// `sbatch: error: Batch job submission failed: ...` with status 1, as sbatch.
pub async fn run(
    cluster: &Cluster,
    args: &[String],
    as_sbatch: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    match submit(cluster, args, as_sbatch, json).await {
        Err(error) if as_sbatch && crate::exit::code_for(&error) == crate::exit::REFUSED => {
            eprintln!("sbatch: error: Batch job submission failed: {error:#}");
            Ok(ExitCode::from(1))
        }
        other => other,
    }
}

/// sbatch's exit status for a refused option.
const SBATCH_OPTION_ERROR: u8 = 255;

/// What sbatch or salloc (`program`: getopt, then its own checks) prints for
/// a refused option, and its exit status: Slurm's first line, then corral's
/// fuller explanation.
pub fn option_error(program: &str, e: &corral_state::slurm::FormatError) -> (String, u8) {
    match e.format {
        "time limit" => {
            return (
                format!("{program}: error: Invalid --time specification\n{e}"),
                SBATCH_OPTION_ERROR,
            );
        }
        "--begin time" => {
            return (
                format!("{program}: error: Invalid --begin specification\n{e}"),
                SBATCH_OPTION_ERROR,
            );
        }
        // sbatch finds a bad GRES only when it builds the request: status 1.
        "gres" => {
            return (
                format!("{program}: error: Invalid generic resource (gres) specification\n{e}"),
                1,
            );
        }
        _ => {}
    }
    let try_help = format!("Try \"{program} --help\" for more information");
    let text = if e.reason == "unknown option" {
        format!("{program}: unrecognized option '{}'\n{try_help}", e.token)
    } else if e.reason.ends_with("requires a value") {
        format!(
            "{program}: option '{}' requires an argument\n{try_help}",
            e.token
        )
    } else if e.reason.ends_with("takes no value") {
        let name = e.token.split('=').next().unwrap_or(&e.token);
        format!("{program}: option '{name}' doesn't allow an argument\n{try_help}")
    } else if e.reason.contains("is ambiguous") {
        format!("{program}: {}\n{try_help}", e.reason)
    } else {
        format!("{program}: error: {e}")
    };
    (text, SBATCH_OPTION_ERROR)
}

async fn submit(
    cluster: &Cluster,
    args: &[String],
    as_sbatch: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let (options, rest) = match parse_args(args) {
        Ok(parsed) => parsed,
        Err(e) if as_sbatch => {
            let (text, status) = option_error("sbatch", &e);
            eprintln!("{text}");
            return Ok(ExitCode::from(status));
        }
        Err(e) => return Err(anyhow::anyhow!("{e}")),
    };
    let option_args = args[..args.len() - rest.len()].to_vec();
    let (script_path, script_text, script_args) = match rest.split_first() {
        Some((path, script_args)) if path != "-" => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the batch script '{path}'"))?;
            (path.clone(), text, script_args.to_vec())
        }
        Some((_, script_args)) => (String::new(), read_stdin()?, script_args.to_vec()),
        None if options.wrap.is_some() => (String::new(), String::new(), Vec::new()),
        None => (String::new(), read_stdin()?, Vec::new()),
    };
    // `#SBATCH --wait` too: sbatch reads its script's options itself.
    let wait = options.wait
        || corral_state::slurm::sbatch::parse_script_directives(&script_text)
            .is_ok_and(|directives| directives.wait);
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    // scontrol's Command=: (null) for --wrap and a script on standard input.
    let command = if script_path.is_empty() {
        String::new()
    } else {
        command_of_script(&script_path, &cwd.display().to_string())
    };
    let script_path = if script_path.is_empty() && !script_text.is_empty() {
        "sbatch".to_string()
    } else {
        script_path
    };
    let request = SubmitJobRequest {
        command,
        args: option_args,
        script_path,
        script_text,
        script_args,
        test_only: options.test_only,
        ..from_this_shell(&cwd)
    };
    let size = prost::Message::encoded_len(&request);
    if size > corral_proto::MAX_API_MESSAGE_BYTES {
        anyhow::bail!(
            "the submission (script, arguments and environment) takes {:.1} MiB; a cluster takes at most its max_batch_bytes (4 MiB unless configured), and no request over {} MiB: keep data out of the batch script, or use --export=NONE for a large environment",
            size as f64 / (1024.0 * 1024.0),
            corral_proto::MAX_API_MESSAGE_BYTES / (1024 * 1024)
        );
    }
    let reply = cluster
        .call(Retry::Idempotent, |mut client| {
            let request = request.clone();
            async move { client.submit_job(request).await }
        })
        .await?;
    for warning in &reply.warnings {
        eprintln!("sbatch: warning: {warning}");
    }
    if options.test_only {
        if json {
            super::print_json(&serde_json::json!({
                "test_only": reply.test_only_report,
                "estimate": reply.test_only.as_ref().map(|e| serde_json::json!({
                    "job_id": e.job_id, "start_ms": e.start_ms, "nodes": e.nodes,
                    "cpus": e.cpus, "partition": e.partition,
                })),
            }))?;
        } else if let Some(estimate) = &reply.test_only {
            // Slurm's words, on standard error as sbatch prints them.
            eprintln!("sbatch: {}", test_only_line(estimate));
        } else {
            println!("{}", reply.test_only_report);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if json {
        super::print_json(&serde_json::json!({
            "job_id": reply.first_job_id,
            "count": reply.count,
        }))?;
    } else if options.parsable {
        println!("{}", reply.first_job_id);
    } else {
        println!("Submitted batch job {}", reply.first_job_id);
    }
    if wait {
        return wait_for_exit(cluster, reply.first_job_id).await;
    }
    Ok(ExitCode::SUCCESS)
}

/// `sbatch --wait`: follows the job (every task of an array) until it has
/// ended, and exits as sbatch does: with the highest exit code among them, 1
/// for one killed by a signal, 0 for one that never ran.
async fn wait_for_exit(cluster: &Cluster, job: u64) -> anyhow::Result<ExitCode> {
    let jobs = super::wait::resolve(cluster, &[job]).await?;
    let ended = super::wait::until_all_ended(cluster, &jobs, |_| {}).await?;
    let code = ended.values().map(exit_code_of).max().unwrap_or(0);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// What `sbatch --wait` makes of one ended job, as Slurm's sbatch: its
/// script's exit code; 1 for a script killed by a signal, or a job that failed
/// without its script's status (its node failed, its launch did); 0 for one
/// cancelled before it ran.
fn exit_code_of(job: &Job) -> i32 {
    match job.current_attempt().and_then(|a| a.batch_exit.as_ref()) {
        Some(exit) if exit.signal.is_some() => 1,
        Some(exit) => exit.code.clamp(0, 255),
        None if matches!(job.state, JobState::Completed | JobState::Cancelled) => 0,
        None => 1,
    }
}

fn read_stdin() -> anyhow::Result<String> {
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        anyhow::bail!(
            "no batch script: give a script file, pipe one on standard input, or use --wrap=COMMAND"
        );
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("cannot read the batch script from standard input")?;
    Ok(text)
}

/// A submission from this process: its environment, user, host, `cwd`, and a
/// fresh idempotency key; the caller fills in the script and options.
pub fn from_this_shell(cwd: &std::path::Path) -> SubmitJobRequest {
    SubmitJobRequest {
        cwd: cwd.display().to_string(),
        environment: std::env::vars().collect(),
        uid: nix::unistd::getuid().as_raw(),
        gid: nix::unistd::getgid().as_raw(),
        submit_host: nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_default(),
        idempotency_key: new_key(),
        ..SubmitJobRequest::default()
    }
}

/// A fresh idempotency key: 128 random bits.
fn new_key() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// `Job 9 to start at 2026-11-26T11:42:28 using 2 processors on nodes n[1-2]
/// in partition batch`, as `sbatch --test-only` says it.
pub fn test_only_line(estimate: &corral_proto::api::TestOnlyEstimate) -> String {
    let nodes: Vec<&str> = estimate.nodes.iter().map(String::as_str).collect();
    format!(
        "Job {} to start at {} using {} processors on nodes {} in partition {}",
        estimate.job_id,
        crate::format::datetime::format_timestamp(corral_state::time::Timestamp(estimate.start_ms)),
        estimate.cpus,
        corral_state::slurm::hostlist::compress(&nodes),
        estimate.partition
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(args: &[&str]) -> (String, u8) {
        option_error("sbatch", &parse_args(args).unwrap_err())
    }

    #[test]
    fn refused_options_in_sbatchs_words_and_statuses() {
        assert_eq!(
            refusal(&["--x"]),
            (
                "sbatch: unrecognized option '--x'\nTry \"sbatch --help\" for more information"
                    .into(),
                255
            )
        );
        let (text, status) = refusal(&["--time=abc"]);
        assert!(
            text.starts_with("sbatch: error: Invalid --time specification\n"),
            "{text}"
        );
        assert_eq!(status, 255);
        let (text, status) = refusal(&["--gres=foo:1"]);
        assert!(
            text.starts_with("sbatch: error: Invalid generic resource (gres) specification\n"),
            "{text}"
        );
        assert_eq!(status, 1);
        assert!(
            refusal(&["--time"])
                .0
                .starts_with("sbatch: option '--time' requires an argument\n")
        );
        assert!(
            refusal(&["--hold=1"])
                .0
                .starts_with("sbatch: option '--hold' doesn't allow an argument\n")
        );
        assert!(
            refusal(&["--gpu=1"])
                .0
                .starts_with("sbatch: option '--gpu' is ambiguous; possibilities: ")
        );
    }
}
