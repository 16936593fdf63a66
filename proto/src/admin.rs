//! [`AdminChange`]: the configuration changes an administrator may ask for through
//! the `Admin` call. The controller turns one into a `Command` with the caller's
//! authenticated identity, so a client can never forge who asked, nor send a
//! command that only the leader or an agent may propose (plans, reports, ticks).

use corral_state::account::{Account, User};
use corral_state::command::Command;
use corral_state::config::ClusterConfig;
use corral_state::ids::Actor;
use corral_state::node::NodeDefinition;
use corral_state::node_liveness::NodeLiveness;
use corral_state::partition::Partition;
use corral_state::qos::Qos;
use corral_state::reservation::Reservation;
use corral_state::time::Timestamp;
use corral_state::topology::Topology;
use serde::{Deserialize, Serialize};

/// One configuration change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)]
pub enum AdminChange {
    /// Replace cluster-wide settings.
    SetConfig(ClusterConfig),
    /// Add nodes or change their hardware.
    DefineNodes(Vec<NodeDefinition>),
    /// Remove a node.
    RemoveNode(String),
    /// Add or replace a partition.
    SetPartition(Partition),
    /// Remove a partition.
    RemovePartition(String),
    /// Add or replace an account.
    SetAccount(Account),
    /// Remove an account.
    RemoveAccount(String),
    /// Add or replace a user.
    SetUser(User),
    /// Remove a user.
    RemoveUser(String),
    /// Add or replace a QOS.
    SetQos(Qos),
    /// Remove a QOS.
    RemoveQos(String),
    /// Replace the topology.
    SetTopology(Topology),
    /// Create or replace a reservation.
    SetReservation(Reservation),
    /// Delete a reservation.
    DeleteReservation(String),
    /// Set the nodes' heartbeat, lease and down margin.
    SetLiveness(NodeLiveness),
}

impl AdminChange {
    /// The command that makes this change, asked by `by` at leader time `at`.
    pub fn into_command(self, by: Actor, at: Timestamp) -> Command {
        match self {
            AdminChange::SetConfig(config) => Command::SetConfig { config, by },
            AdminChange::DefineNodes(nodes) => Command::DefineNodes { nodes, by, at },
            AdminChange::RemoveNode(node) => Command::RemoveNode { node, by },
            AdminChange::SetPartition(partition) => Command::SetPartition { partition, by },
            AdminChange::RemovePartition(name) => Command::RemovePartition { name, by },
            AdminChange::SetAccount(account) => Command::SetAccount { account, by },
            AdminChange::RemoveAccount(name) => Command::RemoveAccount { name, by },
            AdminChange::SetUser(user) => Command::SetUser { user, by },
            AdminChange::RemoveUser(name) => Command::RemoveUser { name, by },
            AdminChange::SetQos(qos) => Command::SetQos { qos, by },
            AdminChange::RemoveQos(name) => Command::RemoveQos { name, by },
            AdminChange::SetTopology(topology) => Command::SetTopology { topology, by },
            AdminChange::SetReservation(reservation) => Command::SetReservation { reservation, by },
            AdminChange::DeleteReservation(name) => Command::DeleteReservation { name, by },
            AdminChange::SetLiveness(liveness) => Command::SetLiveness { liveness, by, at },
        }
    }
}
