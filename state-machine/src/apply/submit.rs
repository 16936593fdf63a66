//! `Submit`: resolve a job spec against the cluster (account, partition, QOS, time
//! limit, resource shape), refuse what can never run, and queue one job per task.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::account::{ROOT_ACCOUNT, User};
use crate::command::Outcome;
use crate::ids::{Actor, JobId};
use crate::job::{
    ArrayTask, BatchScript, Hold, Job, JobSpec, JobState, MemoryRequest, PendingReason,
    ResourceRequest,
};
use crate::node::Node;
use crate::partition::Partition;
use crate::rejection::Rejection;
use crate::slurm::array::MAX_ARRAY_INDEX;
use crate::slurm::duration::TimeLimit;
use crate::state::ClusterState;
use crate::time::Timestamp;

pub(super) fn submit(
    state: &mut ClusterState,
    spec: JobSpec,
    batch: BatchScript,
    by: &Actor,
    key: Option<String>,
    now: Timestamp,
) -> Result<Outcome, Rejection> {
    if spec.user != by.user && !by.is_admin() {
        return Err(Rejection::PermissionDenied(format!(
            "user '{}' may not submit a job as '{}'",
            by.user, spec.user
        )));
    }
    if let Some(key) = &key {
        check_key(key)?;
        if let Some(seen) = state.submit_keys.get(&by.user, key) {
            return Ok(Outcome::Submitted {
                first: seen.first,
                count: seen.count,
            });
        }
    }
    check_script(state, &batch)?;
    let spec_bytes = check_spec(&spec, by)?;
    let Resolved {
        account,
        partition,
        qos,
        time_limit,
        resources,
    } = resolve(state, &spec)?;
    let tasks: Vec<Option<u32>> = match &spec.array {
        Some(array) if array.indices.len() > state.config.max_array_tasks => {
            return Err(Rejection::LimitReached(format!(
                "the array has {} tasks; this cluster allows at most {} (MaxArraySize)",
                array.indices.len(),
                state.config.max_array_tasks
            )));
        }
        Some(array) if array.indices.is_empty() => {
            return Err(Rejection::InvalidRequest("the array has no tasks".into()));
        }
        Some(array) => array.indices.iter().copied().map(Some).collect(),
        None => vec![None],
    };
    // Every task holds its own copy of the spec: bound what one command may add.
    let total_bytes = spec_bytes.saturating_mul(tasks.len());
    if total_bytes > MAX_SUBMISSION_BYTES {
        return Err(Rejection::LimitReached(format!(
            "{} tasks of {spec_bytes} bytes each take {total_bytes} bytes; one submission may add at most {MAX_SUBMISSION_BYTES} (split the array or shorten its options)",
            tasks.len()
        )));
    }
    super::submit_limits::check(state, &spec.user, &account, tasks.len())?;
    let unfinished = state.queued.len() + state.active.len();
    if unfinished + tasks.len() > state.config.max_active_jobs {
        return Err(Rejection::LimitReached(format!(
            "{unfinished} jobs are unfinished and this submission adds {}; the cluster holds at most {} (MaxJobCount); try again when jobs finish",
            tasks.len(),
            state.config.max_active_jobs
        )));
    }

    let first = JobId(state.next_job_id);
    let partition_name = partition;
    let count = tasks.len() as u32;
    for (offset, task) in tasks.into_iter().enumerate() {
        let id = JobId(first.0 + offset as u64);
        let job = Job {
            id,
            spec: spec.clone(),
            script_id: first,
            array: task.map(|task_id| ArrayTask {
                array_job_id: first,
                task_id,
            }),
            account: account.clone(),
            partition: partition_name.clone(),
            qos: qos.clone(),
            time_limit,
            resources: resources.clone(),
            state: JobState::Pending,
            reason: initial_reason(&spec, now),
            hold: spec.hold.then_some(Hold::User),
            submitted_at: now,
            eligible_since: now,
            attempts: Vec::new(),
            requeue_count: 0,
            last_checkpoint: None,
            ended_at: None,
            steps: Vec::new(),
        };
        state.jobs.insert(id, job);
        state.queued.insert(id);
    }
    state.scripts.insert(first, Arc::new(batch));
    state.next_job_id += u64::from(count);
    state
        .unfinished_index
        .add(&spec.user, &account, count as usize);
    if let Some(key) = key {
        state.submit_keys.record(&by.user, key, first, count, now);
    }
    Ok(Outcome::Submitted { first, count })
}

