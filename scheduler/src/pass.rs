//! One scheduling pass: order the queue, then for each job in turn check it may
//! start, place it, or — if it is blocked — hold a backfill reservation for it or
//! preempt for it. Capacity only shrinks during a pass, so a request shape that
//! failed once fails for the rest of the pass and is skipped in O(1).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use corral_state::command::{PlannedAllocation, PlannedPreemption};
use corral_state::job::{Job, JobState, PendingReason, ResourceRequest};
use corral_state::slurm::duration::TimeLimit;
use corral_state::slurm::signal::Signal;
use corral_state::{ClusterState, JobId, Timestamp};

use crate::backfill::{self, Holds, Releases};
use crate::eligibility::{self, Usage};
use crate::place::{Constraints, PlaceFailure, place};
use crate::plan::{BackfillReservation, Plan};
use crate::preempt;
use crate::priority::PriorityContext;
use crate::view::View;

/// Most blocked jobs that search for preemption victims in one pass (each search
/// costs up to a few hundred placement attempts).
const MAX_PREEMPTORS_PER_PASS: usize = 32;

/// What a job's placement depends on besides the capacity left, its node count
/// and its time limit. Within a family, failure is monotone: if `n` nodes for
/// `limit` fail, any larger gang or longer limit fails too at that point of the
/// pass (capacity only shrinks; holds and reservations only admit shorter jobs).
#[derive(PartialEq, Eq, Hash)]
struct ShapeFamily<'s> {
    partition: &'s str,
    gpus_per_node: u32,
    gpu_type: Option<&'s str>,
    cpus_per_node: u32,
    memory_per_node_mb: u64,
    whole_node_memory: bool,
    exclusive: bool,
    features: &'s [String],
    required_nodes: &'s [String],
    excluded_nodes: &'s BTreeSet<String>,
    switches: Option<corral_state::slurm::sbatch::SwitchesSpec>,
    reservation: Option<&'s str>,
    enforce_switches: bool,
}

impl<'s> ShapeFamily<'s> {
    fn of(job: &'s Job, enforce_switches: bool) -> Self {
        let r: &'s ResourceRequest = &job.resources;
        ShapeFamily {
            partition: &job.partition,
            gpus_per_node: r.gpus_per_node,
            gpu_type: r.gpu_type.as_deref(),
            cpus_per_node: r.cpus_per_node,
            memory_per_node_mb: r.memory_per_node_mb,
            whole_node_memory: r.whole_node_memory,
            exclusive: r.exclusive,
            features: &r.features,
            required_nodes: &r.required_nodes,
            excluded_nodes: &r.excluded_nodes,
            switches: r.switches,
            reservation: job.spec.reservation.as_deref(),
            enforce_switches,
        }
    }
}

/// Failed (node count, time limit) pairs per family, with why they failed; a job
/// fails if some failed pair is no larger in both.
#[derive(Default)]
struct FailedShapes<'s> {
    by_family: HashMap<ShapeFamily<'s>, Vec<(u32, TimeLimit, PlaceFailure)>>,
}

impl<'s> FailedShapes<'s> {
    fn known_failure(
        &self,
        family: &ShapeFamily<'s>,
        nodes: u32,
        limit: TimeLimit,
    ) -> Option<PlaceFailure> {
        let failed = self.by_family.get(family)?;
        failed
            .iter()
            .find(|(n, l, _)| *n <= nodes && *l <= limit)
            .map(|(_, _, why)| *why)
    }

    fn record(&mut self, family: ShapeFamily<'s>, nodes: u32, limit: TimeLimit, why: PlaceFailure) {
        let failed = self.by_family.entry(family).or_default();
        // Keep the frontier small: drop pairs the new one dominates.
        failed.retain(|(n, l, _)| !(nodes <= *n && limit <= *l));
        failed.push((nodes, limit, why));
    }
}

/// What became of one job in the pass, for `explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It starts now on these nodes.
    Starts(Vec<String>),
    /// It is not eligible (hold, dependency, limit...).
    Ineligible(PendingReason),
    /// No room now; `held` when a backfill reservation was made for it.
    Blocked {
        /// The reason shown.
        reason: PendingReason,
        /// Its reservation, if it got one.
        reservation: Option<BackfillReservation>,
        /// Jobs it preempts, if any.
        preempting: Vec<JobId>,
    },
}

