//! Configuration commands (admin role): cluster settings, nodes, partitions,
//! accounts, users, QOS, topology and reservations. Each refuses a change that
//! would leave the state inconsistent (a partition naming an unknown node, an
//! account cycle, a QOS in use being removed, overlapping reservations).

use std::collections::BTreeSet;

use super::require_admin;
use crate::account::{Account, ROOT_ACCOUNT, User};
use crate::command::Outcome;
use crate::config::ClusterConfig;
use crate::ids::{Actor, JobId};
use crate::job::{Hold, JobState, PendingReason};
use crate::node::{Availability, Node, NodeDefinition};
use crate::node_liveness::{LivenessSettings, NodeLiveness};
use crate::partition::Partition;
use crate::qos::Qos;
use crate::rejection::Rejection;
use crate::reservation::Reservation;
use crate::slurm::hostlist;
use crate::state::ClusterState;
use crate::time::Timestamp;
use crate::topology::Topology;

fn refuse<T>(msg: String) -> Result<T, Rejection> {
    Err(Rejection::InvalidConfig(msg))
}

fn check_name(kind: &str, name: &str) -> Result<(), Rejection> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        refuse(format!(
            "{kind} name '{name}' must be 1-128 characters of letters, digits, '-', '_' or '.'"
        ))
    }
}

/// Jobs not yet finished, for "still in use" checks.
fn unfinished_jobs(state: &ClusterState) -> impl Iterator<Item = &crate::job::Job> {
    state
        .queued
        .iter()
        .chain(&state.active)
        .filter_map(|id| state.jobs.get(id))
}

pub(super) fn set_config(
    state: &mut ClusterState,
    config: ClusterConfig,
    by: &Actor,
) -> Result<Outcome, Rejection> {
    require_admin(by, "changing cluster settings")?;
    if config.fairshare_half_life_seconds == 0 {
        return refuse("fairshare_half_life_seconds must be positive".into());
    }
    if config.max_array_tasks == 0 || config.max_active_jobs == 0 || config.max_batch_bytes == 0 {
        return refuse(
            "max_array_tasks, max_active_jobs and max_batch_bytes must be positive".into(),
        );
    }
    if config.priority.max_age_seconds == 0 {
        return refuse("priority.max_age_seconds must be positive".into());
    }
    check_name("cluster", &config.cluster_name)?;
    state.config = config;
    Ok(Outcome::Done)
}

/// Sets the nodes' liveness settings (validated against each other); what
/// they replace still counts for nodes registered before (see
/// [`crate::node_liveness`]).
pub(super) fn set_liveness(
    state: &mut ClusterState,
    liveness: NodeLiveness,
    by: &Actor,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    require_admin(by, "changing the nodes' liveness settings")?;
    liveness
        .check()
        .map_err(|refusal| Rejection::InvalidConfig(refusal.to_string()))?;
    state.liveness = Some(match state.liveness {
        Some(settings) => {
            let all_registered_since = state
                .nodes
                .values()
                .filter(|n| matches!(n.availability, Availability::Up { .. }))
                .all(|n| {
                    n.registration
                        .as_ref()
                        .is_some_and(|r| r.at > settings.changed_at)
                });
            settings.changed(liveness, now, all_registered_since)
        }
        None => LivenessSettings::first(liveness, now),
    });
    Ok(Outcome::Done)
}