fn check_key(key: &str) -> Result<(), Rejection> {
    if key.is_empty() || key.len() > MAX_SUBMIT_KEY_BYTES {
        return Err(Rejection::InvalidRequest(format!(
            "an idempotency key must be 1 to {MAX_SUBMIT_KEY_BYTES} bytes; this one has {}",
            key.len()
        )));
    }
    Ok(())
}

/// The longest idempotency key a submission may carry.
const MAX_SUBMIT_KEY_BYTES: usize = 128;

fn initial_reason(spec: &JobSpec, now: Timestamp) -> PendingReason {
    if spec.hold {
        PendingReason::JobHeldUser
    } else if spec.begin_time.is_some_and(|begin| begin > now) {
        PendingReason::BeginTime
    } else if spec.dependency.is_some() {
        PendingReason::Dependency
    } else {
        PendingReason::None
    }
}

/// A job spec resolved against the cluster.
pub(super) struct Resolved {
    /// The account charged.
    pub account: String,
    /// The partition.
    pub partition: String,
    /// The QOS, if any.
    pub qos: Option<String>,
    /// The effective time limit.
    pub time_limit: TimeLimit,
    /// The shape per node.
    pub resources: ResourceRequest,
}

/// Resolves `spec` against the cluster (account, partition, QOS, time limit,
/// resource shape) and refuses what can never run: what a submission checks,
/// and what an update of a pending job checks again.
pub(super) fn resolve(state: &ClusterState, spec: &JobSpec) -> Result<Resolved, Rejection> {
    let account = resolve_account(state, spec)?;
    let partition = resolve_partition(state, spec, &account)?;
    let qos = resolve_qos(state, spec, &account)?;
    let time_limit = resolve_time_limit(state, spec, &account, partition, qos.as_deref())?;
    let resources = resolve_resources(spec)?;
    check_nodes_exist(state, &resources, partition)?;
    check_feasible(state, &resources, partition)?;
    check_reservation(state, spec, &account)?;
    check_dependencies(state, spec)?;
    Ok(Resolved {
        account,
        partition: partition.name.clone(),
        qos,
        time_limit,
        resources,
    })
}

/// Largest encoded job spec accepted (names, paths, lists), bytes.
pub(crate) const MAX_SPEC_BYTES: usize = 64 * 1024;
/// Most spec bytes one submission may add across all its array tasks.
pub(crate) const MAX_SUBMISSION_BYTES: usize = 16 * 1024 * 1024;