/// The jobs in the order the pass considers them: partition tier, then priority,
/// then id.
pub fn queue_order<'s>(
    state: &'s ClusterState,
    now: Timestamp,
    priorities: &PriorityContext,
) -> Vec<(&'s Job, i64)> {
    let mut queue: Vec<(&Job, i64, u32)> = state
        .queued_jobs()
        .map(|job| {
            let tier = state
                .partitions()
                .get(&job.partition)
                .map_or(0, |p| p.priority_tier);
            (job, priorities.priority(state, job, now), tier)
        })
        .collect();
    queue.sort_by_key(|(job, priority, tier)| (Reverse(*tier), Reverse(*priority), job.id));
    queue
        .into_iter()
        .map(|(job, priority, _)| (job, priority))
        .collect()
}

/// Plans one pass at `now`.
pub fn plan(state: &ClusterState, now: Timestamp) -> Plan {
    execute(state, now, false, &PassInputs::default()).0
}

/// What the leader brings to a pass beyond the replicated state: its soft
/// state and its own settings (corral.toml's `[leader]`).
#[derive(Debug, Clone, Default)]
pub struct PassInputs {
    /// Nodes that take no new work: the leader has not heard from their
    /// agents lately (Slurm's NOT_RESPONDING).
    pub avoid: BTreeSet<String>,
    /// Slurm's `SlurmctldParameters=preempt_send_user_signal`: a victim
    /// submitted with `--signal` gets that signal as its preemption notice
    /// instead of SIGTERM.
    pub preempt_send_user_signal: bool,
}

/// Plans one pass at `now` with the leader's inputs.
pub fn plan_with(state: &ClusterState, now: Timestamp, inputs: &PassInputs) -> Plan {
    execute(state, now, false, inputs).0
}

/// Plans one pass at `now` that starts nothing on the nodes of `avoid` (the
/// leader has not heard from their agents lately: Slurm's NOT_RESPONDING).
/// What runs there stays; only new work goes elsewhere or waits.
pub fn plan_avoiding(state: &ClusterState, now: Timestamp, avoid: &BTreeSet<String>) -> Plan {
    let inputs = PassInputs {
        avoid: avoid.clone(),
        ..PassInputs::default()
    };
    execute(state, now, false, &inputs).0
}

/// Plans one pass and returns every considered job's verdict.
pub fn run(state: &ClusterState, now: Timestamp) -> (Plan, BTreeMap<JobId, Verdict>) {
    execute(state, now, true, &PassInputs::default())
}

fn execute(
    state: &ClusterState,
    now: Timestamp,
    record_verdicts: bool,
    inputs: &PassInputs,
) -> (Plan, BTreeMap<JobId, Verdict>) {
    let mut pass = Pass::new(state, now, record_verdicts, inputs);
    let priorities = PriorityContext::new(state);
    for (job, _) in queue_order(state, now, &priorities) {
        pass.consider(job);
    }
    pass.finish()
}

struct Pass<'s> {
    state: &'s ClusterState,
    now: Timestamp,
    view: View<'s>,
    usage: Usage<'s>,
    holds: Holds,
    releases: Option<Releases>,
    failed_shapes: FailedShapes<'s>,
    /// Record every job's verdict (for `explain`); plain passes skip it.
    record_verdicts: bool,
    blocked_partitions: BTreeSet<&'s str>,
    preempted: BTreeSet<JobId>,
    /// Notices carry the victim's `--signal` (preempt_send_user_signal).
    send_user_signal: bool,
    /// Per node, the windows of admin reservations (start, end, name).
    reserved: Vec<Vec<(Timestamp, Timestamp, &'s str)>>,
    /// True when no admin reservation is current or ahead.
    no_reservations: bool,
    /// When current and future reservations end: worth trying as start times.
    reservation_ends: Vec<Timestamp>,
    /// Blocked jobs that got (or tried for) a backfill reservation this pass.
    backfill_holds: usize,
    /// Blocked jobs that searched for preemption victims this pass.
    preemptors: usize,
    /// Jobs whose earlier preemptions are still under way.
    waiting_on_preemption: BTreeSet<JobId>,
    plan: Plan,
    verdicts: BTreeMap<JobId, Verdict>,
}

