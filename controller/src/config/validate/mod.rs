//! `ConfigFile::validate`: every section checked, in the order references need
//! (QOS before accounts, accounts before users and partitions, nodes before the
//! topology, partitions and reservations), into a [`ControllerConfig`].

mod accounts;
mod datetime;
mod nodes;
mod order;
mod partitions;
mod paths;
mod qos;
mod replicas;
mod reservations;
mod settings;
mod timing;
mod topology;
mod values;

use std::collections::BTreeSet;
use std::path::Path;

use corral_state::account::ROOT_ACCOUNT;

use super::controller::ControllerConfig;
use super::definition::ClusterDefinition;
use super::error::{ConfigError, Refusal};
use super::file::ConfigFile;

impl ConfigFile {
    /// Checks every value and reference and resolves relative paths against
    /// `source`'s directory. `source` names the file in errors.
    pub fn validate(self, source: &Path) -> Result<ControllerConfig, ConfigError> {
        self.check(source)
            .map_err(|refusal| refusal.in_file(source))
    }

    fn check(self, source: &Path) -> Result<ControllerConfig, Refusal> {
        let config = settings::check(
            &self.cluster_name,
            &self.priority,
            &self.scheduling,
            &self.limits,
        )?;
        let group = replicas::check(self.id, &self.replicas, &self.listen)?;
        let dir = paths::base_dir(source);
        let data_dir = paths::data_dir(dir, self.data_dir.as_deref(), group.id)?;
        let tls = paths::tls(dir, &self.tls, group.id)?;
        let raft = timing::raft(&self.raft)?;
        let leader = timing::leader(&self.leader)?;
        let liveness = timing::liveness(&self.liveness)?;

        let qos = qos::check(&self.qos)?;
        let qos_names: BTreeSet<&str> = qos.iter().map(|q| q.name.as_str()).collect();
        let accounts = accounts::accounts(&self.accounts, &qos_names)?;
        let account_names: BTreeSet<&str> = accounts
            .iter()
            .map(|a| a.name.as_str())
            .chain([ROOT_ACCOUNT])
            .collect();
        let users = accounts::users(&self.users, &account_names)?;
        let nodes = nodes::check(&self.nodes)?;
        let node_names: BTreeSet<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        let topology = topology::check(&self.topology, &node_names)?;
        let partitions = partitions::check(&self.partitions, &node_names, &account_names)?;
        let reservations = reservations::check(&self.reservations, &node_names, &account_names)?;
        let cluster = ClusterDefinition {
            config,
            nodes,
            partitions,
            topology,
            accounts,
            users,
            qos,
            reservations,
        };
        Ok(ControllerConfig {
            source: source.to_path_buf(),
            cluster_name: self.cluster_name,
            id: group.id,
            replicas: group.replicas,
            listen: group.listen,
            data_dir,
            tls,
            raft,
            leader,
            liveness,
            cluster,
        })
    }
}
