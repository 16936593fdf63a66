//! `corral admin ...`: the command line of configuration changes (accounts,
//! users, QOS, partitions, reservations, nodes), parsed by clap and turned into
//! the [`AdminChange`] the `Admin` call carries. Values in Slurm's formats (time
//! limits, memory sizes, hostlists) are read with corral-state's parsers;
//! reservation times with [`parse_when`].
//!
//! Every `set` sends the whole record: an option left out takes its default, it
//! does not keep the value the cluster holds.

use std::collections::BTreeSet;

use clap::{Args, Subcommand, ValueEnum};
use corral_proto::admin::AdminChange;
use corral_state::account::{Account, ROOT_ACCOUNT, User};
use corral_state::node::{GpuDefinition, MAX_GPUS_PER_NODE, NodeDefinition};
use corral_state::node_liveness::NodeLiveness;
use corral_state::partition::{Partition, PreemptMode};
use corral_state::qos::Qos;
use corral_state::reservation::Reservation;
use corral_state::slurm::FormatError;
use corral_state::slurm::duration::{TimeLimit, parse_time_limit};
use corral_state::slurm::hostlist;
use corral_state::slurm::memory::parse_memory_mb;
use corral_state::{Role, Timestamp};

use crate::format::datetime::{Civil, timestamp_from_civil};

/// A value on the `corral admin` command line that cannot become a change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminArgsError {
    /// A value in one of Slurm's formats is malformed.
    #[error("{option}: {source}")]
    Format {
        /// The option (or argument) that carried it, e.g. `--max-time`.
        option: &'static str,
        /// What is wrong with it.
        #[source]
        source: FormatError,
    },
    /// Values that are well formed but do not make a valid change; the message
    /// says what to do instead.
    #[error("{0}")]
    Invalid(String),
}

/// `corral admin ...`: one configuration change.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum AdminArgs {
    /// Accounts of the fair-share tree.
    #[command(subcommand)]
    Account(AccountArgs),
    /// Users, their accounts and admin level.
    #[command(subcommand)]
    User(UserArgs),
    /// Qualities of service: priority, preemption and limits.
    #[command(subcommand)]
    Qos(QosArgs),
    /// Partitions: node sets with time limits and a priority tier.
    #[command(subcommand)]
    Partition(PartitionArgs),
    /// Advance reservations of nodes for users or accounts.
    #[command(subcommand)]
    Reservation(ReservationArgs),
    /// Compute nodes and their hardware.
    #[command(subcommand)]
    Node(NodeArgs),
    /// How long nodes may be silent: the agents' heartbeat and lease, and the
    /// margin before a silent node is declared down (`scontrol show config`
    /// shows them).
    #[command(subcommand)]
    Liveness(LivenessArgs),
}

/// `corral admin liveness ...`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum LivenessArgs {
    /// Set the cluster's settings, checked against each other (a lease of at
    /// least four heartbeats, a margin of at least 2 s). Agents attach again
    /// to hear them; a node that has not registered since is declared down
    /// only after the longer of the old and new timeouts.
    Set(LivenessSet),
}

/// `corral admin liveness set`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct LivenessSet {
    /// Agents heartbeat every this many ms.
    #[arg(long)]
    pub heartbeat_ms: u64,
    /// An agent no leader acknowledged for this long kills its jobs, ms.
    #[arg(long)]
    pub lease_ms: u64,
    /// After a lapsed lease, the leader waits this long before it declares the
    /// node down and runs its jobs elsewhere, ms.
    #[arg(long)]
    pub down_margin_ms: u64,
}

/// `corral admin account ...`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum AccountArgs {
    /// Add or replace an account (options not given take their defaults).
    Set(AccountSet),
    /// Remove an account that has no child accounts, users or unfinished jobs.
    Remove {
        /// The account.
        name: String,
    },
}

/// `corral admin account set`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct AccountSet {
    /// The account's name.
    pub name: String,
    /// The parent account [default: root].
    #[arg(long)]
    pub parent: Option<String>,
    /// Fair-share shares relative to its siblings.
    #[arg(long, default_value_t = 1)]
    pub shares: u32,
    /// The QOS of jobs of this account that name none.
    #[arg(long)]
    pub default_qos: Option<String>,
    /// Free text.
    #[arg(long, default_value = "")]
    pub description: String,
}

