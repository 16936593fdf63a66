//! `scontrol show config`: Slurm 22.05's `Configuration data as of TIME` and
//! `Key = Value` lines (`slurm_print_ctl_conf`: keys padded to 23 columns, in
//! Slurm's order), only for the keys corral has an equivalent of; keys with
//! no true value in corral are left out, never filled with Slurm's defaults.
//! corral's own settings follow in a titled block of their own, as Slurm
//! prints its plugins' blocks. Which keys are left out, and why, is in
//! `docs/slurm-commands.md`.

use corral_state::Timestamp;
use corral_state::config::ClusterConfig;
use corral_state::node_liveness::NodeLiveness;
use corral_state::slurm::duration::{TimeLimit, format_time_limit};

use super::datetime::format_timestamp;

/// The title of corral's own block.
pub const CORRAL_TITLE: &str = "Corral Configuration (no Slurm equivalent):";

/// What `show config` prints, as read from the cluster.
#[derive(Debug, Clone)]
pub struct ConfigRecord<'a> {
    /// The replicated settings.
    pub config: &'a ClusterConfig,
    /// Switches of the configured topology.
    pub topology_switches: u32,
    /// Blocks of the configured topology.
    pub topology_blocks: u32,
    /// KillWait of the controller that answered, seconds.
    pub kill_wait_secs: u64,
    /// MailProg of the controller that answered, when it has one.
    pub mail_program: Option<&'a str>,
    /// `SlurmctldParameters=preempt_send_user_signal` on the controller that
    /// answered.
    pub preempt_send_user_signal: bool,
    /// The controllers' client addresses, in replica id order.
    pub controllers: &'a [String],
    /// When the settings were read (the state's clock).
    pub as_of: Timestamp,
    /// The nodes' liveness settings in force, and whether they are the
    /// cluster's (replicated) or the answering controller's file's (`None`:
    /// an older controller did not say).
    pub liveness: Option<(NodeLiveness, bool)>,
}

/// The whole text, without the controllers' UP/DOWN lines that scontrol
/// prints after it.
pub fn show_config(record: &ConfigRecord<'_>) -> String {
    let config = record.config;
    let weights = &config.priority;
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut pair = |key: &str, value: String| pairs.push((key.to_string(), value));
    pair("ClusterName", config.cluster_name.clone());
    pair("GresTypes", "gpu".into());
    pair("KillWait", format!("{} sec", record.kill_wait_secs));
    if let Some(program) = record.mail_program {
        pair("MailProg", program.to_string());
    }
    pair("MaxArraySize", config.max_array_tasks.to_string());
    pair("MaxJobCount", config.max_active_jobs.to_string());
    pair("PreemptExemptTime", duration(config.preempt_exempt_seconds));
    pair(
        "PriorityDecayHalfLife",
        duration(config.fairshare_half_life_seconds),
    );
    // corral's job-size factor grows with the job, as Slurm's does unless
    // PriorityFavorSmall=Yes.
    pair("PriorityFavorSmall", "No".into());
    pair("PriorityMaxAge", duration(weights.max_age_seconds));
    pair("PriorityType", "priority/multifactor".into());
    pair("PriorityWeightAge", weights.age.to_string());
    pair("PriorityWeightFairShare", weights.fairshare.to_string());
    pair("PriorityWeightJobSize", weights.job_size.to_string());
    pair("PriorityWeightPartition", weights.partition.to_string());
    pair("PriorityWeightQOS", weights.qos.to_string());
    pair(
        "SchedulerParameters",
        format!("max_switch_wait={}", config.max_switch_wait_seconds),
    );
    pair("SchedulerType", "sched/backfill".into());
    pair("SelectType", "select/cons_tres".into());
    for (i, address) in record.controllers.iter().enumerate() {
        pair(&format!("SlurmctldHost[{i}]"), address.clone());
    }
    if record.preempt_send_user_signal {
        pair("SlurmctldParameters", "preempt_send_user_signal".into());
    }
    if let Some((liveness, _)) = record.liveness {
        // How long the controller waits for a node before it sets it DOWN.
        pair(
            "SlurmdTimeout",
            format!("{} sec", liveness.down_after_ms().div_ceil(1000)),
        );
    }
    pair("TopologyPlugin", topology_plugin(record).into());

    let mut own: Vec<(String, String)> = vec![
        (
            "BackfillReservations".into(),
            config.backfill_reservations.to_string(),
        ),
        (
            "EnforceAssociations".into(),
            yes_no(config.enforce_associations).into(),
        ),
        ("MaxBatchRequeue".into(), config.max_requeue.to_string()),
        (
            "MaxBatchSize".into(),
            format!("{} bytes", config.max_batch_bytes),
        ),
        (
            "PreemptGraceTime".into(),
            duration(config.preempt_grace_seconds),
        ),
    ];
    if let Some((liveness, replicated)) = record.liveness {
        own.push((
            "AgentHeartbeatInterval".into(),
            format!("{} ms", liveness.heartbeat_ms),
        ));
        own.push(("AgentLease".into(), format!("{} ms", liveness.lease_ms)));
        own.push((
            "NodeDownMargin".into(),
            format!("{} ms", liveness.down_margin_ms),
        ));
        own.push((
            "NodeLivenessFrom".into(),
            if replicated {
                "cluster (corral admin liveness set)"
            } else {
                "the answering controller's [liveness] (none replicated yet)"
            }
            .into(),
        ));
    }
    if record.topology_switches > 0 && record.topology_blocks > 0 {
        // TopologyPlugin names the tree; the blocks are placed within too.
        own.push(("TopologyBlocks".into(), record.topology_blocks.to_string()));
    }

    own.sort();
    let mut out = format!(
        "Configuration data as of {}\n",
        format_timestamp(record.as_of)
    );
    write_pairs(&mut out, &pairs);
    out.push('\n');
    out.push_str(CORRAL_TITLE);
    out.push('\n');
    write_pairs(&mut out, &own);
    out
}

