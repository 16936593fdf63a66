//! A plan as canonical text, one decision per line, in the plan's own order:
//! allocations, preemptions, reason changes, then backfill reservations.
//!
//! ```text
//! start 2 n[5-6] gpus=0-7 cpus=1 mem=0
//! start 7 attempt=2 n1 gpus=0-1 cpus=8 mem=64G; n2 gpus=4-5 cpus=8 mem=64G
//! preempt 1 for 4 signal=TERM grace=120
//! reason 3 Resources
//! backfill 3 at=7200 n[1-2]
//! ```

use corral_scheduler::Plan;
use corral_state::Timestamp;
use corral_state::job::NodeAllocation;
use corral_state::slurm::hostlist;
use corral_state::slurm::memory::format_memory_mb;

/// `0-3,6` for GPU indices, `none` for no GPUs.
fn gpu_list(gpus: &[u32]) -> String {
    if gpus.is_empty() {
        return "none".into();
    }
    let mut sorted = gpus.to_vec();
    sorted.sort_unstable();
    let mut parts = Vec::new();
    let mut start = sorted[0];
    let mut end = start;
    for &g in &sorted[1..] {
        if g == end + 1 {
            end = g;
        } else {
            parts.push(if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            });
            start = g;
            end = g;
        }
    }
    parts.push(if start == end {
        start.to_string()
    } else {
        format!("{start}-{end}")
    });
    parts.join(",")
}

/// Seconds since the base when whole, else milliseconds with an `ms` suffix.
pub fn time(at: Timestamp) -> String {
    if at.as_ms().is_multiple_of(1000) {
        at.as_secs().to_string()
    } else {
        format!("{}ms", at.as_ms())
    }
}

/// The nodes of a gang, grouped by identical (GPUs, CPUs, memory), each group's
/// nodes compressed into a hostlist; groups in order of first appearance.
fn gang(nodes: &[NodeAllocation]) -> String {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for part in nodes {
        let attrs = format!(
            "gpus={} cpus={} mem={}",
            gpu_list(&part.gpus),
            part.cpus,
            format_memory_mb(part.memory_mb)
        );
        match groups.iter_mut().find(|(a, _)| *a == attrs) {
            Some((_, names)) => names.push(&part.node),
            None => groups.push((attrs, vec![&part.node])),
        }
    }
    groups
        .iter()
        .map(|(attrs, names)| format!("{} {attrs}", hostlist::compress(names)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The plan, canonical: everything it decides, nothing else (no counters).
pub fn plan(plan: &Plan) -> String {
    let mut out = Vec::new();
    for a in &plan.allocations {
        let attempt = if a.attempt == 1 {
            String::new()
        } else {
            format!(" attempt={}", a.attempt)
        };
        out.push(format!("start {}{attempt} {}", a.job, gang(&a.nodes)));
    }
    for p in &plan.preemptions {
        let attempt = if p.attempt == 1 {
            String::new()
        } else {
            format!(" attempt={}", p.attempt)
        };
        out.push(format!(
            "preempt {}{attempt} for {} signal={} grace={}",
            p.job,
            p.for_job,
            p.signal.name(),
            p.grace_seconds
        ));
    }
    for (job, reason) in &plan.reasons {
        out.push(format!("reason {job} {reason:?}"));
    }
    for r in &plan.reservations {
        out.push(format!(
            "backfill {} at={} {}",
            r.job,
            time(r.start),
            hostlist::compress(&r.nodes)
        ));
    }
    out.join("\n")
}