/// `corral admin user ...`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum UserArgs {
    /// Add or replace a user (options not given take their defaults).
    Set(UserSet),
    /// Remove a user without unfinished jobs.
    Remove {
        /// The login name.
        name: String,
    },
}

/// A user's privileges, as Slurm's AdminLevel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AdminLevel {
    /// Own jobs only.
    None,
    /// Also anyone's jobs, and draining nodes.
    Operator,
    /// Also configuration.
    Admin,
}

impl AdminLevel {
    fn role(self) -> Role {
        match self {
            AdminLevel::None => Role::User,
            AdminLevel::Operator => Role::Operator,
            AdminLevel::Admin => Role::Admin,
        }
    }
}

/// `corral admin user set`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct UserSet {
    /// The login name.
    pub name: String,
    /// The account charged when a job names none (the user may charge it).
    #[arg(long)]
    pub account: String,
    /// Further accounts the user may charge, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub accounts: Vec<String>,
    /// Privilege level.
    #[arg(long, value_enum, default_value_t = AdminLevel::None)]
    pub admin_level: AdminLevel,
}

/// `corral admin qos ...`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum QosArgs {
    /// Add or replace a QOS (options not given take their defaults: no limits).
    Set(QosSet),
    /// Remove a QOS no job, account default or other QOS refers to.
    Remove {
        /// The QOS.
        name: String,
    },
}

/// What happens to a preempted job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PreemptModeArg {
    /// Never preempted.
    Off,
    /// Signalled, killed after its grace period, and requeued.
    Requeue,
    /// Signalled, killed after its grace period, and cancelled.
    Cancel,
}

impl PreemptModeArg {
    fn mode(self) -> PreemptMode {
        match self {
            PreemptModeArg::Off => PreemptMode::Off,
            PreemptModeArg::Requeue => PreemptMode::Requeue,
            PreemptModeArg::Cancel => PreemptMode::Cancel,
        }
    }
}

/// `corral admin qos set`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct QosSet {
    /// The QOS's name.
    pub name: String,
    /// Priority factor input (normalised against the largest QOS priority).
    #[arg(long, default_value_t = 0)]
    pub priority: u32,
    /// QOS whose jobs this one may preempt, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub preempts: Vec<String>,
    /// Overrides the partition's preemption mode for jobs of this QOS.
    #[arg(long, value_enum)]
    pub preempt_mode: Option<PreemptModeArg>,
    /// Most GPUs the running jobs of one account in this QOS may hold (GrpTRES=gres/gpu).
    #[arg(long)]
    pub grp_gpus: Option<u32>,
    /// Most GPU-minutes one account may use in this QOS, decayed (GrpTRESMins=gres/gpu).
    #[arg(long)]
    pub grp_gpu_minutes: Option<u64>,
    /// Longest time limit of a job in this QOS, e.g. 2-00:00:00 (MaxWall).
    #[arg(long)]
    pub max_wall: Option<String>,
    /// Most GPUs one user's running jobs in this QOS may hold (MaxTRESPerUser=gres/gpu).
    #[arg(long)]
    pub max_gpus_per_user: Option<u32>,
    /// Most running jobs per user in this QOS (MaxJobsPerUser).
    #[arg(long)]
    pub max_jobs_per_user: Option<u32>,
}

/// `corral admin partition ...`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum PartitionArgs {
    /// Add or replace a partition (options not given take their defaults).
    Set(PartitionSet),
    /// Remove a partition without unfinished jobs.
    Remove {
        /// The partition.
        name: String,
    },
}

