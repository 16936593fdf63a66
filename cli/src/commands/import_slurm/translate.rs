//! The whole import, without I/O: the files' lines in, corral.toml text and
//! the notes out. The text is checked by corrald's own configuration loader
//! before it is returned, so a file corrald would refuse is never passed off
//! as a good one.

use std::path::Path;

use corral_controller::config::{ConfigFile, ReplicaSection};
use corral_state::slurm::duration::{TimeLimit, format_time_limit};

use super::emit::{Document, emit};
use super::gres::GresConf;
use super::location::ImportError;
use super::nodes;
use super::notes::{Kind, Notes};
use super::origins::Origins;
use super::parse::Pair;
use super::partitions::{self, Context};
use super::records::{Record, sort};
use super::settings;
use super::topology;

/// The files to import, as lines (includes resolved).
pub struct Inputs {
    /// slurm.conf.
    pub slurm_conf: Vec<Vec<Pair>>,
    /// gres.conf, when given.
    pub gres_conf: Option<Vec<Vec<Pair>>>,
    /// topology.conf, when given.
    pub topology_conf: Option<Vec<Vec<Pair>>>,
    /// What was read from where, for the header: (`slurm.conf`, path).
    pub sources: Vec<(&'static str, String)>,
}

/// The result.
#[derive(Debug)]
pub struct Imported {
    /// corral.toml.
    pub text: String,
    /// What was not carried, or carried with a difference.
    pub notes: Notes,
    /// corrald's refusal of `text`, if it refuses it.
    pub refusal: Option<String>,
}

/// The placeholder replica: `.invalid` names no real host (RFC 2606).
fn placeholder_replica() -> ReplicaSection {
    ReplicaSection {
        id: 1,
        peer: "controller-1.invalid:7100".to_string(),
        api: "controller-1.invalid:7200".to_string(),
    }
}

/// Imports the files.
pub fn translate(inputs: &Inputs) -> Result<Imported, ImportError> {
    let mut notes = Notes::default();
    let mut origins = Origins::default();
    let conf = sort(
        inputs.slurm_conf.clone(),
        &[
            "NodeName",
            "PartitionName",
            "NodeSet",
            "DownNodes",
            "FrontendName",
        ],
        &["NodeName", "PartitionName", "FrontendName"],
    );
    let settings = settings::read(&conf.settings, &mut notes, &mut origins)?;
    let gres_conf = match &inputs.gres_conf {
        Some(lines) => GresConf::read(lines, &mut notes)?,
        None => GresConf::default(),
    };
    let node_records: Vec<&Record> = conf.of("NodeName").collect();
    let nodes = nodes::read(&node_records, &gres_conf, &mut notes, &mut origins)?;
    for record in conf.of("DownNodes") {
        notes.not_carried(
            "",
            &record.head,
            "a node's state comes from its agent in corral; drain these nodes with `corral node drain` (or scontrol update) after the cluster starts",
        );
    }
    for record in conf.of("FrontendName") {
        notes.not_carried(
            "",
            &record.head,
            "corral has no front-end nodes: batch scripts run on the job's first node",
        );
    }
    let node_sets: Vec<&Record> = conf.of("NodeSet").collect();
    let partition_records: Vec<&Record> = conf.of("PartitionName").collect();
    let partitions = partitions::read(
        &partition_records,
        &Context {
            nodes: &nodes,
            node_sets: &node_sets,
            preemption: &settings.preemption,
        },
        &mut notes,
        &mut origins,
    )?;
    let topology = match &inputs.topology_conf {
        Some(lines) => {
            let tree_plugin = settings.topology_plugin.as_ref().filter(|p| {
                let v = p.value.trim().to_ascii_lowercase();
                v == "topology/tree" || v == "topology/block"
            });
            if tree_plugin.is_none() {
                notes.general(
                    Kind::Changed,
                    "topology.conf",
                    "slurm.conf does not set TopologyPlugin=topology/tree, so Slurm does not use topology.conf; it is carried because it was given",
                );
            }
            let sorted = sort(lines.clone(), &["SwitchName", "BlockName"], &[]);
            topology::read(&sorted, &nodes.names, &mut notes, &mut origins)?
        }
        None => {
            if let Some(pair) = &settings.topology_plugin
                && pair.value.trim().eq_ignore_ascii_case("topology/tree")
            {
                notes.not_carried(
                    "",
                    pair,
                    "the switch tree is in topology.conf: run again with --topology-conf to carry it; without it the network is taken as flat",
                );
            }
            Default::default()
        }
    };
    let mut scheduling = settings.scheduling;
    scheduling.preempt_grace = format_time_limit(TimeLimit::Seconds(partitions.grace_seconds));
    let config = ConfigFile {
        cluster_name: settings.cluster_name,
        leader: settings.leader,
        priority: settings.priority,
        scheduling,
        limits: settings.limits,
        topology,
        replicas: vec![placeholder_replica()],
        nodes: nodes.sections,
        partitions: partitions.sections,
        accounts: partitions.accounts,
        ..ConfigFile::default()
    };
    let text = emit(&Document {
        config: &config,
        origins: &origins,
        notes: &notes,
        sources: &inputs.sources,
    })?;
    let refusal = corral_controller::config::parse(&text, Path::new("corral.toml"))
        .err()
        .map(|e| e.to_string());
    Ok(Imported {
        text,
        notes,
        refusal,
    })
}
