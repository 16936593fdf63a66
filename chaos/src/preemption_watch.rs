//! Finding a preemption as it begins: the faults of `preempt-faults` strike
//! right after a running attempt is told it is preempted. Polls `corral
//! --json queue` for an attempt whose notice is fresh (sent under a second
//! and a half ago, as its deadline tells).

use std::time::{Duration, Instant};

use anyhow::bail;

use crate::cluster::Cluster;
use crate::recorder::wall_ms;

/// How fresh a notice must be.
const FRESH_MS: u64 = 1_500;

/// A preempted attempt still running: its job, and its nodes (batch node
/// first).
#[derive(Debug, Clone)]
pub struct Victim {
    pub job: u64,
    pub nodes: Vec<String>,
}

/// Waits up to `patience` for a fresh preemption; `grace_ms` is the site's
/// grace (the notice came that long before the deadline).
pub fn next(cluster: &Cluster, grace_ms: u64, patience: Duration) -> anyhow::Result<Victim> {
    let until = Instant::now() + patience;
    while Instant::now() < until {
        if let Ok(out) = cluster.corral(&["--json", "queue"], Duration::from_secs(5))
            && out.status.success()
            && let Ok(jobs) = serde_json::from_slice::<serde_json::Value>(&out.stdout)
            && let Some(victim) = fresh(&jobs, grace_ms, wall_ms())
        {
            return Ok(victim);
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    bail!("no preemption began within {} s", patience.as_secs())
}

/// The first running attempt in `jobs` (a `corral --json queue` answer)
/// whose notice came within [`FRESH_MS`] of `now` (wall ms).
fn fresh(jobs: &serde_json::Value, grace_ms: u64, now: u64) -> Option<Victim> {
    jobs.as_array()?.iter().find_map(|job| {
        let attempt = job["attempts"].as_array()?.last()?;
        let deadline = attempt["preemption"]["deadline"].as_u64()?;
        let noticed = deadline.saturating_sub(grace_ms);
        let fresh = attempt["end"].is_null() && noticed <= now + 500 && now <= noticed + FRESH_MS;
        fresh.then(|| Victim {
            job: job["id"].as_u64().unwrap_or_default(),
            nodes: attempt["allocation"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a["node"].as_str().map(String::from))
                .collect(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_running_attempt_noticed_just_now_is_a_fresh_victim() {
        let jobs = serde_json::json!([
            {"id": 3, "attempts": [{"end": null, "allocation": [{"node": "gpu01"}]}]},
            {"id": 4, "attempts": [{"end": null, "preemption": {"deadline": 10_000},
                "allocation": [{"node": "gpu02"}, {"node": "gpu03"}]}]},
        ]);
        let victim = fresh(&jobs, 4_000, 6_500).unwrap();
        assert_eq!((victim.job, victim.nodes.len()), (4, 2));
        assert!(fresh(&jobs, 4_000, 9_000).is_none());
    }
}