/// `corral admin partition set`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct PartitionSet {
    /// The partition's name.
    pub name: String,
    /// Its nodes, as a hostlist (gpu-node[001-016]).
    #[arg(long)]
    pub nodes: String,
    /// The longest time limit of a job here, e.g. 2-00:00:00.
    #[arg(long, default_value = "UNLIMITED")]
    pub max_time: String,
    /// The time limit of jobs that ask for none [default: the max time].
    #[arg(long)]
    pub default_time: Option<String>,
    /// Jobs in higher tiers are considered first and may preempt lower tiers.
    #[arg(long, default_value_t = 1)]
    pub priority_tier: u32,
    /// Make this the partition of jobs that name none.
    #[arg(long)]
    pub default: bool,
    /// Accept jobs but start none (Slurm's State=DOWN).
    #[arg(long)]
    pub down: bool,
    /// Accounts allowed to submit here, comma-separated [default: all].
    #[arg(long, value_delimiter = ',')]
    pub allow_accounts: Option<Vec<String>>,
    /// What happens to jobs preempted out of this partition.
    #[arg(long, value_enum, default_value_t = PreemptModeArg::Off)]
    pub preempt_mode: PreemptModeArg,
}

/// `corral admin reservation ...`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum ReservationArgs {
    /// Create (or replace) a reservation.
    Create(ReservationCreate),
    /// Delete a reservation; queued jobs that asked for it are held.
    Delete {
        /// The reservation.
        name: String,
    },
}

/// `corral admin reservation create`. Times are `now`, `now+COUNT[UNIT]` or a
/// UTC date and time (see [`parse_when`]).
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct ReservationCreate {
    /// The reservation's name (jobs give it with --reservation).
    pub name: String,
    /// When it starts: now, now+2hours, or 2026-11-21T08:00[:00] (UTC).
    #[arg(long, default_value = "now")]
    pub start: String,
    /// How long it lasts, as a time limit (e.g. 4:00:00 or 1-00:00:00).
    #[arg(long, conflicts_with = "end", required_unless_present = "end")]
    pub duration: Option<String>,
    /// When it ends, in the forms --start takes.
    #[arg(long)]
    pub end: Option<String>,
    /// The reserved nodes, as a hostlist.
    #[arg(long)]
    pub nodes: String,
    /// Users who may use it, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub users: Vec<String>,
    /// Accounts whose users may use it, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub accounts: Vec<String>,
    /// A maintenance window: no job runs on its nodes while it lasts.
    #[arg(long)]
    pub maintenance: bool,
}

/// `corral admin node ...`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum NodeArgs {
    /// Add nodes, or change their hardware (nodes without running jobs).
    Define(NodeDefine),
    /// Remove a node that is in no partition, reservation or topology.
    Remove {
        /// The node's name.
        name: String,
    },
}

/// `corral admin node define`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct NodeDefine {
    /// The nodes, as a hostlist (gpu-node[001-016]); all get the same hardware.
    pub nodes: String,
    /// Schedulable CPUs per node.
    #[arg(long)]
    pub cpus: u32,
    /// Schedulable memory per node: 512G, 2T, or MiB without a unit.
    #[arg(long)]
    pub memory: String,
    /// GPUs per node.
    #[arg(long, default_value_t = 0)]
    pub gpus: u32,
    /// The GPUs' type, as jobs ask for it (h100, a100_3g.20gb); needed with --gpus.
    #[arg(long)]
    pub gpu_type: Option<String>,
    /// Features for --constraint, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub features: Vec<String>,
}

impl AdminArgs {
    /// The change these arguments ask for; `now` anchors reservation times
    /// written as `now+...`.
    pub fn into_change(self, now: Timestamp) -> Result<AdminChange, AdminArgsError> {
        match self {
            AdminArgs::Account(AccountArgs::Set(set)) => Ok(account_change(set)),
            AdminArgs::Account(AccountArgs::Remove { name }) => {
                Ok(AdminChange::RemoveAccount(name))
            }
            AdminArgs::User(UserArgs::Set(set)) => Ok(user_change(set)),
            AdminArgs::User(UserArgs::Remove { name }) => Ok(AdminChange::RemoveUser(name)),
            AdminArgs::Qos(QosArgs::Set(set)) => qos_change(set),
            AdminArgs::Qos(QosArgs::Remove { name }) => Ok(AdminChange::RemoveQos(name)),
            AdminArgs::Partition(PartitionArgs::Set(set)) => partition_change(set),
            AdminArgs::Partition(PartitionArgs::Remove { name }) => {
                Ok(AdminChange::RemovePartition(name))
            }
            AdminArgs::Reservation(ReservationArgs::Create(create)) => {
                reservation_change(create, now)
            }
            AdminArgs::Reservation(ReservationArgs::Delete { name }) => {
                Ok(AdminChange::DeleteReservation(name))
            }
            AdminArgs::Node(NodeArgs::Define(define)) => node_change(define),
            AdminArgs::Node(NodeArgs::Remove { name }) => node_removal(&name),
            AdminArgs::Liveness(LivenessArgs::Set(set)) => liveness_change(set),
        }
    }
}