pub(super) fn define_nodes(
    state: &mut ClusterState,
    defs: Vec<NodeDefinition>,
    by: &Actor,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    require_admin(by, "defining nodes")?;
    let mut seen = BTreeSet::new();
    for def in &defs {
        check_name("node", &def.name)?;
        if !seen.insert(def.name.as_str()) {
            return refuse(format!(
                "node '{}' is defined twice in one change",
                def.name
            ));
        }
        if def.cpus == 0 {
            return refuse(format!("node '{}' must have at least one CPU", def.name));
        }
        if def.gpus.len() > crate::node::MAX_GPUS_PER_NODE {
            return refuse(format!(
                "node '{}' has {} GPUs; corral supports at most {} per node",
                def.name,
                def.gpus.len(),
                crate::node::MAX_GPUS_PER_NODE
            ));
        }
        if let Some((i, _)) = def
            .gpus
            .iter()
            .enumerate()
            .find(|(i, g)| g.index as usize != *i)
        {
            return refuse(format!(
                "node '{}': GPU indices must be 0, 1, 2, ... (position {i} is wrong)",
                def.name
            ));
        }
        if let Some(g) = def.gpus.iter().find(|g| g.gpu_type.is_empty()) {
            return refuse(format!("node '{}': GPU {} needs a type", def.name, g.index));
        }
        if state
            .nodes
            .get(&def.name)
            .is_some_and(|n| !n.allocations.is_empty())
        {
            return refuse(format!(
                "node '{}' has running jobs; drain it and wait for them to finish before changing its hardware",
                def.name
            ));
        }
    }
    for def in defs {
        match state.nodes.get_mut(&def.name) {
            Some(node) => {
                let mut fresh = Node::from_definition(def, now);
                // A redefinition changes hardware, not history: a GPU that failed
                // stays unhealthy and drained until an operator resumes it.
                for gpu in &mut fresh.gpus {
                    if let Some(old) = node.gpus.get(gpu.index as usize) {
                        gpu.health = old.health.clone();
                        gpu.drain = old.drain.clone();
                    }
                }
                node.cpus = fresh.cpus;
                node.memory_mb = fresh.memory_mb;
                node.features = fresh.features;
                node.gpus = fresh.gpus;
            }
            None => {
                state
                    .nodes
                    .insert(def.name.clone(), Node::from_definition(def, now));
            }
        }
    }
    Ok(Outcome::Done)
}

pub(super) fn remove_node(
    state: &mut ClusterState,
    name: &str,
    by: &Actor,
) -> Result<Outcome, Rejection> {
    require_admin(by, "removing a node")?;
    let node = state
        .nodes
        .get(name)
        .ok_or_else(|| Rejection::UnknownNode(name.to_string()))?;
    if !node.allocations.is_empty() {
        return refuse(format!("node '{name}' has running jobs; drain it first"));
    }
    if let Some(p) = state.partitions.values().find(|p| p.nodes.contains(name)) {
        return refuse(format!(
            "node '{name}' is in partition '{}'; remove it there first",
            p.name
        ));
    }
    if state.topology.nodes().contains(name) {
        return refuse(format!(
            "node '{name}' is in the topology; remove it there first"
        ));
    }
    if let Some(r) = state.reservations.values().find(|r| r.nodes.contains(name)) {
        return refuse(format!(
            "node '{name}' is in reservation '{}'; remove it there first",
            r.name
        ));
    }
    state.nodes.remove(name);
    Ok(Outcome::Done)
}

/// Expands a hostlist and checks every node exists.
fn known_nodes(
    state: &ClusterState,
    what: &str,
    expr: &str,
) -> Result<BTreeSet<String>, Rejection> {
    let names =
        hostlist::expand(expr).map_err(|e| Rejection::InvalidConfig(format!("{what}: {e}")))?;
    if let Some(unknown) = names.iter().find(|n| !state.nodes.contains_key(*n)) {
        return refuse(format!(
            "{what} names node '{unknown}', which is not defined"
        ));
    }
    Ok(names.into_iter().collect())
}

pub(super) fn set_partition(
    state: &mut ClusterState,
    mut partition: Partition,
    by: &Actor,
) -> Result<Outcome, Rejection> {
    require_admin(by, "changing a partition")?;
    check_name("partition", &partition.name)?;
    let what = format!("partition '{}'", partition.name);
    partition.nodes = known_nodes(state, &what, &partition.hostlist)?;
    if partition
        .default_time
        .is_some_and(|d| d > partition.max_time)
    {
        return refuse(format!("{what}: DefaultTime exceeds MaxTime"));
    }
    if let Some(unknown) = partition
        .allowed_accounts
        .iter()
        .flatten()
        .find(|a| !state.accounts.contains_key(*a))
    {
        return refuse(format!("{what} allows unknown account '{unknown}'"));
    }
    if partition.is_default {
        for other in state.partitions.values_mut() {
            other.is_default = false;
        }
    }
    state.partitions.insert(partition.name.clone(), partition);
    Ok(Outcome::Done)
}

pub(super) fn remove_partition(
    state: &mut ClusterState,
    name: &str,
    by: &Actor,
) -> Result<Outcome, Rejection> {
    require_admin(by, "removing a partition")?;
    if !state.partitions.contains_key(name) {
        return Err(Rejection::UnknownPartition(name.to_string()));
    }
    if let Some(job) = unfinished_jobs(state).find(|j| j.partition == name) {
        return refuse(format!(
            "partition '{name}' still has unfinished job {}",
            job.id
        ));
    }
    state.partitions.remove(name);
    Ok(Outcome::Done)
}

