//! `corral show job`: every field of a job in `scontrol show job`'s `Key=Value`
//! lines, then corral's own: one line per attempt and the checkpoint the next
//! attempt resumes from; then, when given, why the job waits and its script.
//! Times are UTC.

use corral_state::Timestamp;
use corral_state::job::{Attempt, Job, JobState, MemoryRequest, PendingReason};
use corral_state::slurm::duration::format_time_limit;
use corral_state::slurm::memory::format_memory_mb;

use super::datetime::format_timestamp;
use super::elapsed::{job_elapsed_secs, sacct_time};
use super::job_fields::{
    attempt_cause, attempt_nodes, cause_text, dependency_text, end_time, exit_code_text,
    output_path,
};
use super::reason::reason_name;
use super::terminal_safe::escape_controls;

/// What scontrol prints for a missing value.
const NULL: &str = "(null)";

/// The job's fields, one group of `Key=Value` pairs per line (the first line
/// unindented, the rest indented three spaces), as of `now`. `script` is the batch
/// script and `explanation` the scheduler's account of why the job waits; each
/// is printed after the fields when given.
pub fn show_job(
    job: &Job,
    script: Option<&str>,
    explanation: Option<&str>,
    now: Timestamp,
) -> String {
    let waiting = matches!(job.state, JobState::Pending | JobState::RequeueHold);
    let current = job.current_attempt().filter(|_| !waiting);
    let spec = &job.spec;
    let mut lines: Vec<String> = Vec::new();

    let mut first = format!("JobId={}", job.id);
    if let Some(task) = &job.array {
        first.push_str(&format!(
            " ArrayJobId={} ArrayTaskId={}",
            task.array_job_id, task.task_id
        ));
    }
    first.push_str(&format!(" JobName={}", escape_controls(&spec.name)));
    lines.push(first);
    lines.push(format!(
        "UserId={}({}) GroupId={} Account={} QOS={} Nice={}",
        spec.user,
        spec.uid,
        spec.gid,
        job.account,
        job.qos.as_deref().unwrap_or(NULL),
        spec.nice
    ));
    // A job that ended on a failing exit code says so, as Slurm's does.
    let failed_exit = job.state == JobState::Failed
        && current
            .and_then(|a| a.batch_exit.as_ref())
            .is_some_and(|e| e.code != 0 || e.signal.is_some());
    lines.push(format!(
        "JobState={} Reason={} Dependency={}",
        job.state.slurm_name(),
        if failed_exit {
            "NonZeroExitCode"
        } else {
            reason_name(job.reason)
        },
        spec.dependency
            .as_ref()
            .map_or(NULL.to_string(), dependency_text)
    ));
    lines.push(format!(
        "Requeue={} Restarts={} BatchFlag=1 ExitCode={}",
        u8::from(spec.requeue),
        job.requeue_count,
        exit_code_text(current.and_then(|a| a.batch_exit.as_ref()))
    ));
    lines.push(format!(
        "RunTime={} TimeLimit={} TimeMin={}",
        sacct_time(job_elapsed_secs(job, now)),
        format_time_limit(job.time_limit),
        spec.time_min.map_or("N/A".to_string(), format_time_limit)
    ));
    // A --begin time holds eligibility back; a job waiting for it is
    // expected to start then, as scontrol shows it.
    let eligible = job.eligible_time();
    lines.push(format!(
        "SubmitTime={} EligibleTime={}",
        format_timestamp(job.submitted_at),
        format_timestamp(eligible)
    ));
    let waits_to_begin = current.is_none() && job.reason == PendingReason::BeginTime;
    lines.push(format!(
        "StartTime={} EndTime={}",
        time_or_unknown(
            current
                .map(|a| a.started_at)
                .or(spec.begin_time.filter(|_| waits_to_begin))
        ),
        time_or_unknown(end_time(job, current))
    ));
    lines.push(format!(
        "Partition={} Reservation={} AllocNode={}",
        job.partition,
        spec.reservation.as_deref().unwrap_or(NULL),
        or_null(&spec.submit_host)
    ));
    lines.push(format!(
        "ReqNodeList={} ExcNodeList={} Features={}",
        or_null(&spec.required_nodes.join(",")),
        or_null(
            &job.resources
                .excluded_nodes
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join(",")
        ),
        or_null(&spec.features.join("&"))
    ));
    lines.push(format!(
        "NodeList={} BatchHost={}",
        current.map_or(NULL.to_string(), attempt_nodes),
        current.and_then(Attempt::batch_host).unwrap_or(NULL)
    ));
    let resources = &job.resources;
    lines.push(format!(
        "NumNodes={} NumCPUs={} NumTasks={} CPUs/Task={} OverSubscribe={}",
        resources.nodes,
        u64::from(resources.nodes) * u64::from(resources.cpus_per_node),
        resources.ntasks,
        spec.cpus_per_task,
        if resources.exclusive { "NO" } else { "OK" }
    ));
    lines.push("ReqB:S:C:T=0:0:*:*".to_string());
    let (per_node, per_cpu) = match spec.memory {
        MemoryRequest::PerNodeMb(mb) => (format_memory_mb(mb), None),
        MemoryRequest::PerCpuMb(mb) => ("0".to_string(), Some(format_memory_mb(mb))),
        MemoryRequest::PerGpuMb(_) | MemoryRequest::Unspecified | MemoryRequest::WholeNode => {
            ("0".to_string(), None)
        }
    };
    lines.push(match per_cpu {
        Some(per_cpu) => format!(
            "MinCPUsNode={} MinMemoryCPU={per_cpu} MinTmpDiskNode=0",
            resources.cpus_per_node
        ),
        None => format!(
            "MinCPUsNode={} MinMemoryNode={per_node} MinTmpDiskNode=0",
            resources.cpus_per_node
        ),
    });
    lines.push(format!("ReqTRES={}", requested_tres(job)));
    lines.push(format!(
        "AllocTRES={}",
        current.map_or(NULL.to_string(), allocated_tres)
    ));
    if resources.gpus_per_node > 0 {
        let gpu = match &resources.gpu_type {
            Some(gpu_type) => format!("gres/gpu:{gpu_type}:{}", resources.gpus_per_node),
            None => format!("gres/gpu:{}", resources.gpus_per_node),
        };
        lines.push(format!("TresPerNode={gpu}"));
    }
    lines.push(format!(
        "Command={}",
        escape_controls(spec.command.as_deref().unwrap_or(NULL))
    ));
    lines.push(format!("WorkDir={}", escape_controls(&spec.workdir)));
    let stdout = output_path(job, current, spec.stdout.as_deref());
    let stderr = match spec.stderr.as_deref() {
        Some(pattern) => output_path(job, current, Some(pattern)),
        None => stdout.clone(),
    };
    lines.push(format!(
        "StdErr={stderr} StdIn={} StdOut={stdout}",
        spec.stdin.as_deref().unwrap_or("/dev/null")
    ));
    // As scontrol: only when mail was asked for, to the submitting user by default.
    if !spec.mail_type.is_empty() {
        lines.push(format!(
            "MailUser={} MailType={}",
            escape_controls(spec.mail_user.as_deref().unwrap_or(&spec.user)),
            spec.mail_type
        ));
    }
    if let Some(comment) = &spec.comment {
        lines.push(format!("Comment={}", escape_controls(comment)));
    }
    for attempt in &job.attempts {
        lines.push(attempt_line(job, attempt));
    }
    lines.push(match &job.last_checkpoint {
        Some(c) => format!(
            "ResumeFrom={} CheckpointStep={} CheckpointAttempt={} CheckpointTime={}",
            c.path,
            c.step,
            c.attempt,
            format_timestamp(c.at)
        ),
        None => format!("ResumeFrom={NULL}"),
    });

    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push_str("   ");
        }
        out.push_str(line);
        out.push('\n');
    }
    if let Some(text) = explanation {
        push_section(&mut out, "Explanation:", text);
    }
    if let Some(text) = script {
        push_section(&mut out, "BatchScript:", text);
    }
    out
}

