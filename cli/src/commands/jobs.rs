//! One job: `corral show job`, `hold`/`release`/`requeue`, and `corral checkpoint`
//! from inside a job.

use std::process::ExitCode;

use anyhow::Context;
use corral_proto::api::{
    ControlJobRequest, GetJobRequest, JobControl, ReportCheckpointRequest, UpdateField,
    UpdateJobRequest,
};
use corral_proto::records;
use corral_state::job::{Job, JobState};
use corral_state::time::Timestamp;

use crate::args::{CheckpointArgs, ShowWhat};
use crate::connection::{Cluster, Retry};
use crate::format::show_job;
use crate::when;

/// Hold, release or requeue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Hold a pending job.
    Hold,
    /// Release it.
    Release,
    /// Requeue a running job.
    Requeue,
}

/// `corral show job N`.
pub async fn show(cluster: &Cluster, what: ShowWhat, json: bool) -> anyhow::Result<ExitCode> {
    let ShowWhat::Job { job } = what;
    let (record, script) = fetch(cluster, job).await?;
    let explanation = if matches!(record.state, JobState::Pending | JobState::RequeueHold) {
        cluster
            .call(Retry::Idempotent, |mut c| async move {
                c.explain_job(GetJobRequest {
                    job_id: job,
                    consistent: false,
                })
                .await
            })
            .await
            .ok()
            .map(|e| e.explanation)
    } else {
        None
    };
    if json {
        super::print_json(&serde_json::json!({
            "job": record,
            "script": script,
            "explanation": explanation,
        }))?;
    } else {
        let script = (!script.is_empty()).then_some(script.as_str());
        print!(
            "{}",
            show_job(
                &record,
                script,
                explanation.as_deref(),
                Timestamp(when::now_ms())
            )
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// One job's record and its batch script (empty when not kept).
pub async fn fetch(cluster: &Cluster, job: u64) -> anyhow::Result<(Job, String)> {
    let reply = cluster
        .call(Retry::Idempotent, |mut c| async move {
            c.get_job(GetJobRequest {
                job_id: job,
                consistent: true,
            })
            .await
        })
        .await?;
    let record: Job = records::decode("job", &reply.job_json)?;
    Ok((record, reply.script))
}

/// Hold, release or requeue one job.
pub async fn control(
    cluster: &Cluster,
    job: u64,
    action: Action,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let wire = match action {
        Action::Hold => JobControl::Hold,
        Action::Release => JobControl::Release,
        Action::Requeue => JobControl::Requeue,
    };
    let reply = cluster
        .call(Retry::Once, |mut c| async move {
            c.control_job(ControlJobRequest {
                job_id: job,
                action: wire as i32,
            })
            .await
        })
        .await?;
    if json {
        super::print_json(&serde_json::json!({ "affected": reply.affected }))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `scontrol update JobId=N KEY=VALUE...`: the controller parses the fields.
pub async fn update(
    cluster: &Cluster,
    job: u64,
    fields: Vec<(String, String)>,
) -> anyhow::Result<()> {
    let fields: Vec<UpdateField> = fields
        .into_iter()
        .map(|(key, value)| UpdateField { key, value })
        .collect();
    cluster
        .call(Retry::Once, |mut c| {
            let fields = fields.clone();
            async move {
                c.update_job(UpdateJobRequest {
                    job_id: job,
                    fields,
                })
                .await
            }
        })
        .await?;
    Ok(())
}

/// `corral checkpoint --step N --path P`, with the job, attempt and node from the
/// job's environment unless given.
pub async fn checkpoint(cluster: &Cluster, args: CheckpointArgs) -> anyhow::Result<ExitCode> {
    let env_number = |name: &str| -> anyhow::Result<Option<u64>> {
        match std::env::var(name) {
            Ok(v) => v
                .parse()
                .map(Some)
                .with_context(|| format!("${name}='{v}' is not a number")),
            Err(_) => Ok(None),
        }
    };
    let job = match args.job {
        Some(job) => job,
        None => env_number("SLURM_JOB_ID")?
            .context("no job: run inside a job (SLURM_JOB_ID) or give --job")?,
    };
    let attempt = match args.attempt {
        Some(attempt) => attempt,
        None => {
            let restarts = env_number("SLURM_RESTART_COUNT")?.unwrap_or(0);
            u32::try_from(restarts + 1).context("SLURM_RESTART_COUNT is too large")?
        }
    };
    let node = match args.node {
        Some(node) => node,
        None => std::env::var("SLURMD_NODENAME")
            .context("no node: run inside a job (SLURMD_NODENAME) or give --node")?,
    };
    let request = ReportCheckpointRequest {
        job_id: job,
        attempt,
        node,
        step: args.step,
        path: args.path,
    };
    cluster
        .call(Retry::Idempotent, |mut c| {
            let request = request.clone();
            async move { c.report_checkpoint(request).await }
        })
        .await?;
    Ok(ExitCode::SUCCESS)
}

/// Inside a job (its agent's step socket in the environment, no explicit
/// `--job`), checkpoints are reported through the node's agent: the socket.
pub fn agent_socket(args: &CheckpointArgs) -> Option<std::path::PathBuf> {
    if args.job.is_some() {
        return None;
    }
    std::env::var_os(corral_proto::step::STEP_SOCKET_ENV).map(std::path::PathBuf::from)
}

/// Reports a checkpoint of the job this runs in to the node's agent, which
/// records it only for the attempt that runs now (a leftover process of an
/// ended attempt is refused, exit 1) and answers once the cluster committed
/// it; exit 3 when the agent holds it but no leader committed it within 5 s
/// (the agent keeps reporting it).
pub async fn checkpoint_through_agent(
    socket: &std::path::Path,
    args: &CheckpointArgs,
) -> anyhow::Result<ExitCode> {
    use corral_proto::agent::{read_frame, write_frame};
    use corral_proto::step::{StepControl, StepEvent};
    let var = |name: &str| -> anyhow::Result<String> {
        std::env::var(name).with_context(|| {
            format!("${name} is not set: `corral checkpoint` runs inside a corral job")
        })
    };
    let job_text = var("SLURM_JOB_ID")?;
    let job = job_text
        .parse()
        .with_context(|| format!("$SLURM_JOB_ID='{job_text}' is not a job id"))?;
    let attempt = match args.attempt {
        Some(attempt) => attempt,
        None => {
            let text = var("CORRAL_ATTEMPT")?;
            text.parse()
                .with_context(|| format!("$CORRAL_ATTEMPT='{text}' is not a number"))?
        }
    };
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .with_context(|| format!("cannot reach this node's agent at {}", socket.display()))?;
    let (mut reader, mut writer) = stream.into_split();
    let request = StepControl::Checkpoint {
        job: corral_state::ids::JobId(job),
        attempt,
        step: args.step,
        path: args.path.clone(),
    };
    write_frame(&mut writer, &request).await?;
    match read_frame::<_, StepEvent>(&mut reader).await? {
        Some(StepEvent::Accepted) => Ok(ExitCode::SUCCESS),
        Some(StepEvent::Held(reason)) => {
            eprintln!("corral checkpoint: {reason}");
            Ok(ExitCode::from(crate::exit::UNREACHABLE))
        }
        Some(StepEvent::Refused(reason)) => {
            eprintln!("corral checkpoint: {reason}");
            Ok(ExitCode::from(crate::exit::REFUSED))
        }
        other => anyhow::bail!("unexpected answer from the node's agent: {other:?}"),
    }
}