pub(super) fn set_account(
    state: &mut ClusterState,
    account: Account,
    by: &Actor,
) -> Result<Outcome, Rejection> {
    require_admin(by, "changing an account")?;
    check_name("account", &account.name)?;
    if account.shares == 0 {
        return refuse(format!("account '{}' needs at least 1 share", account.name));
    }
    match (&account.parent, account.name == ROOT_ACCOUNT) {
        (Some(_), true) => return refuse("the root account has no parent".into()),
        (None, false) => {
            return refuse(format!(
                "account '{}' needs a parent (e.g. root)",
                account.name
            ));
        }
        _ => {}
    }
    if let Some(parent) = &account.parent {
        if !state.accounts.contains_key(parent) {
            return Err(Rejection::UnknownAccount(parent.clone()));
        }
        // Walk up from the parent: meeting this account would close a cycle.
        let mut at = Some(parent.as_str());
        let mut steps = 0;
        while let Some(name) = at {
            if name == account.name || steps > state.accounts.len() {
                return refuse(format!(
                    "making '{parent}' the parent of '{}' would create a cycle",
                    account.name
                ));
            }
            steps += 1;
            at = state.accounts.get(name).and_then(|a| a.parent.as_deref());
        }
    }
    if let Some(qos) = account
        .default_qos
        .as_ref()
        .filter(|q| !state.qos.contains_key(*q))
    {
        return Err(Rejection::UnknownQos(qos.clone()));
    }
    state.accounts.insert(account.name.clone(), account);
    Ok(Outcome::Done)
}

pub(super) fn remove_account(
    state: &mut ClusterState,
    name: &str,
    by: &Actor,
) -> Result<Outcome, Rejection> {
    require_admin(by, "removing an account")?;
    if name == ROOT_ACCOUNT {
        return refuse("the root account cannot be removed".into());
    }
    if !state.accounts.contains_key(name) {
        return Err(Rejection::UnknownAccount(name.to_string()));
    }
    if let Some(child) = state
        .accounts
        .values()
        .find(|a| a.parent.as_deref() == Some(name))
    {
        return refuse(format!(
            "account '{name}' has child account '{}'",
            child.name
        ));
    }
    if let Some(user) = state.users.values().find(|u| u.accounts.contains(name)) {
        return refuse(format!("account '{name}' still has user '{}'", user.name));
    }
    if let Some(p) = state.partitions.values().find(|p| {
        p.allowed_accounts
            .as_ref()
            .is_some_and(|a| a.contains(name))
    }) {
        return refuse(format!(
            "partition '{}' still allows account '{name}'",
            p.name
        ));
    }
    if let Some(job) = unfinished_jobs(state).find(|j| j.account == name) {
        return refuse(format!(
            "account '{name}' still has unfinished job {}",
            job.id
        ));
    }
    state.accounts.remove(name);
    Ok(Outcome::Done)
}

pub(super) fn set_user(
    state: &mut ClusterState,
    user: User,
    by: &Actor,
) -> Result<Outcome, Rejection> {
    require_admin(by, "changing a user")?;
    check_name("user", &user.name)?;
    if let Some(unknown) = user
        .accounts
        .iter()
        .find(|a| !state.accounts.contains_key(*a))
    {
        return Err(Rejection::UnknownAccount(unknown.clone()));
    }
    if !user.accounts.contains(&user.default_account) {
        return refuse(format!(
            "user '{}': default account '{}' must be one of the user's accounts",
            user.name, user.default_account
        ));
    }
    state.users.insert(user.name.clone(), user);
    Ok(Outcome::Done)
}

pub(super) fn remove_user(
    state: &mut ClusterState,
    name: &str,
    by: &Actor,
) -> Result<Outcome, Rejection> {
    require_admin(by, "removing a user")?;
    if !state.users.contains_key(name) {
        return Err(Rejection::UnknownUser(name.to_string()));
    }
    if let Some(job) = unfinished_jobs(state).find(|j| j.spec.user == name) {
        return refuse(format!("user '{name}' still has unfinished job {}", job.id));
    }
    state.users.remove(name);
    Ok(Outcome::Done)
}

pub(super) fn set_qos(
    state: &mut ClusterState,
    qos: Qos,
    by: &Actor,
) -> Result<Outcome, Rejection> {
    require_admin(by, "changing a QOS")?;
    check_name("QOS", &qos.name)?;
    if qos.preempts.contains(&qos.name) {
        return refuse(format!("QOS '{}' cannot preempt itself", qos.name));
    }
    if let Some(unknown) = qos.preempts.iter().find(|q| !state.qos.contains_key(*q)) {
        return Err(Rejection::UnknownQos(unknown.clone()));
    }
    state.qos.insert(qos.name.clone(), qos);
    Ok(Outcome::Done)
}