/// `scontrol show job -d`: a line per node of the running attempt, as
/// Slurm's details print them: `Nodes=gpu01 CPUs=4 Mem=0 GRES=gpu:2(IDX:0-1)`
/// (corral does not pin CPUs, so it counts them where Slurm lists `CPU_IDs`).
pub fn detail_lines(job: &Job) -> Vec<String> {
    let Some(attempt) = job
        .current_attempt()
        .filter(|_| matches!(job.state, JobState::Running | JobState::Completing))
    else {
        return Vec::new();
    };
    attempt
        .allocation
        .iter()
        .map(|node| {
            let mut line = format!(
                "  Nodes={} CPUs={} Mem={}",
                node.node, node.cpus, node.memory_mb
            );
            if !node.gpus.is_empty() {
                let ids = super::queue_fields::task_ranges(&node.gpus, None);
                let kind = job
                    .resources
                    .gpu_type
                    .as_ref()
                    .map_or(String::new(), |t| format!("{t}:"));
                line.push_str(&format!(" GRES=gpu:{kind}{}(IDX:{ids})", node.gpus.len()));
            }
            line
        })
        .collect()
}

fn push_section(out: &mut String, title: &str, text: &str) {
    out.push('\n');
    out.push_str(title);
    out.push('\n');
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
}