/// Checks what the spec claims on its own, before resolving it against the cluster,
/// and returns its encoded size. The CLI parses these values already; this guards
/// against any other client.
pub(super) fn check_spec(spec: &JobSpec, by: &Actor) -> Result<usize, Rejection> {
    let bad = |msg: &str| Err(Rejection::InvalidRequest(msg.to_string()));
    if spec.nice < 0 && !by.is_operator() {
        return Err(Rejection::PermissionDenied(
            "a negative --nice raises priority; only an operator may set one".into(),
        ));
    }
    if spec.time_limit == Some(TimeLimit::Seconds(0)) {
        return bad("a time limit of zero seconds is not valid; use --time=UNLIMITED for no limit");
    }
    if spec.ntasks == Some(0) || spec.ntasks_per_node == Some(0) {
        return bad("--ntasks and --ntasks-per-node must be at least 1");
    }
    if let Some(array) = &spec.array {
        let increasing = array.indices.windows(2).all(|w| w[0] < w[1]);
        let in_range = array.indices.last().is_none_or(|i| *i <= MAX_ARRAY_INDEX);
        if !increasing || !in_range {
            return bad("array indices must be ascending, distinct and at most 4000000");
        }
        if array.throttle == Some(0) {
            return bad("an array throttle (%N) must be at least 1");
        }
    }
    // These become arguments, paths and environment values of the job's
    // processes, which cannot hold a NUL byte: refused here, not at launch.
    let texts = [
        ("job name (--job-name)", Some(&spec.name)),
        ("comment (--comment)", spec.comment.as_ref()),
        ("working directory (--chdir)", Some(&spec.workdir)),
        ("output path (--output)", spec.stdout.as_ref()),
        ("error path (--error)", spec.stderr.as_ref()),
        ("input path (--input)", spec.stdin.as_ref()),
    ];
    if let Some((what, _)) = texts
        .iter()
        .find(|(_, text)| text.is_some_and(|t| t.contains('\0')))
    {
        return Err(Rejection::InvalidRequest(format!(
            "the {what} contains a NUL byte, which no process can be given; remove it"
        )));
    }
    if let Some(user) = &spec.mail_user {
        super::check_text("--mail-user", user, super::MAX_TEXT_BYTES)?;
    }
    if let Some(command) = &spec.command {
        super::check_text("the script's path", command, super::MAX_PATH_BYTES)?;
    }
    // The fields format 2 added are bounded on their own, above: the limits
    // below measure what format 1 measured, so that a format-1 log entry
    // replays exactly as the build that wrote it applied it.
    let added = postcard::to_stdvec(&(
        spec.time_min,
        spec.mail_type,
        &spec.mail_user,
        &spec.command,
        spec.cpus_per_task_given,
    ))
    .map_or(0, |b| b.len());
    let encoded = postcard::to_stdvec(spec)
        .map_or(usize::MAX, |b| b.len())
        .saturating_sub(added);
    if encoded > MAX_SPEC_BYTES {
        return Err(Rejection::LimitReached(format!(
            "the job's options take {encoded} bytes; at most {MAX_SPEC_BYTES} are accepted (shorten names, paths or lists)"
        )));
    }
    Ok(encoded)
}

fn check_script(state: &ClusterState, batch: &BatchScript) -> Result<(), Rejection> {
    if !batch.script.starts_with("#!") {
        return Err(Rejection::InvalidRequest(
            "the batch script must start with an interpreter line such as #!/bin/bash".into(),
        ));
    }
    let nul = batch.argv.iter().any(|a| a.contains('\0'))
        || batch
            .environment
            .iter()
            .any(|(k, v)| k.is_empty() || k.contains(['\0', '=']) || v.contains('\0'));
    if nul {
        return Err(Rejection::InvalidRequest(
            "the script's arguments or environment contain a NUL byte (or a variable name an '='), which no process can be given"
                .into(),
        ));
    }
    let argv: usize = batch.argv.iter().map(|a| a.len() + 1).sum();
    let environment: usize = batch
        .environment
        .iter()
        .map(|(k, v)| k.len() + v.len() + 2)
        .sum();
    let size = batch.script.len() + argv + environment;
    if size > state.config.max_batch_bytes {
        return Err(Rejection::LimitReached(format!(
            "the batch script, its arguments and environment take {size} bytes; the cluster accepts at most {} (try --export=NONE or a smaller script)",
            state.config.max_batch_bytes
        )));
    }
    Ok(())
}

fn resolve_account(state: &ClusterState, spec: &JobSpec) -> Result<String, Rejection> {
    let user: Option<&User> = state.users.get(&spec.user);
    if state.config.enforce_associations && user.is_none() {
        return Err(Rejection::UnknownUser(spec.user.clone()));
    }
    let account = spec
        .account
        .clone()
        .or_else(|| user.map(|u| u.default_account.clone()))
        .unwrap_or_else(|| ROOT_ACCOUNT.to_string());
    if !state.accounts.contains_key(&account) {
        return Err(Rejection::UnknownAccount(account));
    }
    if let Some(user) = user.filter(|_| state.config.enforce_associations)
        && !user.accounts.contains(&account)
    {
        let allowed: Vec<&str> = user.accounts.iter().map(String::as_str).collect();
        return Err(Rejection::PermissionDenied(format!(
            "user '{}' may not charge account '{account}'; their accounts are: {}",
            spec.user,
            allowed.join(", ")
        )));
    }
    Ok(account)
}

