//! The shape stored formats 3 and 4 wrote for the whole state, frozen: a
//! snapshot of either decodes into [`ClusterStateV4`] and converts to today's
//! [`ClusterState`] with no liveness settings (its first leader of format 5
//! sets them from its file).
//!
//! Never change this type: format-3 and format-4 snapshots on disk are exactly
//! these bytes (`tests/stored_formats.rs` reads one the format-4 build wrote).
//! Its field types are today's: format 5 changed none of them, only added
//! `liveness` to the state.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::account::{Account, User};
use crate::accounting::Accounting;
use crate::config::ClusterConfig;
use crate::ids::JobId;
use crate::job::BatchScript;
use crate::job_table::JobTable;
use crate::node::Node;
use crate::partition::Partition;
use crate::qos::Qos;
use crate::reservation::Reservation;
use crate::state::ClusterState;
use crate::submit_keys::SubmitKeys;
use crate::time::Timestamp;
use crate::topology::Topology;

/// Formats 3 and 4's [`ClusterState`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ClusterStateV4 {
    config: ClusterConfig,
    clock: Timestamp,
    next_job_id: u64,
    nodes: BTreeMap<String, Node>,
    partitions: BTreeMap<String, Partition>,
    accounts: BTreeMap<String, Account>,
    users: BTreeMap<String, User>,
    qos: BTreeMap<String, Qos>,
    topology: Topology,
    reservations: BTreeMap<String, Reservation>,
    jobs: JobTable,
    scripts: BTreeMap<JobId, Arc<BatchScript>>,
    queued: BTreeSet<JobId>,
    active: BTreeSet<JobId>,
    accounting: Accounting,
    submit_keys: SubmitKeys,
}

impl From<ClusterStateV4> for ClusterState {
    fn from(v4: ClusterStateV4) -> ClusterState {
        let ClusterStateV4 {
            config,
            clock,
            next_job_id,
            nodes,
            partitions,
            accounts,
            users,
            qos,
            topology,
            reservations,
            jobs,
            scripts,
            queued,
            active,
            accounting,
            submit_keys,
        } = v4;
        ClusterState {
            config,
            clock,
            next_job_id,
            nodes,
            partitions,
            accounts,
            users,
            qos,
            topology,
            reservations,
            jobs,
            scripts,
            queued,
            active,
            accounting,
            submit_keys,
            unfinished_index: Default::default(),
            liveness: None,
        }
    }
}