/// Checked here as the cluster checks them, so a refusal names the flag.
fn liveness_change(set: LivenessSet) -> Result<AdminChange, AdminArgsError> {
    let liveness = NodeLiveness {
        heartbeat_ms: set.heartbeat_ms,
        lease_ms: set.lease_ms,
        down_margin_ms: set.down_margin_ms,
    };
    liveness.check().map_err(|refusal| {
        AdminArgsError::Invalid(format!(
            "--{}: {}",
            refusal.setting.replace('_', "-"),
            refusal.reason
        ))
    })?;
    Ok(AdminChange::SetLiveness(liveness))
}

fn account_change(set: AccountSet) -> AdminChange {
    let parent = match set.parent {
        Some(parent) => Some(parent),
        None if set.name == ROOT_ACCOUNT => None,
        None => Some(ROOT_ACCOUNT.to_string()),
    };
    AdminChange::SetAccount(Account {
        name: set.name,
        parent,
        shares: set.shares,
        default_qos: set.default_qos,
        description: set.description,
        limits: Default::default(),
    })
}

fn user_change(set: UserSet) -> AdminChange {
    let mut accounts: BTreeSet<String> = set.accounts.into_iter().collect();
    accounts.insert(set.account.clone());
    AdminChange::SetUser(User {
        name: set.name,
        default_account: set.account,
        accounts,
        role: set.admin_level.role(),
        limits: Default::default(),
    })
}

fn qos_change(set: QosSet) -> Result<AdminChange, AdminArgsError> {
    let max_wall_seconds = match set.max_wall.as_deref().map(|t| time_limit("--max-wall", t)) {
        None => None,
        Some(limit) => match limit? {
            TimeLimit::Seconds(secs) => Some(secs),
            TimeLimit::Unlimited => None,
        },
    };
    Ok(AdminChange::SetQos(Qos {
        name: set.name,
        priority: set.priority,
        preempts: set.preempts.into_iter().collect(),
        preempt_mode: set.preempt_mode.map(PreemptModeArg::mode),
        grp_gpus_per_account: set.grp_gpus,
        grp_gpu_minutes_per_account: set.grp_gpu_minutes,
        max_wall_seconds,
        max_gpus_per_user: set.max_gpus_per_user,
        max_jobs_per_user: set.max_jobs_per_user,
    }))
}

fn partition_change(set: PartitionSet) -> Result<AdminChange, AdminArgsError> {
    let nodes = expand_nodes("--nodes", &set.nodes)?;
    if nodes.is_empty() {
        return Err(AdminArgsError::Invalid(format!(
            "partition '{}' needs nodes: give --nodes, e.g. --nodes gpu-node[001-016]",
            set.name
        )));
    }
    let max_time = time_limit("--max-time", &set.max_time)?;
    let default_time = set
        .default_time
        .as_deref()
        .map(|t| time_limit("--default-time", t))
        .transpose()?;
    if default_time.is_some_and(|d| d > max_time) {
        return Err(AdminArgsError::Invalid(format!(
            "partition '{}': --default-time is longer than --max-time; shorten it or raise --max-time",
            set.name
        )));
    }
    Ok(AdminChange::SetPartition(Partition {
        name: set.name,
        hostlist: set.nodes,
        nodes,
        max_time,
        default_time,
        priority_tier: set.priority_tier,
        allowed_accounts: set.allow_accounts.map(|a| a.into_iter().collect()),
        preempt_mode: set.preempt_mode.mode(),
        is_default: set.default,
        up: !set.down,
    }))
}

