//! Builds a scenario's cluster state by applying `Command`s, line by line, the way
//! an administrator, users, agents and the leader would: every line becomes one or
//! more commands, and a refused command fails the scenario with its line number.

use std::collections::{BTreeMap, BTreeSet};

use corral_state::account::{Account, AssociationLimits, User};
use corral_state::command::{CancelTarget, Command, Outcome, PlannedAllocation};
use corral_state::config::ClusterConfig;
use corral_state::job::{ExitStatus, NodeAllocation};
use corral_state::job_request::{ScriptSource, SubmitContext, build_request};
use corral_state::node::{GpuDefinition, NodeDefinition};
use corral_state::partition::{Partition, PreemptMode};
use corral_state::qos::Qos;
use corral_state::reservation::Reservation;
use corral_state::slurm::duration::{TimeLimit, parse_time_limit};
use corral_state::slurm::hostlist;
use corral_state::slurm::memory::parse_memory_mb;
use corral_state::slurm::sbatch::parse_args;
use corral_state::topology::{Block, Switch, Topology};
use corral_state::{Actor, ClusterState, JobId, Role, Timestamp};

use super::{Line, Scenario, parse_secs};

/// The administrator every configuration command runs as.
pub fn admin() -> Actor {
    Actor {
        user: "root".into(),
        role: Role::Admin,
    }
}

/// The words of a line after its keyword: `key=value` pairs (keys lower-cased) and
/// bare words, each consumed once; [`Args::finish`] refuses whatever is left over.
struct Args {
    keys: BTreeMap<String, String>,
    bare: Vec<String>,
}

impl Args {
    fn new(words: &[String]) -> Result<Args, String> {
        let mut keys = BTreeMap::new();
        let mut bare = Vec::new();
        for word in words {
            match word.split_once('=') {
                Some((k, v)) => {
                    if keys.insert(k.to_ascii_lowercase(), v.to_string()).is_some() {
                        return Err(format!("`{k}=` given twice"));
                    }
                }
                None => bare.push(word.clone()),
            }
        }
        Ok(Args { keys, bare })
    }

    /// The value of the first of `names` present (aliases of one setting).
    fn take(&mut self, names: &[&str]) -> Option<String> {
        names.iter().find_map(|n| self.keys.remove(*n))
    }

    fn take_parsed<T: std::str::FromStr>(&mut self, names: &[&str]) -> Result<Option<T>, String> {
        match self.take(names) {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| format!("`{}={v}`: not a number", names[0])),
        }
    }

    /// True (and consumed) when the bare word `flag` is present.
    fn flag(&mut self, flag: &str) -> bool {
        match self.bare.iter().position(|w| w.eq_ignore_ascii_case(flag)) {
            Some(i) => {
                self.bare.remove(i);
                true
            }
            None => false,
        }
    }

    /// The next bare word, required.
    fn positional(&mut self, what: &str) -> Result<String, String> {
        if self.bare.is_empty() {
            return Err(format!("missing {what}"));
        }
        Ok(self.bare.remove(0))
    }

    fn finish(&self) -> Result<(), String> {
        if let Some(k) = self.keys.keys().next() {
            return Err(format!("unknown setting `{k}=`"));
        }
        if let Some(w) = self.bare.first() {
            return Err(format!("unexpected word `{w}`"));
        }
        Ok(())
    }
}