fn resolve_partition<'s>(
    state: &'s ClusterState,
    spec: &JobSpec,
    account: &str,
) -> Result<&'s Partition, Rejection> {
    let partition = match &spec.partition {
        Some(name) => state
            .partitions
            .get(name)
            .ok_or_else(|| Rejection::UnknownPartition(name.clone()))?,
        None => state
            .partitions
            .values()
            .find(|p| p.is_default)
            .ok_or_else(|| {
                Rejection::InvalidRequest(
                    "no partition was given and none is the default; pass --partition".into(),
                )
            })?,
    };
    if !partition.allows_account(account) {
        return Err(Rejection::PermissionDenied(format!(
            "account '{account}' may not submit to partition '{}'",
            partition.name
        )));
    }
    Ok(partition)
}

fn resolve_qos(
    state: &ClusterState,
    spec: &JobSpec,
    account: &str,
) -> Result<Option<String>, Rejection> {
    if let Some(name) = &spec.qos {
        return if state.qos.contains_key(name) {
            Ok(Some(name.clone()))
        } else {
            Err(Rejection::UnknownQos(name.clone()))
        };
    }
    // The nearest default up the account tree.
    let mut at = state.accounts.get(account);
    let mut hops = 0;
    while let Some(acct) = at {
        if let Some(qos) = &acct.default_qos {
            return Ok(Some(qos.clone()));
        }
        hops += 1;
        if hops > state.accounts.len() {
            break;
        }
        at = acct.parent.as_ref().and_then(|p| state.accounts.get(p));
    }
    Ok(None)
}

fn resolve_time_limit(
    state: &ClusterState,
    spec: &JobSpec,
    account: &str,
    partition: &Partition,
    qos: Option<&str>,
) -> Result<TimeLimit, Rejection> {
    let mut limit = partition.effective_time_limit(spec.time_limit);
    // Without --time, an association's MaxWall lowers the default, as Slurm's
    // does (the user's, else the nearest account's).
    if spec.time_limit.is_none()
        && let Some(max_wall) = state.inherited_limit(&spec.user, account, |l| l.max_wall_seconds)
    {
        limit = limit.min(TimeLimit::Seconds(max_wall));
    }
    if limit > partition.max_time {
        return Err(Rejection::InvalidRequest(format!(
            "time limit {} exceeds partition '{}' MaxTime {}; ask for less with --time",
            crate::slurm::duration::format_time_limit(limit),
            partition.name,
            crate::slurm::duration::format_time_limit(partition.max_time)
        )));
    }
    if let Some(max_wall) = qos
        .and_then(|q| state.qos.get(q))
        .and_then(|q| q.max_wall_seconds)
    {
        let within = matches!(limit, TimeLimit::Seconds(s) if s <= max_wall);
        if !within {
            return Err(Rejection::InvalidRequest(format!(
                "time limit {} exceeds QOS '{}' MaxWall {}; ask for less with --time",
                crate::slurm::duration::format_time_limit(limit),
                qos.unwrap_or_default(),
                crate::slurm::duration::format_time_limit(TimeLimit::Seconds(max_wall))
            )));
        }
    }
    Ok(limit)
}