fn reservation_change(
    create: ReservationCreate,
    now: Timestamp,
) -> Result<AdminChange, AdminArgsError> {
    let start = parse_when("--start", &create.start, now)?;
    let end = match (&create.duration, &create.end) {
        (Some(duration), None) => match time_limit("--duration", duration)? {
            TimeLimit::Seconds(secs) => start.plus_secs(secs),
            TimeLimit::Unlimited => {
                return Err(AdminArgsError::Invalid(
                    "--duration must be finite (e.g. 4:00:00 or 7-00:00:00); a reservation has an end"
                        .to_string(),
                ));
            }
        },
        (None, Some(end)) => parse_when("--end", end, now)?,
        _ => {
            return Err(AdminArgsError::Invalid(
                "give either --duration or --end, not both".to_string(),
            ));
        }
    };
    if end <= start {
        return Err(AdminArgsError::Invalid(format!(
            "reservation '{}' must end after it starts; check --start and --end",
            create.name
        )));
    }
    if end > Timestamp::LATEST_ACCEPTED {
        return Err(AdminArgsError::Invalid(
            "the reservation would end after 2500-01-01; give a shorter --duration".to_string(),
        ));
    }
    let nodes = expand_nodes("--nodes", &create.nodes)?;
    if nodes.is_empty() {
        return Err(AdminArgsError::Invalid(format!(
            "reservation '{}' needs nodes: give --nodes",
            create.name
        )));
    }
    if create.users.is_empty() && create.accounts.is_empty() && !create.maintenance {
        return Err(AdminArgsError::Invalid(format!(
            "reservation '{}' admits nobody: give --users or --accounts, or --maintenance for a maintenance window",
            create.name
        )));
    }
    Ok(AdminChange::SetReservation(Reservation {
        name: create.name,
        nodes,
        start,
        end,
        users: create.users.into_iter().collect(),
        accounts: create.accounts.into_iter().collect(),
        maintenance: create.maintenance,
    }))
}

fn node_change(define: NodeDefine) -> Result<AdminChange, AdminArgsError> {
    let names = hostlist::expand(&define.nodes).map_err(|source| AdminArgsError::Format {
        option: "NODES",
        source,
    })?;
    if names.is_empty() {
        return Err(AdminArgsError::Invalid(
            "name the nodes to define, e.g. gpu-node[001-016]".to_string(),
        ));
    }
    if define.cpus == 0 {
        return Err(AdminArgsError::Invalid(
            "--cpus must be at least 1".to_string(),
        ));
    }
    let memory_mb = parse_memory_mb(&define.memory).map_err(|source| AdminArgsError::Format {
        option: "--memory",
        source,
    })?;
    if define.gpus as usize > MAX_GPUS_PER_NODE {
        return Err(AdminArgsError::Invalid(format!(
            "--gpus {} is more than corral supports on one node ({MAX_GPUS_PER_NODE})",
            define.gpus
        )));
    }
    let gpu_type = match (define.gpus, define.gpu_type) {
        (0, _) => String::new(),
        (_, Some(gpu_type)) if !gpu_type.is_empty() => gpu_type,
        _ => {
            return Err(AdminArgsError::Invalid(
                "--gpus needs --gpu-type, the type jobs ask for (e.g. --gpu-type h100)".to_string(),
            ));
        }
    };
    let features: BTreeSet<String> = define.features.into_iter().collect();
    let nodes = names
        .into_iter()
        .map(|name| NodeDefinition {
            name,
            cpus: define.cpus,
            memory_mb,
            gpus: (0..define.gpus)
                .map(|index| GpuDefinition {
                    index,
                    gpu_type: gpu_type.clone(),
                })
                .collect(),
            features: features.clone(),
        })
        .collect();
    Ok(AdminChange::DefineNodes(nodes))
}

fn node_removal(name: &str) -> Result<AdminChange, AdminArgsError> {
    let names = hostlist::expand(name).map_err(|source| AdminArgsError::Format {
        option: "NAME",
        source,
    })?;
    match names.as_slice() {
        [one] => Ok(AdminChange::RemoveNode(one.clone())),
        _ => Err(AdminArgsError::Invalid(format!(
            "'{name}' is not one node name; remove nodes one at a time"
        ))),
    }
}

fn time_limit(option: &'static str, text: &str) -> Result<TimeLimit, AdminArgsError> {
    parse_time_limit(text).map_err(|source| AdminArgsError::Format { option, source })
}