fn or_null(value: &str) -> &str {
    if value.is_empty() { NULL } else { value }
}

fn time_or_unknown(at: Option<Timestamp>) -> String {
    at.map_or_else(|| "Unknown".to_string(), format_timestamp)
}

/// ReqTRES: what every attempt asks for, summed over the nodes.
fn requested_tres(job: &Job) -> String {
    let r = &job.resources;
    let nodes = u64::from(r.nodes);
    let memory = if r.whole_node_memory || job.spec.memory == MemoryRequest::WholeNode {
        "all".to_string()
    } else {
        format_memory_mb(nodes.saturating_mul(r.memory_per_node_mb))
    };
    let mut tres = format!(
        "cpu={},mem={memory},node={nodes}",
        nodes * u64::from(r.cpus_per_node)
    );
    if r.gpus_per_node > 0 {
        tres.push_str(&format!(",gres/gpu={}", r.total_gpus()));
    }
    tres
}

/// AllocTRES: what the attempt holds.
fn allocated_tres(attempt: &Attempt) -> String {
    let cpus: u64 = attempt.allocation.iter().map(|a| u64::from(a.cpus)).sum();
    let memory: u64 = attempt.allocation.iter().map(|a| a.memory_mb).sum();
    let mut tres = format!(
        "cpu={cpus},mem={},node={}",
        format_memory_mb(memory),
        attempt.allocation.len()
    );
    let gpus = attempt.gpu_count();
    if gpus > 0 {
        tres.push_str(&format!(",gres/gpu={gpus}"));
    }
    tres
}