impl<'s> Pass<'s> {
    fn new(
        state: &'s ClusterState,
        now: Timestamp,
        record_verdicts: bool,
        inputs: &PassInputs,
    ) -> Self {
        let view = View::build_avoiding(state, now, &inputs.avoid);
        let mut reserved = vec![Vec::new(); view.nodes.len()];
        for r in state.reservations().values().filter(|r| r.end > now) {
            for node in &r.nodes {
                if let Some(i) = view.index(node) {
                    reserved[i].push((r.start, r.end, r.name.as_str()));
                }
            }
        }
        Pass {
            state,
            now,
            holds: Holds::new(view.nodes.len()),
            view,
            usage: Usage::from_state(state),
            releases: None,
            failed_shapes: FailedShapes::default(),
            record_verdicts,
            blocked_partitions: BTreeSet::new(),
            preempted: BTreeSet::new(),
            send_user_signal: inputs.preempt_send_user_signal,
            no_reservations: reserved.iter().all(Vec::is_empty),
            reservation_ends: state
                .reservations()
                .values()
                .map(|r| r.end)
                .filter(|end| *end > now)
                .collect(),
            backfill_holds: 0,
            preemptors: 0,
            waiting_on_preemption: Self::preemptors_in_flight(state),
            reserved,
            plan: Plan::default(),
            verdicts: BTreeMap::new(),
        }
    }

    /// True when `job` may use node `i` now as far as admin reservations go.
    fn reservation_allows(&self, job: &Job, i: usize) -> bool {
        self.reservation_allows_at(job, i, self.now)
    }

    /// True when `job`, starting at `start`, may use node `i` as far as admin
    /// reservations go: a job in a reservation only on that reservation's nodes
    /// while it is active; any job only where no other reservation's window
    /// overlaps its run.
    fn reservation_allows_at(&self, job: &Job, i: usize, start: Timestamp) -> bool {
        if self.no_reservations {
            // Eligibility already refused jobs whose reservation is missing.
            return job.spec.reservation.is_none();
        }
        let end = match job.time_limit {
            TimeLimit::Seconds(s) => start.plus_secs(s),
            TimeLimit::Unlimited => Timestamp(u64::MAX),
        };
        let own = job.spec.reservation.as_deref();
        let inside_own = own.is_none_or(|name| {
            self.reserved[i]
                .iter()
                .any(|(from, to, r)| *r == name && *from <= start && start < *to)
        });
        let others_clear = self.reserved[i]
            .iter()
            .filter(|(_, _, r)| Some(*r) != own)
            .all(|(from, to, _)| end <= *from || *to <= start);
        inside_own && others_clear
    }

    /// Jobs for which preemptions are already under way (victims signalled or
    /// being cleaned up): their resources come free at their deadlines.
    fn preemptors_in_flight(state: &ClusterState) -> BTreeSet<JobId> {
        let mut waiting = BTreeSet::new();
        for victim in state.active_jobs() {
            let Some(attempt) = victim.live_attempt() else {
                continue;
            };
            if let Some(notice) = &attempt.preemption {
                waiting.insert(notice.for_job);
            }
            if let Some(corral_state::job::EndCause::Preempted { for_job }) =
                attempt.ending.as_ref().map(|e| &e.cause)
            {
                waiting.insert(*for_job);
            }
        }
        waiting
    }

