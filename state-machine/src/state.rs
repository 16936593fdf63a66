//! [`ClusterState`]: every replicated table, read-only accessors, and `apply`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::account::{Account, AssociationLimits, ROOT_ACCOUNT, User};
use crate::accounting::Accounting;
use crate::command::{Command, Outcome};
use crate::config::ClusterConfig;
use crate::ids::JobId;
use crate::job::{BatchScript, Job};
use crate::job_table::{JobChanges, JobTable};
use crate::node::Node;
use crate::node_liveness::LivenessSettings;
use crate::partition::Partition;
use crate::qos::Qos;
use crate::rejection::Rejection;
use crate::reservation::Reservation;
use crate::submit_keys::SubmitKeys;
use crate::time::Timestamp;
use crate::topology::Topology;
use crate::unfinished_index::UnfinishedIndex;

/// The whole replicated cluster state. Feed every replica the same commands in the
/// same order and they hold the same bytes (see [`crate::digest`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    pub(crate) config: ClusterConfig,
    /// The latest leader time seen; command times are clamped up to it.
    pub(crate) clock: Timestamp,
    pub(crate) next_job_id: u64,
    pub(crate) nodes: BTreeMap<String, Node>,
    pub(crate) partitions: BTreeMap<String, Partition>,
    pub(crate) accounts: BTreeMap<String, Account>,
    pub(crate) users: BTreeMap<String, User>,
    pub(crate) qos: BTreeMap<String, Qos>,
    pub(crate) topology: Topology,
    pub(crate) reservations: BTreeMap<String, Reservation>,
    pub(crate) jobs: JobTable,
    /// Shared, never changed once stored: a copy of the state (`sbatch
    /// --test-only` plans on one) copies a pointer per script, not the script.
    pub(crate) scripts: BTreeMap<JobId, Arc<BatchScript>>,
    /// Index: jobs in PENDING or REQUEUE_HOLD.
    pub(crate) queued: BTreeSet<JobId>,
    /// Index: jobs in RUNNING or COMPLETING.
    pub(crate) active: BTreeSet<JobId>,
    pub(crate) accounting: Accounting,
    /// Idempotency keys of recent submissions.
    pub(crate) submit_keys: SubmitKeys,
    /// Unfinished jobs per association, derived (not encoded, not compared).
    #[serde(skip)]
    pub(crate) unfinished_index: UnfinishedIndex,
    /// The agents' heartbeat and lease and the down margin, once set
    /// (format 5; a state of an older format has none until its first
    /// leader of this build sets them from its file).
    pub(crate) liveness: Option<LivenessSettings>,
}

impl Default for ClusterState {
    fn default() -> Self {
        Self::new(ClusterConfig::default())
    }
}

impl ClusterState {
    /// An empty cluster with `config` and the root account.
    pub fn new(config: ClusterConfig) -> Self {
        let root = Account {
            name: ROOT_ACCOUNT.into(),
            parent: None,
            shares: 1,
            default_qos: None,
            description: "the top of the account tree".into(),
            limits: Default::default(),
        };
        ClusterState {
            config,
            clock: Timestamp::default(),
            next_job_id: 1,
            nodes: BTreeMap::new(),
            partitions: BTreeMap::new(),
            accounts: BTreeMap::from([(ROOT_ACCOUNT.to_string(), root)]),
            users: BTreeMap::new(),
            qos: BTreeMap::new(),
            topology: Topology::default(),
            reservations: BTreeMap::new(),
            jobs: JobTable::default(),
            scripts: BTreeMap::new(),
            queued: BTreeSet::new(),
            active: BTreeSet::new(),
            accounting: Accounting::default(),
            submit_keys: SubmitKeys::default(),
            unfinished_index: UnfinishedIndex::default(),
            liveness: None,
        }
    }

    /// Applies one command. On `Err` the state is exactly as before.
    pub fn apply(&mut self, command: Command) -> Result<Outcome, Rejection> {
        crate::apply::apply(self, command)
    }