/// One attempt: its nodes and GPUs, when it ran, how it ended and its checkpoint.
fn attempt_line(job: &Job, attempt: &Attempt) -> String {
    let state = attempt.end.as_ref().map_or(job.state, |end| end.state);
    let end = attempt
        .end
        .as_ref()
        .map(|e| e.at)
        .or_else(|| attempt.ending.as_ref().map(|e| e.at));
    let mut line = format!(
        "Attempt={} NodeList={} GPUs={} StartTime={} EndTime={} State={} ExitCode={}",
        attempt.number,
        or_null(&attempt_nodes(attempt)),
        attempt.gpu_count(),
        format_timestamp(attempt.started_at),
        time_or_unknown(end),
        state.slurm_name(),
        exit_code_text(attempt.batch_exit.as_ref())
    );
    match &attempt.checkpoint {
        Some(c) => line.push_str(&format!(" Checkpoint={}@{}", c.step, c.path)),
        None => line.push_str(&format!(" Checkpoint={NULL}")),
    }
    if let Some(notice) = &attempt.preemption {
        line.push_str(&format!(
            " PreemptedFor={} GraceUntil={}",
            notice.for_job,
            format_timestamp(notice.deadline)
        ));
    }
    if let Some(cause) = attempt_cause(attempt) {
        line.push_str(&format!(" Cause={}", cause_text(cause)));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::test_jobs::{jobs, now, scenario};
    use corral_state::slurm::dependency::parse_dependency;

    #[test]
    fn requeued_job_with_attempts_checkpoint_explanation_and_script() {
        let job = &jobs(&scenario())[0];
        let out = show_job(job, Some("#!/bin/bash\necho hi"), Some("Running."), now());
        let expected = "\
JobId=1 JobName=train
   UserId=alice(1000) GroupId=1000 Account=ml QOS=(null) Nice=0
   JobState=RUNNING Reason=None Dependency=(null)
   Requeue=1 Restarts=1 BatchFlag=1 ExitCode=0:0
   RunTime=01:00:00 TimeLimit=01:00:00 TimeMin=N/A
   SubmitTime=2026-11-21T08:00:00 EligibleTime=2026-11-21T08:15:00
   StartTime=2026-11-21T08:16:40 EndTime=2026-11-21T09:16:40
   Partition=gpu Reservation=(null) AllocNode=login1
   ReqNodeList=(null) ExcNodeList=(null) Features=(null)
   NodeList=n[1,4] BatchHost=n1
   NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 OverSubscribe=OK
   ReqB:S:C:T=0:0:*:*
   MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0
   ReqTRES=cpu=2,mem=0,node=2,gres/gpu=16
   AllocTRES=cpu=2,mem=0,node=2,gres/gpu=16
   TresPerNode=gres/gpu:8
   Command=(null)
   WorkDir=/home/user
   StdErr=/home/user/slurm-1.out StdIn=/dev/null StdOut=/home/user/slurm-1.out
   Attempt=1 NodeList=n[1-2] GPUs=16 StartTime=2026-11-21T08:01:00 EndTime=2026-11-21T08:15:00 State=REQUEUED ExitCode=0:0 Checkpoint=500@/ckpt/500 Cause=node n2 failed: agent lost
   Attempt=2 NodeList=n[1,4] GPUs=16 StartTime=2026-11-21T08:16:40 EndTime=Unknown State=RUNNING ExitCode=0:0 Checkpoint=(null)
   ResumeFrom=/ckpt/500 CheckpointStep=500 CheckpointAttempt=1 CheckpointTime=2026-11-21T08:10:00

Explanation:
Running.

BatchScript:
#!/bin/bash
echo hi
";
        assert_eq!(out, expected);
    }

    #[test]
    fn pending_array_task_with_options() {
        let mut job = jobs(&scenario())[4].clone();
        job.spec.dependency = Some(parse_dependency("afterok:3_1?after:4+5").unwrap());
        job.spec.stdout = Some("logs/%x-%A_%a.out".into());
        job.spec.stderr = Some("/tmp/%u.err".into());
        job.spec.comment = Some("sweep lr".into());
        job.spec.features = vec!["ib".into(), "h100".into()];
        job.spec.time_min = Some(corral_state::slurm::duration::TimeLimit::Seconds(600));
        job.spec.mail_type = corral_state::slurm::mail::MailTypes::parse("FAIL,END").unwrap();
        job.spec.command = Some("/home/user/sweep.sh".into());
        let out = show_job(&job, None, None, now());
        let expected = "\
JobId=5 ArrayJobId=5 ArrayTaskId=1 JobName=sweep
   UserId=alice(1000) GroupId=1000 Account=ml QOS=(null) Nice=0
   JobState=PENDING Reason=Priority Dependency=afterok:3_1?after:4+5
   Requeue=1 Restarts=0 BatchFlag=1 ExitCode=0:0
   RunTime=00:00:00 TimeLimit=01:00:00 TimeMin=00:10:00
   SubmitTime=2026-11-21T08:17:50 EligibleTime=2026-11-21T08:17:50
   StartTime=Unknown EndTime=Unknown
   Partition=gpu Reservation=(null) AllocNode=login1
   ReqNodeList=(null) ExcNodeList=(null) Features=ib&h100
   NodeList=(null) BatchHost=(null)
   NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 OverSubscribe=OK
   ReqB:S:C:T=0:0:*:*
   MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0
   ReqTRES=cpu=1,mem=0,node=1,gres/gpu=1
   AllocTRES=(null)
   TresPerNode=gres/gpu:1
   Command=/home/user/sweep.sh
   WorkDir=/home/user
   StdErr=/tmp/alice.err StdIn=/dev/null StdOut=/home/user/logs/sweep-5_1.out
   MailUser=alice MailType=END,FAIL
   Comment=sweep lr
   ResumeFrom=(null)
";
        assert_eq!(out, expected);
    }

    #[test]
    fn completed_job_ends_when_it_ended() {
        let job = &jobs(&scenario())[1];
        let out = show_job(job, None, None, now());
        assert!(out.contains("JobState=COMPLETED Reason=None"), "{out}");
        assert!(out.contains("RunTime=00:20:00"), "{out}");
        assert!(
            out.contains("StartTime=2026-11-21T08:02:00 EndTime=2026-11-21T08:22:00"),
            "{out}"
        );
        assert!(out.contains("Cause=exited with code 0"), "{out}");
    }
}
