//! The cluster's records at the end of a run, as `Final` events: every job
//! with its attempts (allocation, start, end and its cause) and the GPU time
//! charged, read with `corral --json queue -t all`; and each attempt's
//! preemption notice (`PreemptionNotice`: for which job, the deadline).

use std::time::Duration;

use anyhow::Context;
use corral_jepsen::history::{EventKind, FinalAttempt, FinalJob};

use crate::cluster::Cluster;
use crate::recorder::Recorder;
use crate::workload::slurm_state;

/// The records read at the end.
pub struct Finals {
    /// Every job.
    pub jobs: Vec<FinalJob>,
    /// `PreemptionNotice` events: the attempts told they were preempted.
    pub preemptions: Vec<EventKind>,
}

/// Every job's record, read now.
pub fn read(cluster: &Cluster, recorder: &Recorder) -> anyhow::Result<Finals> {
    let out = cluster.corral(&["--json", "queue", "-t", "all"], Duration::from_secs(60))?;
    if !out.status.success() {
        anyhow::bail!(
            "corral queue -t all failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let jobs: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("reading corral queue -t all")?;
    let list = jobs
        .as_array()
        .context("corral queue -t all did not list jobs")?;
    Ok(Finals {
        jobs: list
            .iter()
            .map(|job| final_job(job, recorder))
            .collect::<anyhow::Result<_>>()?,
        preemptions: list
            .iter()
            .flat_map(|job| preemptions(job, recorder))
            .collect(),
    })
}

/// Records them, all at the time of the reading.
pub fn record(recorder: &Recorder, finals: Finals) {
    let t = recorder.now();
    for job in finals.jobs {
        recorder.record_at(t, EventKind::Final(job));
    }
    for preemption in finals.preemptions {
        recorder.record_at(t, preemption);
    }
}

/// The preemption notices of a job's attempts.
fn preemptions(job: &serde_json::Value, recorder: &Recorder) -> Vec<EventKind> {
    let Some(id) = job["id"].as_u64() else {
        return Vec::new();
    };
    job["attempts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|attempt| {
            let notice = &attempt["preemption"];
            Some(EventKind::PreemptionNotice {
                job: id,
                attempt: attempt["number"].as_u64()? as u32,
                for_job: notice["for_job"].as_u64()?,
                deadline: recorder.run_time_of_wall(notice["deadline"].as_u64()?),
            })
        })
        .collect()
}

fn final_job(job: &serde_json::Value, recorder: &Recorder) -> anyhow::Result<FinalJob> {
    let id = job["id"].as_u64().context("a job without an id")?;
    let mut attempts = Vec::new();
    let mut gpu_ms = 0;
    for attempt in job["attempts"].as_array().into_iter().flatten() {
        gpu_ms += attempt["gpu_ms"].as_u64().unwrap_or(0);
        let allocation = attempt["allocation"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|part| {
                let node = part["node"].as_str().unwrap_or_default().to_string();
                let gpus = part["gpus"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|g| g.as_u64().map(|g| g as u32))
                    .collect();
                (node, gpus)
            })
            .collect();
        let end = &attempt["end"];
        attempts.push(FinalAttempt {
            number: attempt["number"]
                .as_u64()
                .context("an attempt without a number")? as u32,
            allocation,
            start: attempt["started_at"]
                .as_u64()
                .map(|w| recorder.run_time_of_wall(w)),
            end: end["at"].as_u64().map(|w| recorder.run_time_of_wall(w)),
            cause: (!end.is_null()).then(|| cause(&end["cause"])),
        });
    }
    Ok(FinalJob {
        job: id,
        name: job["spec"]["name"].as_str().unwrap_or_default().to_string(),
        state: slurm_state(job["state"].as_str().unwrap_or("UNKNOWN")),
        requeues: job["requeue_count"].as_u64().unwrap_or(0) as u32,
        attempts,
        gpu_ms,
    })
}

/// An end cause as the checkers name it: `Exited(0)`, `Exited(1)`,
/// `Exited(signal 9)`, or the variant's name (`NodeFailure`, `GpuFailure`...).
fn cause(cause: &serde_json::Value) -> String {
    if let Some(name) = cause.as_str() {
        return name.to_string();
    }
    let Some((name, detail)) = cause.as_object().and_then(|o| o.iter().next()) else {
        return cause.to_string();
    };
    if name == "Exited" {
        return match detail["signal"].as_u64() {
            Some(signal) => format!("Exited(signal {signal})"),
            None => format!("Exited({})", detail["code"].as_i64().unwrap_or(-1)),
        };
    }
    name.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_named_as_the_checkers_expect() {
        let exited = serde_json::json!({"Exited": {"code": 0, "signal": null}});
        assert_eq!(cause(&exited), "Exited(0)");
        let killed = serde_json::json!({"Exited": {"code": 0, "signal": 9}});
        assert_eq!(cause(&killed), "Exited(signal 9)");
        let node = serde_json::json!({"NodeFailure": {"node": "gpu01", "reason": "down"}});
        assert_eq!(cause(&node), "NodeFailure");
        assert_eq!(cause(&serde_json::json!("TimeLimit")), "TimeLimit");
    }
}