/// Turns the user's mix of per-node, per-job and per-task requests into one shape
/// per node.
pub(super) fn resolve_resources(spec: &JobSpec) -> Result<ResourceRequest, Rejection> {
    let bad = |msg: String| Err(Rejection::InvalidRequest(msg));
    if spec.nodes == 0 {
        return bad("--nodes must be at least 1".into());
    }
    let nodes = spec.nodes;
    let ntasks = match (spec.ntasks, spec.ntasks_per_node) {
        (Some(n), _) => n,
        (None, Some(per_node)) => per_node.saturating_mul(nodes),
        (None, None) => nodes,
    };
    if ntasks < nodes {
        return bad(format!(
            "--ntasks={ntasks} is fewer than --nodes={nodes}; every node runs at least one task"
        ));
    }
    let tasks_per_node = spec
        .ntasks_per_node
        .unwrap_or_else(|| ntasks.div_ceil(nodes));
    let given = [&spec.gpus_per_node, &spec.gpus_total, &spec.gpus_per_task]
        .iter()
        .filter(|g| g.is_some())
        .count();
    if given > 1 {
        return bad(
            "give only one of --gpus, --gpus-per-node (or --gres) and --gpus-per-task".into(),
        );
    }
    let (gpus_per_node, gpu_type) = if let Some(g) = &spec.gpus_per_node {
        (g.count, g.gpu_type.clone())
    } else if let Some(g) = &spec.gpus_total {
        if g.count % nodes != 0 {
            return bad(format!(
                "--gpus={} does not divide evenly over {nodes} nodes; use --gpus-per-node",
                g.count
            ));
        }
        (g.count / nodes, g.gpu_type.clone())
    } else if let Some(g) = &spec.gpus_per_task {
        (g.count.saturating_mul(tasks_per_node), g.gpu_type.clone())
    } else {
        (0, None)
    };
    if spec.cpus_per_task == 0 {
        return bad("--cpus-per-task must be at least 1".into());
    }
    let cpus_for_tasks = spec.cpus_per_task.saturating_mul(tasks_per_node);
    let cpus_for_gpus = spec.cpus_per_gpu.unwrap_or(0).saturating_mul(gpus_per_node);
    let cpus_per_node = cpus_for_tasks
        .max(cpus_for_gpus)
        .max(spec.min_cpus_per_node.unwrap_or(0))
        .max(1);
    let (memory_per_node_mb, whole_node_memory) = match spec.memory {
        MemoryRequest::Unspecified => (0, false),
        MemoryRequest::PerNodeMb(mb) => (mb, false),
        MemoryRequest::WholeNode => (0, true),
        MemoryRequest::PerCpuMb(mb) => (mb.saturating_mul(u64::from(cpus_per_node)), false),
        MemoryRequest::PerGpuMb(mb) => {
            if gpus_per_node == 0 {
                return bad("--mem-per-gpu needs a GPU request".into());
            }
            (mb.saturating_mul(u64::from(gpus_per_node)), false)
        }
    };
    let required: BTreeSet<&String> = spec.required_nodes.iter().collect();
    if required.len() > nodes as usize {
        return bad(format!(
            "--nodelist names {} nodes but the job asks for {nodes}",
            required.len()
        ));
    }
    if let Some(clash) = spec
        .required_nodes
        .iter()
        .find(|n| spec.excluded_nodes.contains(n))
    {
        return bad(format!(
            "node '{clash}' is both in --nodelist and --exclude"
        ));
    }
    if let Some(switches) = &spec.switches
        && switches.count == 0
    {
        return bad("--switches must be at least 1".into());
    }
    Ok(ResourceRequest {
        nodes,
        gpus_per_node,
        gpu_type,
        cpus_per_node,
        memory_per_node_mb,
        whole_node_memory,
        ntasks,
        exclusive: spec.exclusive,
        features: spec.features.clone(),
        required_nodes: required.into_iter().cloned().collect(),
        excluded_nodes: spec.excluded_nodes.iter().cloned().collect(),
        switches: spec.switches,
    })
}

fn check_nodes_exist(
    state: &ClusterState,
    resources: &ResourceRequest,
    partition: &Partition,
) -> Result<(), Rejection> {
    for name in resources
        .required_nodes
        .iter()
        .chain(&resources.excluded_nodes)
    {
        if !state.nodes.contains_key(name) {
            return Err(Rejection::UnknownNode(name.clone()));
        }
    }
    if let Some(outside) = resources
        .required_nodes
        .iter()
        .find(|n| !partition.nodes.contains(*n))
    {
        return Err(Rejection::InvalidRequest(format!(
            "node '{outside}' from --nodelist is not in partition '{}'",
            partition.name
        )));
    }
    let too_small = resources
        .required_nodes
        .iter()
        .filter_map(|n| state.nodes.get(n))
        .find(|n| !node_can_ever_fit(n, resources));
    if let Some(node) = too_small {
        return Err(Rejection::InvalidRequest(format!(
            "node '{}' from --nodelist can never hold one node's share of the job ({} GPUs, {} CPUs, {} MiB, features {:?})",
            node.name,
            resources.gpus_per_node,
            resources.cpus_per_node,
            resources.memory_per_node_mb,
            resources.features
        )));
    }
    Ok(())
}