fn list(value: &str) -> BTreeSet<String> {
    value
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn expand(expr: &str) -> Result<Vec<String>, String> {
    hostlist::expand(expr).map_err(|e| e.to_string())
}

fn time_limit(value: &str) -> Result<TimeLimit, String> {
    parse_time_limit(value).map_err(|e| e.to_string())
}

fn preempt_mode(value: &str) -> Result<PreemptMode, String> {
    match value.to_ascii_lowercase().as_str() {
        "off" => Ok(PreemptMode::Off),
        "requeue" => Ok(PreemptMode::Requeue),
        "cancel" => Ok(PreemptMode::Cancel),
        _ => Err(format!(
            "preempt mode `{value}`: expected off, requeue or cancel"
        )),
    }
}

/// Association limits given on an `account` or `user` line: `maxjobs=`,
/// `maxsubmitjobs=`, `grpjobs=`, `grpsubmitjobs=`, `grptres=gres/gpu=N`,
/// `maxwall=TIME`.
fn association_limits(args: &mut Args) -> Result<AssociationLimits, String> {
    Ok(AssociationLimits {
        max_jobs: args.take_parsed(&["maxjobs"])?,
        max_submit_jobs: args.take_parsed(&["maxsubmitjobs", "maxsubmit"])?,
        grp_jobs: args.take_parsed(&["grpjobs"])?,
        grp_submit_jobs: args.take_parsed(&["grpsubmitjobs", "grpsubmit"])?,
        grp_gpus: args
            .take(&["grptres"])
            .map(|v| gpu_tres(&v).map(|n| u32::try_from(n).unwrap_or(u32::MAX)))
            .transpose()?,
        max_wall_seconds: match args.take(&["maxwall"]) {
            None => None,
            Some(v) => match time_limit(&v)? {
                TimeLimit::Seconds(s) => Some(s),
                TimeLimit::Unlimited => None,
            },
        },
    })
}

/// `16` or Slurm's TRES spelling `gres/gpu=16`.
fn gpu_tres(value: &str) -> Result<u64, String> {
    let number = value.strip_prefix("gres/gpu=").unwrap_or(value);
    number
        .parse()
        .map_err(|_| format!("`{value}`: expected N or gres/gpu=N"))
}

/// `8` GPUs of the default type, or `a100:4,a100_3g.20gb:2` (type:count, in index order).
fn gpu_definitions(value: &str, default_type: &str) -> Result<Vec<GpuDefinition>, String> {
    let mut gpus = Vec::new();
    for item in value.split(',') {
        let (gpu_type, count) = match item.rsplit_once(':') {
            Some((t, n)) => (t, n),
            None => (default_type, item),
        };
        let count: u32 = count
            .parse()
            .map_err(|_| format!("`gpus={value}`: bad count in `{item}`"))?;
        for _ in 0..count {
            gpus.push(GpuDefinition {
                index: gpus.len() as u32,
                gpu_type: gpu_type.to_string(),
            });
        }
    }
    Ok(gpus)
}

/// Applies a scenario's lines to a fresh state and returns it.
pub fn build(scenario: &Scenario) -> Result<ClusterState, String> {
    let mut builder = Builder::default();
    for line in &scenario.lines {
        builder
            .line(line)
            .map_err(|e| format!("line {}: {e}", line.number))?;
    }
    builder
        .flush_topology()
        .map_err(|e| format!("topology: {e}"))?;
    if scenario.now < builder.clock {
        return Err(format!(
            "`now` ({} s) is before the last event ({} s)",
            scenario.now.as_secs(),
            builder.clock.as_secs()
        ));
    }
    Ok(builder.state)
}

#[derive(Default)]
struct Builder {
    state: ClusterState,
    clock: Timestamp,
    config: ClusterConfig,
    roles: BTreeMap<String, Role>,
    /// Switch and block lines collected until the next other line.
    topology: Option<Topology>,
    topology_set: bool,
}

impl Builder {
    fn apply(&mut self, command: Command) -> Result<Outcome, String> {
        let shown = format!("{command:?}");
        self.state
            .apply(command)
            .map_err(|e| format!("refused: {e}\n    command: {shown}"))
    }

    /// Moves the clock to `at=` if given (never backwards).
    fn advance(&mut self, args: &mut Args) -> Result<Timestamp, String> {
        if let Some(at) = args.take(&["at"]) {
            let at = parse_secs(&at)?;
            if at < self.clock {
                return Err(format!(
                    "at={} is before the previous event ({} s); keep lines in time order",
                    at.as_secs(),
                    self.clock.as_secs()
                ));
            }
            self.clock = at;
        }
        Ok(self.clock)
    }

    fn flush_topology(&mut self) -> Result<(), String> {
        if let Some(topology) = self.topology.take() {
            self.apply(Command::SetTopology {
                topology,
                by: admin(),
            })?;
            self.topology_set = true;
        }
        Ok(())
    }

    fn topology_mut(&mut self) -> Result<&mut Topology, String> {
        if self.topology_set {
            return Err("switch, block and blocksizes lines must be together".into());
        }
        Ok(self.topology.get_or_insert_with(Topology::default))
    }

    fn line(&mut self, line: &Line) -> Result<(), String> {
        let keyword = line.words[0].as_str();
        if !matches!(keyword, "switch" | "block" | "blocksizes") {
            self.flush_topology()?;
        }
        let rest = &line.words[1..];
        match keyword {
            "submit" | "run" => return self.submit_line(keyword == "run", rest),
            _ => {}
        }
        let mut args = Args::new(rest)?;
        match keyword {
            "config" => self.config_line(&mut args)?,
            "priority" => self.priority_line(&mut args)?,
            "nodes" => self.nodes_line(&mut args)?,
            "switch" => {
                let name = args.positional("switch name")?;
                let nodes = args
                    .take(&["nodes"])
                    .map(|h| expand(&h))
                    .transpose()?
                    .unwrap_or_default();
                let children = args
                    .take(&["switches"])
                    .map(|h| expand(&h))
                    .transpose()?
                    .unwrap_or_default();
                self.topology_mut()?
                    .switches
                    .insert(name, Switch { nodes, children });
            }
            "block" => {
                let name = args.positional("block name")?;
                let nodes = expand(&args.take(&["nodes"]).ok_or("block needs nodes=")?)?;
                self.topology_mut()?.blocks.push(Block { name, nodes });
            }
            "blocksizes" => {
                let sizes = args.positional("sizes")?;
                let sizes = sizes
                    .split(',')
                    .map(|s| s.parse().map_err(|_| format!("bad block size `{s}`")))
                    .collect::<Result<_, _>>()?;
                self.topology_mut()?.block_sizes = sizes;
            }
            "partition" => self.partition_line(&mut args)?,
            "account" => {
                let name = args.positional("account name")?;
                let account = Account {
                    name,
                    parent: Some(args.take(&["parent"]).unwrap_or_else(|| "root".into())),
                    shares: args.take_parsed(&["shares", "fairshare"])?.unwrap_or(1),
                    default_qos: args.take(&["qos", "defaultqos"]),
                    description: String::new(),
                    limits: association_limits(&mut args)?,
                };
                self.apply(Command::SetAccount {
                    account,
                    by: admin(),
                })?;
            }
            "user" => {
                let name = args.positional("user name")?;
                let accounts_text = args
                    .take(&["account", "accounts"])
                    .ok_or("user needs account=")?;
                let default_account = accounts_text
                    .split(',')
                    .next()
                    .unwrap_or_default()
                    .to_string();
                let role = match args.take(&["role", "adminlevel"]).as_deref() {
                    None | Some("user") => Role::User,
                    Some("operator") => Role::Operator,
                    Some("admin") => Role::Admin,
                    Some(other) => {
                        return Err(format!("role `{other}`: expected user, operator or admin"));
                    }
                };
                self.roles.insert(name.clone(), role);
                let user = User {
                    name,
                    default_account,
                    accounts: list(&accounts_text),
                    role,
                    limits: association_limits(&mut args)?,
                };
                self.apply(Command::SetUser { user, by: admin() })?;
            }
            "qos" => self.qos_line(&mut args)?,
            "reservation" => {
                let name = args.positional("reservation name")?;
                let reservation = Reservation {
                    name,
                    nodes: expand(&args.take(&["nodes"]).ok_or("reservation needs nodes=")?)?
                        .into_iter()
                        .collect(),
                    start: parse_secs(
                        &args
                            .take(&["start", "starttime"])
                            .ok_or("reservation needs start=")?,
                    )?,
                    end: parse_secs(
                        &args
                            .take(&["end", "endtime"])
                            .ok_or("reservation needs end=")?,
                    )?,
                    users: args.take(&["users"]).map(|v| list(&v)).unwrap_or_default(),
                    accounts: args
                        .take(&["accounts"])
                        .map(|v| list(&v))
                        .unwrap_or_default(),
                    maintenance: args.flag("maint")
                        || args
                            .take(&["flags"])
                            .is_some_and(|f| f.eq_ignore_ascii_case("maint")),
                };
                self.apply(Command::SetReservation {
                    reservation,
                    by: admin(),
                })?;
            }
            "start" => {
                let job = self.job_arg(&mut args)?;
                let nodes = expand(&args.take(&["on"]).ok_or("start needs on=HOSTLIST")?)?;
                self.advance(&mut args)?;
                args.finish()?;
                return self.start(job, nodes);
            }
            "finish" => {
                let job = self.job_arg(&mut args)?;
                let code = args.take_parsed(&["exit"])?.unwrap_or(0);
                let at = self.advance(&mut args)?;
                args.finish()?;
                let (attempt, nodes) = self.live_nodes(job)?;
                let status = ExitStatus { code, signal: None };
                self.apply(Command::BatchExited {
                    job,
                    attempt,
                    node: nodes[0].clone(),
                    status,
                    at,
                })?;
                self.release_all(job, at)?;
            }
            "cleanup" => {
                let job = self.job_arg(&mut args)?;
                let at = self.advance(&mut args)?;
                self.release_all(job, at)?;
            }
            "cancel" => {
                let job = self.job_arg(&mut args)?;
                let at = self.advance(&mut args)?;
                self.apply(Command::Cancel {
                    target: CancelTarget::Job(job),
                    by: admin(),
                    at,
                })?;
                self.release_all(job, at)?;
            }
            "requeue" => {
                let job = self.job_arg(&mut args)?;
                let at = self.advance(&mut args)?;
                self.apply(Command::Requeue {
                    job,
                    by: admin(),
                    at,
                })?;
                self.release_all(job, at)?;
            }
            "checkpoint" => {
                let job = self.job_arg(&mut args)?;
                let at = self.advance(&mut args)?;
                let (attempt, nodes) = self.live_nodes(job)?;
                let step = self
                    .state
                    .job(job)
                    .and_then(|j| j.last_checkpoint.as_ref())
                    .map_or(1, |c| c.step + 1);
                let path = format!("/ckpt/{job}/{step}");
                self.apply(Command::ReportCheckpoint {
                    job,
                    attempt,
                    node: nodes[0].clone(),
                    step,
                    path,
                    at,
                })?;
            }
            "hold" => {
                let job = self.job_arg(&mut args)?;
                let by = if args.flag("admin") {
                    admin()
                } else {
                    self.owner(job)?
                };
                self.apply(Command::Hold { job, by })?;
            }
            "release" => {
                let job = self.job_arg(&mut args)?;
                let by = if args.flag("admin") {
                    admin()
                } else {
                    self.owner(job)?
                };
                let at = self.advance(&mut args)?;
                self.apply(Command::Release { job, by, at })?;
            }
            "tick" => {
                let at = self.advance(&mut args)?;
                self.apply(Command::Tick { at })?;
            }
            "schedule" => {
                let at = self.advance(&mut args)?;
                args.finish()?;
                return self.schedule(at);
            }
            "down" | "drain" | "resume" => {
                let nodes = expand(&args.positional("nodes")?)?;
                let at = self.advance(&mut args)?;
                let reason = args.take(&["reason"]).unwrap_or_else(|| "scenario".into());
                for node in nodes {
                    let by = admin();
                    let command = match keyword {
                        "down" => Command::NodeDown {
                            node,
                            reason: reason.clone(),
                            by,
                            at,
                        },
                        "drain" => Command::DrainNode {
                            node,
                            reason: reason.clone(),
                            by,
                            at,
                        },
                        _ => Command::ResumeNode { node, by },
                    };
                    self.apply(command)?;
                }
            }
            "gpu_drain" | "gpu_fail" => {
                let node = args.positional("node")?;
                let gpus = args.take(&["gpus", "gpu"]).ok_or("needs gpus=LIST")?;
                let xid = args.take_parsed(&["xid"])?;
                let at = self.advance(&mut args)?;
                for gpu in gpus.split(',') {
                    let gpu = gpu.parse().map_err(|_| format!("bad GPU index `{gpu}`"))?;
                    let command = if keyword == "gpu_drain" {
                        Command::DrainGpu {
                            node: node.clone(),
                            gpu,
                            reason: "scenario".into(),
                            by: admin(),
                            at,
                        }
                    } else {
                        Command::GpuFailed {
                            node: node.clone(),
                            gpu,
                            xid,
                            reason: "scenario".into(),
                            at,
                        }
                    };
                    self.apply(command)?;
                }
            }
            other => return Err(format!("unknown line keyword `{other}`")),
        }
        args.finish()
    }

    fn config_line(&mut self, args: &mut Args) -> Result<(), String> {
        let c = &mut self.config;
        if let Some(v) = args.take_parsed(&["backfill_reservations"])? {
            c.backfill_reservations = v;
        }
        if let Some(v) = args.take_parsed(&["preempt_exempt_seconds", "preemptexempttime"])? {
            c.preempt_exempt_seconds = v;
        }
        if let Some(v) = args.take_parsed(&["preempt_grace_seconds", "gracetime"])? {
            c.preempt_grace_seconds = v;
        }
        if let Some(v) = args.take_parsed(&["max_requeue", "maxbatchrequeue"])? {
            c.max_requeue = v;
        }
        if let Some(v) =
            args.take_parsed(&["fairshare_half_life_seconds", "prioritydecayhalflife"])?
        {
            c.fairshare_half_life_seconds = v;
        }
        self.apply(Command::SetConfig {
            config: self.config.clone(),
            by: admin(),
        })?;
        Ok(())
    }

    fn priority_line(&mut self, args: &mut Args) -> Result<(), String> {
        let w = &mut self.config.priority;
        if let Some(v) = args.take_parsed(&["age", "priorityweightage"])? {
            w.age = v;
        }
        if let Some(v) = args.take_parsed(&["fairshare", "priorityweightfairshare"])? {
            w.fairshare = v;
        }
        if let Some(v) = args.take_parsed(&["job_size", "jobsize", "priorityweightjobsize"])? {
            w.job_size = v;
        }
        if let Some(v) = args.take_parsed(&["partition", "priorityweightpartition"])? {
            w.partition = v;
        }
        if let Some(v) = args.take_parsed(&["qos", "priorityweightqos"])? {
            w.qos = v;
        }
        if let Some(v) = args.take_parsed(&["max_age", "prioritymaxage"])? {
            w.max_age_seconds = v;
        }
        self.apply(Command::SetConfig {
            config: self.config.clone(),
            by: admin(),
        })?;
        Ok(())
    }

    fn nodes_line(&mut self, args: &mut Args) -> Result<(), String> {
        let names = expand(&args.positional("hostlist")?)?;
        let gpu_type = args.take(&["type"]).unwrap_or_else(|| "h100".into());
        let gpus = gpu_definitions(
            &args.take(&["gpus"]).unwrap_or_else(|| "0".into()),
            &gpu_type,
        )?;
        let cpus = args.take_parsed(&["cpus"])?.unwrap_or(64);
        let memory_mb = match args.take(&["mem", "realmemory"]) {
            Some(m) => parse_memory_mb(&m).map_err(|e| e.to_string())?,
            None => 512 * 1024,
        };
        let features = args
            .take(&["features"])
            .map(|f| list(&f))
            .unwrap_or_default();
        let at = self.clock;
        let nodes = names
            .iter()
            .map(|name| NodeDefinition {
                name: name.clone(),
                cpus,
                memory_mb,
                gpus: gpus.clone(),
                features: features.clone(),
            })
            .collect();
        self.apply(Command::DefineNodes {
            nodes,
            by: admin(),
            at,
        })?;
        for name in names {
            self.apply(Command::RegisterNode {
                node: name.clone(),
                cpus,
                memory_mb,
                gpus: gpus.iter().map(|g| (g.index, g.gpu_type.clone())).collect(),
                running: Vec::new(),
                agent_version: "scenario".into(),
                boot_id: format!("boot-{name}"),
                step_address: None,
                at,
            })?;
        }
        Ok(())
    }

    fn partition_line(&mut self, args: &mut Args) -> Result<(), String> {
        let name = args.positional("partition name")?;
        let hostlist = args.take(&["nodes"]).ok_or("partition needs nodes=")?;
        let is_default = args.flag("default")
            || args
                .take(&["default"])
                .is_some_and(|v| v.eq_ignore_ascii_case("yes"));
        let down = args.flag("down")
            || args
                .take(&["state"])
                .is_some_and(|v| v.eq_ignore_ascii_case("down"));
        let partition = Partition {
            name,
            hostlist,
            nodes: BTreeSet::new(),
            max_time: args
                .take(&["maxtime"])
                .map(|v| time_limit(&v))
                .transpose()?
                .unwrap_or(TimeLimit::Unlimited),
            default_time: args
                .take(&["defaulttime"])
                .map(|v| time_limit(&v))
                .transpose()?,
            priority_tier: args.take_parsed(&["tier", "prioritytier"])?.unwrap_or(1),
            allowed_accounts: args.take(&["accounts", "allowaccounts"]).map(|v| list(&v)),
            preempt_mode: args
                .take(&["preempt", "preemptmode"])
                .map(|v| preempt_mode(&v))
                .transpose()?
                .unwrap_or_default(),
            is_default,
            up: !down,
        };
        self.apply(Command::SetPartition {
            partition,
            by: admin(),
        })?;
        Ok(())
    }

    fn qos_line(&mut self, args: &mut Args) -> Result<(), String> {
        let name = args.positional("QOS name")?;
        let gpus = |v: Option<String>| v.map(|v| gpu_tres(&v)).transpose();
        let qos = Qos {
            name,
            priority: args.take_parsed(&["priority"])?.unwrap_or(0),
            preempts: args
                .take(&["preempts", "preempt"])
                .map(|v| list(&v))
                .unwrap_or_default(),
            preempt_mode: args
                .take(&["preemptmode", "mode"])
                .map(|v| preempt_mode(&v))
                .transpose()?,
            grp_gpus_per_account: gpus(args.take(&["grptres", "grp_gpus"]))?.map(|n| n as u32),
            grp_gpu_minutes_per_account: gpus(args.take(&["grptresmins", "grp_gpu_minutes"]))?,
            max_wall_seconds: match args
                .take(&["maxwall"])
                .map(|v| time_limit(&v))
                .transpose()?
            {
                Some(TimeLimit::Seconds(s)) => Some(s),
                _ => None,
            },
            max_gpus_per_user: gpus(args.take(&["maxtresperuser", "max_gpus_per_user"]))?
                .map(|n| n as u32),
            max_jobs_per_user: args.take_parsed(&["maxjobsperuser", "max_jobs_per_user"])?,
        };
        self.apply(Command::SetQos { qos, by: admin() })?;
        Ok(())
    }

    fn job_arg(&self, args: &mut Args) -> Result<JobId, String> {
        let word = args.positional("job id")?;
        let id = word
            .parse()
            .map(JobId)
            .map_err(|_| format!("`{word}` is not a job id"))?;
        self.state
            .job(id)
            .ok_or_else(|| format!("there is no job {id}"))?;
        Ok(id)
    }

    fn owner(&self, job: JobId) -> Result<Actor, String> {
        let user = self.state.job(job).ok_or("no such job")?.spec.user.clone();
        let role = self.roles.get(&user).copied().unwrap_or_default();
        Ok(Actor { user, role })
    }

    /// The live attempt's number and nodes (batch host first).
    fn live_nodes(&self, job: JobId) -> Result<(u32, Vec<String>), String> {
        let attempt = self
            .state
            .job(job)
            .and_then(|j| j.live_attempt())
            .ok_or_else(|| format!("job {job} is not running"))?;
        Ok((
            attempt.number,
            attempt.allocation.iter().map(|a| a.node.clone()).collect(),
        ))
    }

    /// Every node still running an ending attempt confirms its processes are gone.
    fn release_all(&mut self, job: JobId, at: Timestamp) -> Result<(), String> {
        let pending: Vec<(u32, String)> = match self.state.job(job).and_then(|j| j.live_attempt()) {
            Some(a) => a
                .ending
                .iter()
                .flat_map(|e| e.unreleased.iter().map(|n| (a.number, n.clone())))
                .collect(),
            None => Vec::new(),
        };
        for (attempt, node) in pending {
            self.apply(Command::NodeReleased {
                job,
                attempt,
                node,
                at,
            })?;
        }
        Ok(())
    }

    /// `submit USER SBATCH-OPTIONS... [at=T]` or `run ... on=HOSTLIST [at=T]`.
    fn submit_line(&mut self, run: bool, words: &[String]) -> Result<(), String> {
        let (user, rest) = words.split_first().ok_or("missing user")?;
        let mut options = Vec::new();
        let mut on = None;
        for word in rest {
            if let Some(at) = word.strip_prefix("at=") {
                let at = parse_secs(at)?;
                if at < self.clock {
                    return Err(format!(
                        "at={} is before the previous event; keep lines in time order",
                        at.as_secs()
                    ));
                }
                self.clock = at;
            } else if let Some(nodes) = word.strip_prefix("on=") {
                on = Some(expand(nodes)?);
            } else {
                options.push(word.as_str());
            }
        }
        let (sbatch, extra) = parse_args(&options).map_err(|e| e.to_string())?;
        if !extra.is_empty() {
            return Err(format!("unexpected arguments after the options: {extra:?}"));
        }
        let context = SubmitContext {
            user: user.clone(),
            uid: 1000,
            gid: 1000,
            submit_host: "login1".into(),
            cwd: format!("/home/{user}"),
            environment: BTreeMap::new(),
            command: None,
            now: self.clock,
        };
        let (spec, batch) = build_request(sbatch, ScriptSource::Wrap("true".into()), &context)
            .map_err(|e| e.to_string())?;
        let by = Actor {
            user: user.clone(),
            role: self.roles.get(user).copied().unwrap_or_default(),
        };
        let at = self.clock;
        let Outcome::Submitted { first, count } = self.apply(Command::Submit {
            spec,
            batch,
            by,
            at,
            key: None,
        })?
        else {
            return Err("Submit did not report the submitted jobs".into());
        };
        match (run, on) {
            (false, None) => Ok(()),
            (false, Some(_)) => Err("`on=` belongs to `run` lines".into()),
            (true, None) => Err("`run` needs on=HOSTLIST".into()),
            (true, Some(_)) if count != 1 => {
                Err("`run` cannot start an array; submit it and `start` its tasks".into())
            }
            (true, Some(nodes)) => self.start(first, nodes),
        }
    }

    /// Starts a pending job on `nodes` as a plan would (first free GPUs of the right
    /// type on each node) and reports it started on every node.
    fn start(&mut self, id: JobId, mut nodes: Vec<String>) -> Result<(), String> {
        let job = self.state.job(id).ok_or("no such job")?;
        let want = &job.resources;
        if nodes.len() != want.nodes as usize {
            return Err(format!(
                "job {id} needs {} node(s), on= names {}",
                want.nodes,
                nodes.len()
            ));
        }
        nodes.sort();
        let mut parts = Vec::new();
        for name in &nodes {
            let node = self
                .state
                .nodes()
                .get(name)
                .ok_or_else(|| format!("no node {name}"))?;
            let gpus: Vec<u32> = node
                .gpus
                .iter()
                .filter(|g| {
                    g.is_free_and_usable()
                        && want.gpu_type.as_ref().is_none_or(|t| *t == g.gpu_type)
                })
                .map(|g| g.index)
                .take(want.gpus_per_node as usize)
                .collect();
            if gpus.len() < want.gpus_per_node as usize {
                return Err(format!(
                    "{name} has only {} free GPU(s) for job {id}",
                    gpus.len()
                ));
            }
            let whole = want.exclusive || want.whole_node_memory;
            parts.push(NodeAllocation {
                node: name.clone(),
                gpus,
                cpus: if want.exclusive {
                    node.free_cpus()
                } else {
                    want.cpus_per_node
                },
                memory_mb: if whole {
                    node.free_memory_mb()
                } else {
                    want.memory_per_node_mb
                },
            });
        }
        let attempt = job.next_attempt_number();
        let at = self.clock;
        let planned = PlannedAllocation {
            job: id,
            attempt,
            nodes: parts,
        };
        let outcome = self.apply(Command::ApplyPlan {
            allocations: vec![planned],
            preemptions: vec![],
            reasons: vec![],
            at,
        })?;
        match outcome {
            Outcome::Plan(p) if p.started == vec![id] => {}
            other => return Err(format!("job {id} did not start: {other:?}")),
        }
        for node in nodes {
            self.apply(Command::AttemptStarted {
                job: id,
                attempt,
                node,
                at,
            })?;
        }
        Ok(())
    }

    /// One scheduling pass at `at`, applied as the leader would, with every started
    /// gang reported by its agents.
    fn schedule(&mut self, at: Timestamp) -> Result<(), String> {
        let plan = corral_scheduler::plan(&self.state, at);
        let Some(command) = plan.to_command(at) else {
            return Ok(());
        };
        let Outcome::Plan(outcome) = self.apply(command)? else {
            return Err("ApplyPlan did not report a plan outcome".into());
        };
        if !outcome.rejected.is_empty() {
            return Err(format!(
                "the plan at {} s had rejected entries: {:?}",
                at.as_secs(),
                outcome.rejected
            ));
        }
        for a in &plan.allocations {
            for part in &a.nodes {
                self.apply(Command::AttemptStarted {
                    job: a.job,
                    attempt: a.attempt,
                    node: part.node.clone(),
                    at,
                })?;
            }
        }
        Ok(())
    }
}
