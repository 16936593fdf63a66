//! `corral allocation-hold`: the batch script of a job that `srun` or
//! `salloc` created on a login node. It waits on its agent's step socket until
//! that command releases the allocation, and exits with the status it gives
//! (the job's exit code), or 1 with the reason when the command went away.

use std::process::ExitCode;

use anyhow::{Context, anyhow};
use corral_proto::agent::{read_frame, write_frame};
use corral_proto::step::{ALLOCATION_HOLD_COMMAND, STEP_SOCKET_ENV, StepControl, StepEvent};
use corral_state::ids::JobId;
use tokio::net::UnixStream;

/// The batch script of such a job. `corral` must be on the job's `PATH`, as
/// `srun` must be for steps; this binary's own directory is tried last, which
/// finds it where nodes install corral where the login node does.
pub fn script() -> String {
    let fallback = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.display().to_string()))
        .filter(|dir| !dir.contains(['\'', '\n']))
        .map(|dir| format!("PATH=\"$PATH\":'{dir}'\n"))
        .unwrap_or_default();
    format!(
        "#!/bin/sh\n\
         # The allocation of srun or salloc on a login node: it lasts until that\n\
         # command ends, and this script exits with the command's status.\n\
         {fallback}exec {ALLOCATION_HOLD_COMMAND}\n"
    )
}

/// Waits for the release; the exit status is the allocation's command's.
pub async fn run() -> anyhow::Result<ExitCode> {
    let variable = |name: &str| {
        std::env::var(name).map_err(|_| {
            anyhow!("{name} is not set: corral allocation-hold is the batch script of a job that srun or salloc created")
        })
    };
    let socket = variable(STEP_SOCKET_ENV)?;
    let job: u64 = variable("SLURM_JOB_ID")?
        .parse()
        .context("SLURM_JOB_ID is not a job id")?;
    let attempt: u32 = variable("CORRAL_ATTEMPT")?
        .parse()
        .context("CORRAL_ATTEMPT is not a number")?;
    let stream = UnixStream::connect(&socket)
        .await
        .with_context(|| format!("cannot reach this node's agent at {socket}"))?;
    let (mut reader, mut writer) = stream.into_split();
    let request = StepControl::AwaitRelease {
        job: JobId(job),
        attempt,
    };
    write_frame(&mut writer, &request).await?;
    match read_frame::<_, StepEvent>(&mut reader).await? {
        Some(StepEvent::Released(code, why)) => {
            if let Some(why) = why {
                eprintln!("corral allocation-hold: {why}");
            }
            Ok(ExitCode::from(code))
        }
        Some(StepEvent::Refused(reason)) => {
            eprintln!("corral allocation-hold: {reason}");
            Ok(ExitCode::from(1))
        }
        _ => {
            eprintln!("corral allocation-hold: lost this node's agent");
            Ok(ExitCode::from(1))
        }
    }
}