/// True when `node`'s configured hardware could ever hold one node's share of the job.
pub(crate) fn node_can_ever_fit(node: &Node, resources: &ResourceRequest) -> bool {
    let gpus_of_type = node
        .gpus
        .iter()
        .filter(|g| resources.gpu_type.as_ref().is_none_or(|t| &g.gpu_type == t))
        .count();
    gpus_of_type >= resources.gpus_per_node as usize
        && node.cpus >= resources.cpus_per_node
        && node.memory_mb >= resources.memory_per_node_mb
        && resources.features.iter().all(|f| node.features.contains(f))
        && !resources.excluded_nodes.contains(&node.name)
}

fn check_feasible(
    state: &ClusterState,
    resources: &ResourceRequest,
    partition: &Partition,
) -> Result<(), Rejection> {
    // Stop at the first `nodes` candidates: on a large partition most requests fit
    // within the first few nodes, and this runs on every submission.
    let needed = resources.nodes as usize;
    let candidates = partition
        .nodes
        .iter()
        .filter_map(|n| state.nodes.get(n))
        .filter(|n| node_can_ever_fit(n, resources))
        .take(needed)
        .count();
    if candidates >= needed {
        return Ok(());
    }
    let largest_gpus = partition
        .nodes
        .iter()
        .filter_map(|n| state.nodes.get(n))
        .map(|n| {
            n.gpus
                .iter()
                .filter(|g| resources.gpu_type.as_ref().is_none_or(|t| &g.gpu_type == t))
                .count()
        })
        .max()
        .unwrap_or(0);
    let gpu_kind = resources
        .gpu_type
        .as_deref()
        .map_or(String::new(), |t| format!("{t} "));
    Err(Rejection::InvalidRequest(format!(
        "requested node configuration is not available: the job needs {} node(s) with {} {gpu_kind}GPU(s), {} CPU(s) and {} MiB each{}; partition '{}' has {candidates} such node(s), and its largest node has {largest_gpus} {gpu_kind}GPU(s)",
        resources.nodes,
        resources.gpus_per_node,
        resources.cpus_per_node,
        resources.memory_per_node_mb,
        if resources.features.is_empty() {
            String::new()
        } else {
            format!(" and features {}", resources.features.join("&"))
        },
        partition.name,
    )))
}

fn check_reservation(state: &ClusterState, spec: &JobSpec, account: &str) -> Result<(), Rejection> {
    let Some(name) = &spec.reservation else {
        return Ok(());
    };
    let reservation = state
        .reservations
        .get(name)
        .ok_or_else(|| Rejection::UnknownReservation(name.clone()))?;
    if !reservation.admits(&spec.user, account) {
        return Err(Rejection::PermissionDenied(format!(
            "user '{}' (account '{account}') may not use reservation '{name}'",
            spec.user
        )));
    }
    Ok(())
}

fn check_dependencies(state: &ClusterState, spec: &JobSpec) -> Result<(), Rejection> {
    let Some(dependency) = &spec.dependency else {
        return Ok(());
    };
    for condition in &dependency.conditions {
        let job = state.jobs.get(&JobId(condition.job_id)).ok_or_else(|| {
            Rejection::InvalidRequest(format!(
                "dependency on job {} which does not exist",
                condition.job_id
            ))
        })?;
        if let Some(task) = condition.array_task {
            let has_task = state
                .jobs
                .range(job.id..)
                .take_while(|(_, j)| j.array.is_some_and(|a| a.array_job_id == job.id))
                .any(|(_, j)| j.array.is_some_and(|a| a.task_id == task));
            if !has_task {
                return Err(Rejection::InvalidRequest(format!(
                    "dependency on array task {}_{task} which does not exist",
                    condition.job_id
                )));
            }
        }
    }
    Ok(())
}