    fn consider(&mut self, job: &'s Job) {
        self.plan.stats.considered += 1;
        if let Err(reason) = eligibility::check(self.state, job, self.now, &self.usage) {
            self.ineligible(job, reason);
            return;
        }
        let max_switch_wait = self.state.config().max_switch_wait_seconds;
        let enforce_switches = job.resources.switches.is_some_and(|s| {
            let wait = s
                .max_wait_seconds
                .map_or(max_switch_wait, |w| w.min(max_switch_wait));
            self.now < crate::priority::eligible_since(job, self.now).plus_secs(wait)
        });
        let family = ShapeFamily::of(job, enforce_switches);
        if let Some(failure) =
            self.failed_shapes
                .known_failure(&family, job.resources.nodes, job.time_limit)
        {
            // No search needed, but a top job still gets its reservation.
            self.plan.stats.shape_cache_hits += 1;
            let reason = self.failure_reason(job, failure);
            self.handle_blocked(job, reason, enforce_switches);
            return;
        }
        self.plan.stats.placements_tried += 1;
        let placed = {
            let allowed = |i: usize| {
                self.holds.allows(i, self.now, job.time_limit) && self.reservation_allows(job, i)
            };
            place(
                &self.view,
                job,
                &Constraints {
                    allowed: &allowed,
                    enforce_switches,
                },
            )
        };
        match placed {
            Ok(nodes) if job.resources.exclusive => {
                // It holds every GPU of its nodes: its limits count them all.
                let gpus = nodes.iter().map(|n| n.gpus.len() as u64).sum();
                match eligibility::check_limits(self.state, job, &self.usage, gpus) {
                    Ok(()) => self.start(job, nodes),
                    Err(reason) => self.ineligible(job, reason),
                }
            }
            Ok(nodes) => self.start(job, nodes),
            Err(failure) => {
                self.failed_shapes
                    .record(family, job.resources.nodes, job.time_limit, failure);
                let reason = self.failure_reason(job, failure);
                self.handle_blocked(job, reason, enforce_switches);
            }
        }
    }

    fn failure_reason(&self, job: &Job, failure: PlaceFailure) -> PendingReason {
        match failure {
            PlaceFailure::Resources => self.resources_reason(job),
            PlaceFailure::RequiredNodes => PendingReason::ReqNodeNotAvail,
            PlaceFailure::Topology => PendingReason::Topology,
        }
    }

    /// Priority when a higher-priority job of the partition already waits for
    /// resources, Resources for the first one.
    fn resources_reason(&self, job: &Job) -> PendingReason {
        if self.blocked_partitions.contains(job.partition.as_str()) {
            PendingReason::Priority
        } else {
            PendingReason::Resources
        }
    }

    fn start(&mut self, job: &'s Job, nodes: Vec<corral_state::job::NodeAllocation>) {
        let used_held = nodes.iter().any(|n| {
            self.view
                .index(&n.node)
                .is_some_and(|i| self.holds.is_held(i))
        });
        if used_held {
            self.plan.stats.backfilled += 1;
        }
        self.view.take(&nodes, job.resources.exclusive);
        let gpus = nodes.iter().map(|n| n.gpus.len() as u64).sum();
        self.usage.add(self.state, job, gpus);
        if let Some(releases) = self.releases.as_mut() {
            releases.add_planned(&self.view, job, &nodes);
        }
        let names: Vec<String> = if self.record_verdicts {
            nodes.iter().map(|n| n.node.clone()).collect()
        } else {
            Vec::new()
        };
        self.plan.allocations.push(PlannedAllocation {
            job: job.id,
            attempt: job.next_attempt_number(),
            nodes,
        });
        if self.record_verdicts {
            self.verdicts.insert(job.id, Verdict::Starts(names));
        }
    }

