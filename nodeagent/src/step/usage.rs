//! `sstat` on one node: what job `job`'s processes here use now, by step and
//! task (read from `/proc` on a blocking thread), and its GPUs' latest health
//! samples. The job's user may look, and root locally or an operator or admin
//! certificate remotely.

use std::collections::BTreeSet;

use corral_pki::Role;
use corral_proto::step::{GpuUsage, NodeUsage, StepEvent, StepUsage, TaskUsage};
use corral_state::ids::JobId;

use super::coordinator::{Caller, StepService};
use crate::job::process::{GroupUsage, usage_of_groups};

/// The answer to `StepControl::Usage`.
pub async fn of_job(service: &StepService, job: JobId, caller: &Caller) -> StepEvent {
    let supervisor = &service.supervisor;
    let node = supervisor.node().to_string();
    let Some(targets) = supervisor.usage_targets(job) else {
        return StepEvent::Refused(format!("job {job} does not run on {node}"));
    };
    let staff = matches!(caller, Caller::Remote(identity) if matches!(identity.role, Role::Operator | Role::Admin));
    if !staff && !caller.may_use(&targets.user, targets.uid) {
        return StepEvent::Refused(format!(
            "{} may not see job {job}, which belongs to {}",
            caller.describe(),
            targets.user
        ));
    }
    let groups: BTreeSet<i32> = targets
        .batch
        .iter()
        .chain(targets.tasks.iter().map(|(g, _)| g))
        .copied()
        .collect();
    let usage = match tokio::task::spawn_blocking(move || usage_of_groups(&groups)).await {
        Ok(usage) => usage,
        Err(e) => return StepEvent::Refused(format!("reading /proc on {node} failed: {e}")),
    };
    let task = |rank: u32, local: u32, group: &i32| -> TaskUsage {
        let used = usage.get(group).cloned().unwrap_or_default();
        to_task(
            (rank, local),
            u32::try_from(*group).unwrap_or_default(),
            used,
        )
    };
    let mut steps: Vec<StepUsage> = Vec::new();
    if let Some(group) = &targets.batch {
        steps.push(StepUsage {
            step: None,
            tasks: vec![task(0, 0, group)],
        });
    }
    for (group, id) in &targets.tasks {
        let tasks = task(id.rank, id.local, group);
        match steps.iter_mut().find(|s| s.step == Some(id.step)) {
            Some(step) => step.tasks.push(tasks),
            None => steps.push(StepUsage {
                step: Some(id.step),
                tasks: vec![tasks],
            }),
        }
    }
    for step in &mut steps {
        step.tasks.sort_by_key(|t| t.rank);
    }
    steps.sort_by_key(|s| s.step.map_or(0, |n| u64::from(n) + 1));
    let samples = service.gpu_samples.borrow().clone();
    let gpus = targets
        .gpus
        .iter()
        .map(|index| {
            let sample = samples.iter().find(|s| s.index == *index);
            GpuUsage {
                index: *index,
                utilization_pct: sample.and_then(|s| s.utilization_pct),
                memory_used_mb: sample.and_then(|s| s.memory_used_mb),
            }
        })
        .collect();
    StepEvent::Usage(Box::new(NodeUsage {
        node,
        attempt: targets.key.1,
        steps,
        gpus,
    }))
}

fn to_task((rank, local): (u32, u32), leader: u32, used: GroupUsage) -> TaskUsage {
    TaskUsage {
        rank,
        local,
        leader,
        pids: used.pids,
        cpu_ms: used.cpu_ms,
        rss_kib: used.rss_kib,
        vmsize_kib: used.vmsize_kib,
        major_faults: used.major_faults,
        read_bytes: used.read_bytes,
        write_bytes: used.write_bytes,
    }
}