pub(super) fn remove_qos(
    state: &mut ClusterState,
    name: &str,
    by: &Actor,
) -> Result<Outcome, Rejection> {
    require_admin(by, "removing a QOS")?;
    if !state.qos.contains_key(name) {
        return Err(Rejection::UnknownQos(name.to_string()));
    }
    if let Some(job) = unfinished_jobs(state).find(|j| j.qos.as_deref() == Some(name)) {
        return refuse(format!("QOS '{name}' is used by unfinished job {}", job.id));
    }
    if let Some(a) = state
        .accounts
        .values()
        .find(|a| a.default_qos.as_deref() == Some(name))
    {
        return refuse(format!(
            "QOS '{name}' is the default of account '{}'",
            a.name
        ));
    }
    if let Some(q) = state.qos.values().find(|q| q.preempts.contains(name)) {
        return refuse(format!("QOS '{}' preempts '{name}'", q.name));
    }
    state.qos.remove(name);
    Ok(Outcome::Done)
}

pub(super) fn set_topology(
    state: &mut ClusterState,
    topology: Topology,
    by: &Actor,
) -> Result<Outcome, Rejection> {
    require_admin(by, "changing the topology")?;
    topology
        .validate()
        .map_err(|e| Rejection::InvalidConfig(e.to_string()))?;
    if let Some(unknown) = topology
        .nodes()
        .into_iter()
        .find(|n| !state.nodes.contains_key(*n))
    {
        return refuse(format!(
            "the topology names node '{unknown}', which is not defined"
        ));
    }
    state.topology = topology;
    Ok(Outcome::Done)
}

pub(super) fn set_reservation(
    state: &mut ClusterState,
    reservation: Reservation,
    by: &Actor,
) -> Result<Outcome, Rejection> {
    require_admin(by, "changing a reservation")?;
    check_name("reservation", &reservation.name)?;
    let what = format!("reservation '{}'", reservation.name);
    if reservation.end <= reservation.start {
        return refuse(format!("{what} must end after it starts"));
    }
    if reservation.nodes.is_empty() {
        return refuse(format!("{what} reserves no nodes"));
    }
    if let Some(unknown) = reservation
        .nodes
        .iter()
        .find(|n| !state.nodes.contains_key(*n))
    {
        return refuse(format!(
            "{what} names node '{unknown}', which is not defined"
        ));
    }
    if let Some(unknown) = reservation
        .accounts
        .iter()
        .find(|a| !state.accounts.contains_key(*a))
    {
        return Err(Rejection::UnknownAccount(unknown.clone()));
    }
    let clash = state.reservations.values().find(|other| {
        other.name != reservation.name
            && other.overlaps_window(reservation.start, reservation.end)
            && !other.nodes.is_disjoint(&reservation.nodes)
    });
    if let Some(other) = clash {
        return refuse(format!(
            "{what} overlaps reservation '{}' on shared nodes in time",
            other.name
        ));
    }
    state
        .reservations
        .insert(reservation.name.clone(), reservation);
    Ok(Outcome::Done)
}

pub(super) fn delete_reservation(
    state: &mut ClusterState,
    name: &str,
    by: &Actor,
) -> Result<Outcome, Rejection> {
    require_admin(by, "deleting a reservation")?;
    if !state.reservations.contains_key(name) {
        return Err(Rejection::UnknownReservation(name.to_string()));
    }
    let held = remove_reservation(state, name);
    Ok(Outcome::Jobs(held))
}

/// Removes a reservation. Queued jobs that asked for it are held with reason
/// `ReservationDeleted`: their user releases them to run outside any reservation,
/// or cancels them. Returns the held jobs.
pub(super) fn remove_reservation(state: &mut ClusterState, name: &str) -> Vec<JobId> {
    state.reservations.remove(name);
    let waiting: Vec<JobId> = state
        .queued
        .iter()
        .filter(|id| {
            state
                .jobs
                .get(id)
                .is_some_and(|j| j.spec.reservation.as_deref() == Some(name))
        })
        .copied()
        .collect();
    for id in &waiting {
        if let Some(job) = state.jobs.get_mut(id) {
            job.spec.reservation = None;
            if job.hold.is_none() {
                job.hold = Some(Hold::User);
            }
            if job.state == JobState::Pending {
                job.reason = PendingReason::ReservationDeleted;
            }
        }
    }
    waiting
}
