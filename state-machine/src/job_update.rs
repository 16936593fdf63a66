//! What `scontrol update JobId=N ...` may change in a job: each field left
//! `None` stays as it is. A pending job may change any of them (and is
//! resolved again against the cluster as at submission); a running one only
//! its name, comment and time limit, and only an operator may lengthen a
//! running job's time limit or set a negative nice.

use serde::{Deserialize, Serialize};

use crate::slurm::dependency::DependencySpec;
use crate::slurm::duration::TimeLimit;
use crate::time::Timestamp;

/// Changes to a job; `None` keeps a field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobUpdate {
    /// `JobName=`.
    pub name: Option<String>,
    /// `Comment=`.
    pub comment: Option<String>,
    /// `TimeLimit=`.
    pub time_limit: Option<TimeLimit>,
    /// `Partition=` (pending only).
    pub partition: Option<String>,
    /// `Account=` (pending only).
    pub account: Option<String>,
    /// `QOS=` (pending only).
    pub qos: Option<String>,
    /// `Nice=` (pending only).
    pub nice: Option<i32>,
    /// `Dependency=`; `Some(None)` clears it (pending only).
    pub dependency: Option<Option<DependencySpec>>,
    /// `NumNodes=` (pending only).
    pub nodes: Option<u32>,
    /// `Features=` (pending only).
    pub features: Option<Vec<String>>,
    /// `ExcNodeList=` (pending only).
    pub excluded_nodes: Option<Vec<String>>,
    /// `StartTime=`: the job's new begin time (pending only); came with
    /// stored format 3.
    #[serde(default)]
    pub begin_time: Option<Timestamp>,
}

impl JobUpdate {
    /// True when nothing would change.
    pub fn is_empty(&self) -> bool {
        *self == JobUpdate::default()
    }

    /// True when only what a running job may change is set.
    pub fn running_job_may_take(&self) -> bool {
        let JobUpdate {
            name: _,
            comment: _,
            time_limit: _,
            partition,
            account,
            qos,
            nice,
            dependency,
            nodes,
            features,
            excluded_nodes,
            begin_time,
        } = self;
        partition.is_none()
            && begin_time.is_none()
            && account.is_none()
            && qos.is_none()
            && nice.is_none()
            && dependency.is_none()
            && nodes.is_none()
            && features.is_none()
            && excluded_nodes.is_none()
    }
}