    /// Cluster-wide settings.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }
    /// The nodes' liveness settings, once set (`SetLiveness`).
    pub fn liveness(&self) -> Option<&LivenessSettings> {
        self.liveness.as_ref()
    }
    /// The latest leader time applied.
    pub fn clock(&self) -> Timestamp {
        self.clock
    }
    /// The id the next submitted job gets.
    pub fn next_job_id(&self) -> JobId {
        JobId(self.next_job_id)
    }
    /// Nodes by name.
    pub fn nodes(&self) -> &BTreeMap<String, Node> {
        &self.nodes
    }
    /// Partitions by name.
    pub fn partitions(&self) -> &BTreeMap<String, Partition> {
        &self.partitions
    }
    /// Accounts by name.
    pub fn accounts(&self) -> &BTreeMap<String, Account> {
        &self.accounts
    }
    /// An association limit of `user` in `account`, as Slurm inherits it:
    /// the user's own, else the nearest account's from `account` up.
    pub fn inherited_limit<T>(
        &self,
        user: &str,
        account: &str,
        pick: impl Fn(&AssociationLimits) -> Option<T>,
    ) -> Option<T> {
        self.users
            .get(user)
            .and_then(|u| pick(&u.limits))
            .or_else(|| {
                self.account_lineage(account)
                    .into_iter()
                    .filter_map(|a| self.accounts.get(a))
                    .find_map(|a| pick(&a.limits))
            })
    }

    /// `account` and the accounts above it, nearest first, up to the root
    /// (bounded by the number of accounts, should the tree hold a loop).
    pub fn account_lineage<'a>(&'a self, account: &'a str) -> Vec<&'a str> {
        let mut chain = Vec::new();
        let mut next = Some(account);
        while let Some(current) = next {
            if chain.len() > self.accounts.len() {
                break;
            }
            chain.push(current);
            next = self
                .accounts
                .get(current)
                .and_then(|a| a.parent.as_deref())
                .filter(|parent| *parent != current);
        }
        chain
    }
    /// Users by name.
    pub fn users(&self) -> &BTreeMap<String, User> {
        &self.users
    }
    /// QOS by name.
    pub fn qos(&self) -> &BTreeMap<String, Qos> {
        &self.qos
    }
    /// The topology.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }
    /// Reservations by name.
    pub fn reservations(&self) -> &BTreeMap<String, Reservation> {
        &self.reservations
    }
    /// Every job, finished ones included.
    pub fn jobs(&self) -> &BTreeMap<JobId, Job> {
        &self.jobs
    }
    /// Where the journal of changed jobs stands (this replica's own count, not
    /// replicated): hand it to [`ClusterState::jobs_changed_since`] later.
    pub fn job_journal_position(&self) -> u64 {
        self.jobs.journal_position()
    }
    /// The jobs changed since `position`, or `Unknown` when the journal no
    /// longer reaches back that far (then compare every job).
    pub fn jobs_changed_since(&self, position: u64) -> JobChanges {
        self.jobs.changes_since(position)
    }
    /// Takes over the journal's count from `previous`, the state this one
    /// replaces on this replica (a snapshot installed or loaded): positions
    /// keep increasing and readers of `previous` compare every job once.
    pub fn continue_job_journal(&mut self, previous: &ClusterState) {
        self.jobs.restart_journal_after(&previous.jobs);
    }
    /// One job.
    pub fn job(&self, id: JobId) -> Option<&Job> {
        self.jobs.get(&id)
    }
    /// The batch script of a job.
    pub fn script_of(&self, job: &Job) -> Option<&BatchScript> {
        self.scripts.get(&job.script_id).map(|script| &**script)
    }
    /// Jobs in PENDING or REQUEUE_HOLD, by id.
    pub fn queued_jobs(&self) -> impl Iterator<Item = &Job> {
        self.queued.iter().filter_map(|id| self.jobs.get(id))
    }
    /// Jobs in RUNNING or COMPLETING, by id.
    pub fn active_jobs(&self) -> impl Iterator<Item = &Job> {
        self.active.iter().filter_map(|id| self.jobs.get(id))
    }
    /// Unfinished jobs (queued, running or completing) with ids above
    /// `after`, by id: the queued and active indexes merged, so a page of a
    /// long queue costs the page, not the queue.
    pub fn unfinished_jobs_after(&self, after: JobId) -> impl Iterator<Item = &Job> {
        let range = (std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded);
        let mut queued = self.queued.range(range).peekable();
        let mut active = self.active.range(range).peekable();
        std::iter::from_fn(move || {
            let next = match (queued.peek(), active.peek()) {
                (Some(q), Some(a)) if q <= a => queued.next(),
                (Some(_), Some(_)) | (None, Some(_)) => active.next(),
                (Some(_), None) => queued.next(),
                (None, None) => None,
            };
            next.copied()
        })
        .filter_map(|id| self.jobs.get(&id))
    }
    /// Usage tables.
    pub fn accounting(&self) -> &Accounting {
        &self.accounting
    }
    /// Idempotency keys of recent submissions.
    pub fn submit_keys(&self) -> &SubmitKeys {
        &self.submit_keys
    }
}
