//! The cluster as the file defines it, in domain values, and the admin commands
//! that create it in an empty cluster.

use corral_state::account::{Account, User};
use corral_state::config::ClusterConfig;
use corral_state::node::NodeDefinition;
use corral_state::partition::Partition;
use corral_state::qos::Qos;
use corral_state::reservation::Reservation;
use corral_state::topology::Topology;
use corral_state::{Actor, Command, Timestamp};

/// Nodes per `DefineNodes` command, so no single Raft entry grows with the cluster.
pub const NODES_PER_COMMAND: usize = 256;

/// The validated cluster definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDefinition {
    /// Cluster-wide settings.
    pub config: ClusterConfig,
    /// Every node, in the file's order.
    pub nodes: Vec<NodeDefinition>,
    /// Partitions, in the file's order; exactly one is the default.
    pub partitions: Vec<Partition>,
    /// The switch tree and blocks (empty when flat).
    pub topology: Topology,
    /// Accounts listed in the file, parents before children (`root` first when
    /// listed; it always exists in the state).
    pub accounts: Vec<Account>,
    /// Users.
    pub users: Vec<User>,
    /// QOS, each after the QOS it preempts.
    pub qos: Vec<Qos>,
    /// Advance reservations.
    pub reservations: Vec<Reservation>,
}

impl ClusterDefinition {
    /// The admin commands that create this definition in an empty cluster, in an
    /// order the state machine accepts: settings, QOS (preempted ones first),
    /// accounts (parents first), users, nodes (in batches of
    /// [`NODES_PER_COMMAND`]), topology, partitions, reservations.
    pub fn bootstrap_commands(&self, by: &Actor, at: Timestamp) -> Vec<Command> {
        let mut commands = vec![Command::SetConfig {
            config: self.config.clone(),
            by: by.clone(),
        }];
        commands.extend(self.qos.iter().map(|qos| Command::SetQos {
            qos: qos.clone(),
            by: by.clone(),
        }));
        commands.extend(self.accounts.iter().map(|account| Command::SetAccount {
            account: account.clone(),
            by: by.clone(),
        }));
        commands.extend(self.users.iter().map(|user| Command::SetUser {
            user: user.clone(),
            by: by.clone(),
        }));
        commands.extend(
            self.nodes
                .chunks(NODES_PER_COMMAND)
                .map(|nodes| Command::DefineNodes {
                    nodes: nodes.to_vec(),
                    by: by.clone(),
                    at,
                }),
        );
        commands.push(Command::SetTopology {
            topology: self.topology.clone(),
            by: by.clone(),
        });
        commands.extend(
            self.partitions
                .iter()
                .map(|partition| Command::SetPartition {
                    partition: partition.clone(),
                    by: by.clone(),
                }),
        );
        commands.extend(
            self.reservations
                .iter()
                .map(|reservation| Command::SetReservation {
                    reservation: reservation.clone(),
                    by: by.clone(),
                }),
        );
        commands
    }
}