fn expand_nodes(option: &'static str, text: &str) -> Result<BTreeSet<String>, AdminArgsError> {
    hostlist::expand(text)
        .map(|names| names.into_iter().collect())
        .map_err(|source| AdminArgsError::Format { option, source })
}

/// Seconds per unit of `now+COUNT[UNIT]`, as Slurm spells them (seconds by default).
const UNITS: [(&[&str], u64); 5] = [
    (&["", "s", "sec", "secs", "second", "seconds"], 1),
    (&["m", "min", "mins", "minute", "minutes"], 60),
    (&["h", "hour", "hours"], 3600),
    (&["d", "day", "days"], 86_400),
    (&["w", "week", "weeks"], 604_800),
];

/// Reads a reservation time given to `option`:
///
/// - `now`;
/// - `now+COUNT[UNIT]`, UNIT one of `seconds` (the default, as in Slurm),
///   `minutes`, `hours`, `days`, `weeks`, singular or abbreviated
///   (`s`/`sec`, `m`/`min`, `h`, `d`, `w`), e.g. `now+90min`, `now+1hour`;
/// - a UTC date and time, `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM` or
///   `YYYY-MM-DDTHH:MM:SS`, optionally ending in `Z` (other offsets are refused).
pub fn parse_when(
    option: &'static str,
    text: &str,
    now: Timestamp,
) -> Result<Timestamp, AdminArgsError> {
    let bad = |why: &str| {
        AdminArgsError::Invalid(format!(
            "{option}: invalid time '{text}': {why}; expected now, now+COUNT[UNIT] \
             (e.g. now+2hours) or a UTC date and time such as 2026-11-21T08:00:00"
        ))
    };
    let trimmed = text.trim();
    let at = if let Some(offset) = trimmed
        .get(..3)
        .filter(|head| head.eq_ignore_ascii_case("now"))
        .map(|_| &trimmed[3..])
    {
        if offset.is_empty() {
            now
        } else {
            let Some(offset) = offset.strip_prefix('+') else {
                return Err(bad("only now+ is accepted after now"));
            };
            let digits_end = offset
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(offset.len());
            let (count, unit) = offset.split_at(digits_end);
            let count: u64 = count
                .parse()
                .map_err(|_| bad("now+ needs a whole number"))?;
            let unit = unit.to_ascii_lowercase();
            let Some((_, secs)) = UNITS
                .iter()
                .find(|(names, _)| names.contains(&unit.as_str()))
            else {
                return Err(bad(
                    "unknown unit; use seconds, minutes, hours, days or weeks",
                ));
            };
            now.plus_secs(count.saturating_mul(*secs))
        }
    } else {
        parse_utc(trimmed).ok_or_else(|| bad("not a valid date and time"))?
    };
    if at > Timestamp::LATEST_ACCEPTED {
        return Err(bad("later than 2500-01-01"));
    }
    Ok(at)
}

/// `YYYY-MM-DD[THH:MM[:SS]][Z]` in UTC.
fn parse_utc(text: &str) -> Option<Timestamp> {
    let text = text.strip_suffix(['Z', 'z']).unwrap_or(text);
    let (date, time) = match text.split_once(['T', 't']) {
        Some((date, time)) => (date, Some(time)),
        None => (text, None),
    };
    let number = |field: &str, digits: usize| -> Option<u64> {
        (field.len() == digits && field.bytes().all(|b| b.is_ascii_digit()))
            .then(|| field.parse().ok())
            .flatten()
    };
    let small = |field: &str| number(field, 2).and_then(|v| u32::try_from(v).ok());
    let mut date_fields = date.split('-');
    let year = number(date_fields.next()?, 4)?;
    let month = small(date_fields.next()?)?;
    let day = small(date_fields.next()?)?;
    if date_fields.next().is_some() {
        return None;
    }
    let (hour, minute, second) = match time {
        None => (0, 0, 0),
        Some(time) => {
            let fields: Vec<&str> = time.split(':').collect();
            match fields.as_slice() {
                [h, m] => (small(h)?, small(m)?, 0),
                [h, m, s] => (small(h)?, small(m)?, small(s)?),
                _ => return None,
            }
        }
    };
    timestamp_from_civil(Civil {
        year,
        month,
        day,
        hour,
        minute,
        second,
    })
}

#[cfg(test)]
mod tests;