    /// A job that fits nowhere now: preempt for it if it outranks running jobs
    /// (unless preemptions for it are already under way), else hold a backfill
    /// reservation at its earliest start, while reservations remain.
    fn handle_blocked(&mut self, job: &'s Job, reason: PendingReason, enforce_switches: bool) {
        self.blocked_partitions.insert(job.partition.as_str());
        let budget = self.state.config().backfill_reservations as usize;
        let may_preempt = self.preemptors < MAX_PREEMPTORS_PER_PASS
            && !self.waiting_on_preemption.contains(&job.id);
        if self.backfill_holds >= budget && !may_preempt {
            self.blocked(job, reason, None, Vec::new());
            return;
        }
        let mut releases = self.releases.take().unwrap_or_else(|| {
            let mut releases = Releases::from_state(self.state, &self.view);
            for planned in &self.plan.allocations {
                if let Some(started) = self.state.job(planned.job) {
                    releases.add_planned(&self.view, started, &planned.nodes);
                }
            }
            releases
        });
        if may_preempt {
            self.preemptors += 1;
            let allowed = |i: usize| !self.holds.is_held(i) && self.reservation_allows(job, i);
            let found = preempt::find(
                self.state,
                &self.view,
                job,
                &self.preempted,
                &allowed,
                enforce_switches,
            );
            if let Some(choice) = found {
                self.releases = Some(releases);
                // It will run once its victims are gone: it counts against its
                // limits now, so a second job of the same user or account is
                // not let through to preempt as well.
                let gpus = job.resources.total_gpus();
                self.usage.add(self.state, job, gpus);
                self.preempt_for(job, reason, choice);
                return;
            }
        }
        if self.backfill_holds >= budget {
            self.releases = Some(releases);
            self.blocked(job, reason, None, Vec::new());
            return;
        }
        self.backfill_holds += 1;
        let allowed_at = |i: usize, at: Timestamp| {
            !self.holds.is_held(i) && self.reservation_allows_at(job, i, at)
        };
        let search = backfill::Search {
            allowed_at: &allowed_at,
            extra_times: &self.reservation_ends,
            enforce_switches,
        };
        let start = backfill::earliest_start(&self.view, &mut releases, job, &search);
        self.releases = Some(releases);
        let reservation = start.map(|(at, nodes)| self.hold(job, at, nodes));
        self.blocked(job, reason, reservation, Vec::new());
    }

    /// Proposes the victims and holds their nodes for `job` from the end of grace.
    fn preempt_for(&mut self, job: &'s Job, reason: PendingReason, choice: preempt::Choice) {
        let grace = self.state.config().preempt_grace_seconds;
        for victim in &choice.victims {
            let signal = self
                .state
                .job(*victim)
                .and_then(|v| v.spec.signal.as_ref())
                .filter(|_| self.send_user_signal)
                .map_or(Signal::TERM, |s| s.signal);
            let attempt = self
                .state
                .job(*victim)
                .and_then(|v| v.live_attempt())
                .map_or(1, |a| a.number);
            self.plan.preemptions.push(PlannedPreemption {
                job: *victim,
                attempt,
                signal,
                grace_seconds: grace,
                for_job: job.id,
            });
            self.preempted.insert(*victim);
        }
        let reservation = self.hold(job, self.now.plus_secs(grace), choice.nodes);
        self.blocked(job, reason, Some(reservation), choice.victims);
    }

    fn hold(&mut self, job: &Job, start: Timestamp, nodes: Vec<usize>) -> BackfillReservation {
        self.holds.hold(&nodes, start);
        let reservation = BackfillReservation {
            job: job.id,
            start,
            nodes: nodes
                .iter()
                .map(|i| self.view.name(*i).to_string())
                .collect(),
        };
        self.plan.reservations.push(reservation.clone());
        reservation
    }

    fn ineligible(&mut self, job: &Job, reason: PendingReason) {
        self.plan.stats.ineligible += 1;
        self.set_reason(job, reason);
        if self.record_verdicts {
            self.verdicts.insert(job.id, Verdict::Ineligible(reason));
        }
    }

    fn blocked(
        &mut self,
        job: &Job,
        reason: PendingReason,
        reservation: Option<BackfillReservation>,
        preempting: Vec<JobId>,
    ) {
        self.set_reason(job, reason);
        if self.record_verdicts {
            self.verdicts.insert(
                job.id,
                Verdict::Blocked {
                    reason,
                    reservation,
                    preempting,
                },
            );
        }
    }

    fn set_reason(&mut self, job: &Job, reason: PendingReason) {
        if job.reason != reason
            && job.hold.is_none()
            && job.state == JobState::Pending
            && reason.is_set_by_scheduler()
        {
            self.plan.reasons.push((job.id, reason));
        }
    }

    fn finish(self) -> (Plan, BTreeMap<JobId, Verdict>) {
        (self.plan, self.verdicts)
    }
}