/// `Key = Value` lines as `slurm_print_key_pairs` writes them (`%-23s = %s`).
fn write_pairs(out: &mut String, pairs: &[(String, String)]) {
    for (key, value) in pairs {
        out.push_str(&format!("{key:<23} = {value}\n"));
    }
}

/// Seconds as Slurm's `secs2time_str`: `[D-]HH:MM:SS`.
fn duration(seconds: u64) -> String {
    format_time_limit(TimeLimit::Seconds(seconds))
}

fn yes_no(value: bool) -> &'static str {
    if value { "Yes" } else { "No" }
}

/// Slurm's plugin for the configured topology: a switch tree, blocks
/// (Slurm 23.11's `topology/block`), or none (flat).
fn topology_plugin(record: &ConfigRecord<'_>) -> &'static str {
    if record.topology_switches > 0 {
        "topology/tree"
    } else if record.topology_blocks > 0 {
        "topology/block"
    } else {
        "topology/none"
    }
}

/// One controller's line after the configuration, as scontrol's
/// `_ping_slurmctld` prints it: `Slurmctld(primary) at ADDRESS is UP`.
pub fn controller_line(role: &str, address: &str, up: bool) -> String {
    format!(
        "Slurmctld({role}) at {address} is {}",
        if up { "UP" } else { "DOWN" }
    )
}

/// scontrol's name for the controller at `index` of `count` (primary first):
/// `primary`, then `backup` when there are two, `backup1`, `backup2`... when
/// there are more.
pub fn controller_role(index: usize, count: usize) -> String {
    match (index, count) {
        (0, _) => "primary".into(),
        (1, 2) => "backup".into(),
        (i, _) => format!("backup{i}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::test_jobs::t;

    fn record<'a>(config: &'a ClusterConfig, controllers: &'a [String]) -> ConfigRecord<'a> {
        ConfigRecord {
            config,
            topology_switches: 3,
            topology_blocks: 0,
            kill_wait_secs: 10,
            mail_program: None,
            preempt_send_user_signal: false,
            controllers,
            as_of: t(0),
            liveness: Some((NodeLiveness::default(), true)),
        }
    }

    #[test]
    fn the_default_settings_in_slurms_layout() {
        let config = ClusterConfig {
            cluster_name: "demo".into(),
            ..ClusterConfig::default()
        };
        let controllers = vec!["127.0.0.1:7201".to_string(), "127.0.0.1:7202".to_string()];
        assert_eq!(
            show_config(&record(&config, &controllers)),
            "\
Configuration data as of 2026-11-21T08:00:00
ClusterName             = demo
GresTypes               = gpu
KillWait                = 10 sec
MaxArraySize            = 10001
MaxJobCount             = 1000000
PreemptExemptTime       = 00:05:00
PriorityDecayHalfLife   = 7-00:00:00
PriorityFavorSmall      = No
PriorityMaxAge          = 7-00:00:00
PriorityType            = priority/multifactor
PriorityWeightAge       = 1000
PriorityWeightFairShare = 10000
PriorityWeightJobSize   = 0
PriorityWeightPartition = 10000
PriorityWeightQOS       = 10000
SchedulerParameters     = max_switch_wait=300
SchedulerType           = sched/backfill
SelectType              = select/cons_tres
SlurmctldHost[0]        = 127.0.0.1:7201
SlurmctldHost[1]        = 127.0.0.1:7202
SlurmdTimeout           = 15 sec
TopologyPlugin          = topology/tree

Corral Configuration (no Slurm equivalent):
AgentHeartbeatInterval  = 500 ms
AgentLease              = 10000 ms
BackfillReservations    = 16
EnforceAssociations     = Yes
MaxBatchRequeue         = 5
MaxBatchSize            = 4194304 bytes
NodeDownMargin          = 5000 ms
NodeLivenessFrom        = cluster (corral admin liveness set)
PreemptGraceTime        = 00:02:00
"
        );
    }

    #[test]
    fn preempt_send_user_signal_is_a_slurmctld_parameter() {
        let config = ClusterConfig::default();
        let mut shown = record(&config, &[]);
        assert!(!show_config(&shown).contains("SlurmctldParameters"));
        shown.preempt_send_user_signal = true;
        assert!(
            show_config(&shown).contains("\nSlurmctldParameters     = preempt_send_user_signal\n")
        );
    }

    #[test]
    fn topology_plugins() {
        let config = ClusterConfig::default();
        let mut shown = record(&config, &[]);
        shown.topology_switches = 0;
        assert!(show_config(&shown).contains("\nTopologyPlugin          = topology/none\n"));
        shown.topology_blocks = 2;
        assert!(show_config(&shown).contains("\nTopologyPlugin          = topology/block\n"));
        assert!(!show_config(&shown).contains("TopologyBlocks"));
        shown.topology_switches = 1;
        let text = show_config(&shown);
        assert!(text.contains("\nTopologyPlugin          = topology/tree\n"));
        assert!(text.ends_with("\nTopologyBlocks          = 2\n"), "{text}");
    }

    #[test]
    fn controller_lines_as_scontrol_names_them() {
        assert_eq!(controller_role(0, 3), "primary");
        assert_eq!(controller_role(1, 2), "backup");
        assert_eq!(controller_role(1, 3), "backup1");
        assert_eq!(controller_role(2, 3), "backup2");
        assert_eq!(
            controller_line("backup1", "127.0.0.1:7202", false),
            "Slurmctld(backup1) at 127.0.0.1:7202 is DOWN"
        );
    }
}
