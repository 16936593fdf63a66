//! The cluster definition of the preemption scenarios, for `corral local up
//! --config`: the local cluster's own (nodes of 8 simulated H100s, the
//! leader's fast tick, partition `gpu` whose preempted jobs are requeued and
//! `urgent` of a higher tier) plus QOS `high`, which preempts `normal` (every
//! job's default) with requeue, and short times: a 4 s grace, a 1 s
//! exemption, a 2 s kill wait.

use std::path::{Path, PathBuf};

use anyhow::Context;
use corral_jepsen::history::PreemptTimes;

/// The grace, exemption and kill wait the site sets.
pub const TIMES: PreemptTimes = PreemptTimes {
    grace_ms: 4_000,
    kill_wait_ms: 2_000,
};

/// Writes the site file for `nodes` nodes into `dir`; returns its path.
pub fn write(dir: &Path, nodes: u32) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("site.toml");
    std::fs::write(&path, text(nodes)).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

fn text(nodes: u32) -> String {
    let all = if nodes == 1 {
        "gpu01".to_string()
    } else {
        format!("gpu[01-{nodes:02}]")
    };
    let secs = |ms: u64| format!("00:00:{:02}", ms / 1000);
    format!(
        r#"cluster_name = "chaos-preempt"

[leader]
schedule_interval_ms = 500
tick_interval_ms = 1000
kill_wait = "{kill_wait}"

[scheduling]
preempt_grace = "{grace}"
preempt_exempt = "00:00:01"

[[nodes]]
names = "{all}"
cpus = 64
memory = "512G"
gpus = 8
gpu_type = "h100"

[[partitions]]
name = "gpu"
nodes = "{all}"
max_time = "7-00:00:00"
default_time = "1:00:00"
default = true
preempt_mode = "requeue"

[[partitions]]
name = "urgent"
nodes = "{all}"
max_time = "1-00:00:00"
priority_tier = 10

[[qos]]
name = "normal"

[[qos]]
name = "high"
priority = 100
preempts = ["normal"]
preempt_mode = "requeue"

[[accounts]]
name = "research"
default_qos = "normal"
"#,
        kill_wait = secs(TIMES.kill_wait_ms),
        grace = secs(TIMES.grace_ms),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_site_names_every_node_and_the_short_times() {
        let text = text(4);
        assert!(text.contains("names = \"gpu[01-04]\""), "{text}");
        assert!(text.contains("preempt_grace = \"00:00:04\""), "{text}");
        assert!(text.contains("kill_wait = \"00:00:02\""), "{text}");
    }
}
