//! The faults: each one begun, held, and healed, and recorded as such. Run
//! by one thread on a seeded schedule, so a scenario and seed give the same
//! sequence of fault kinds (their targets follow the cluster: "the leader"
//! is whoever leads then).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use corral_jepsen::history::EventKind;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::cluster::Cluster;
use crate::control::{Act, Control};
use crate::process_sampler::CORE_HELD_LINE;
use crate::recorder::Recorder;

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL the leader; start it again after two seconds.
    KillLeader,
    /// SIGKILL a controller picked at random; start it again after two seconds.
    KillController,
    /// SIGKILL every controller; start them again after this many seconds
    /// (past the lease and margin: the agents keep their jobs on each
    /// other's word that no leader reaches them).
    KillAllControllers(u64),
    /// SIGTERM a controller (a service stop) and start it from its disk.
    RestartController,
    /// SIGSTOP the leader for this many seconds.
    PauseLeader(u64),
    /// SIGKILL an agent; start it again after three seconds.
    KillAgent,
    /// SIGSTOP an agent for this many seconds (a hung node).
    PauseAgent(u64),
    /// Restart a follower with its clock this many seconds fast
    /// (libfaketime), hold it there for 8 s, then restart it with the true
    /// clock: only the leader's clock may reach the log.
    SkewFollower(i64),
    /// Restart a follower with its clock this many seconds off, kill the
    /// leader until that follower wins an election, hold it leading for
    /// 10 s, then restart it with the true clock: the other controllers'
    /// clocks outvote its clock, and the replicated time vouches for theirs
    /// while no majority agrees.
    SkewLeader(i64),
    /// Cut the leader off from the other controllers and every agent for this
    /// many seconds (this machine, where the clients run, still reaches it).
    IsolateLeader(u64),
    /// Split the controllers (a random minority on one side) and the agents
    /// (each to a random side) into two sides for this many seconds.
    Halves(u64),
    /// Two sides that one controller, not the leader, reaches both of: the
    /// other controllers split between the sides, the agents too.
    Bridge(u64),
    /// Every controller reaches only its two neighbours on a random ring:
    /// overlapping majorities (five controllers or more).
    Ring(u64),
    /// Cut a node's agent off from every controller for this many seconds
    /// (shorter than the lease: nothing may die; longer than lease and
    /// margin: its jobs die there before they run elsewhere).
    IsolateAgent(u64),
    /// Remove a controller picked at random (the leader, perhaps) from the
    /// voters with `corral admin members remove`, and add it back this many
    /// seconds later (`members add`, as a learner that catches up, then a
    /// voter): a membership change under load.
    Membership(u64),
    /// Throttle the leader's writes to its data disk to a trickle for this
    /// many seconds (its log's fsyncs stall; its network is fine).
    StallLeaderDisk(u64),
    /// Throttle the leader's writes to a slow disk's pace for this many
    /// seconds: each of its log's fsyncs takes longer than the followers'
    /// lease, none as long as the core-hold limit; it must stay leader.
    SlowLeaderDisk(u64),
    /// XID 79 (fallen off the bus) on a GPU a job uses: the job is killed
    /// everywhere and requeued, the GPU drained.
    XidCritical,
    /// XID 13 (an application error): the job is requeued, the GPU stays.
    XidApplication,
    /// Wait for a preemption to begin (a fresh notice), then SIGKILL the
    /// leader; start it again after two seconds.
    KillLeaderAtPreemption,
    /// Wait for a preemption to begin, then SIGKILL the agent of one of the
    /// victim's nodes; start it again after three seconds.
    KillVictimAgentAtPreemption,
}

impl Fault {
    /// Its name in histories and on the command line.
    pub fn name(self) -> String {
        match self {
            Fault::KillLeader => "kill-leader".into(),
            Fault::KillController => "kill-controller".into(),
            Fault::KillAllControllers(2) => "kill-all-controllers".into(),
            Fault::KillAllControllers(s) => format!("kill-all-controllers-{s}s"),
            Fault::RestartController => "restart-controller".into(),
            Fault::PauseLeader(s) => format!("pause-leader-{s}s"),
            Fault::KillAgent => "kill-agent".into(),
            Fault::PauseAgent(s) => format!("pause-agent-{s}s"),
            Fault::SkewFollower(s) => format!("skew-follower{s:+}s"),
            Fault::SkewLeader(s) => format!("skew-leader{s:+}s"),
            Fault::IsolateLeader(s) => format!("isolate-leader-{s}s"),
            Fault::Halves(s) => format!("halves-{s}s"),
            Fault::Bridge(s) => format!("bridge-{s}s"),
            Fault::Ring(s) => format!("ring-{s}s"),
            Fault::IsolateAgent(s) => format!("isolate-agent-{s}s"),
            Fault::Membership(s) => format!("membership-{s}s"),
            Fault::StallLeaderDisk(s) => format!("stall-leader-disk-{s}s"),
            Fault::SlowLeaderDisk(s) => format!("slow-leader-disk-{s}s"),
            Fault::XidCritical => "xid-79".into(),
            Fault::XidApplication => "xid-13".into(),
            Fault::KillLeaderAtPreemption => "kill-leader-at-preemption".into(),
            Fault::KillVictimAgentAtPreemption => "kill-victim-agent-at-preemption".into(),
        }
    }
}

impl Fault {
    /// Why this fault cannot be injected into `cluster`, if it cannot.
    fn unsupported(self, cluster: &Cluster) -> Option<String> {
        let partition = matches!(
            self,
            Fault::IsolateLeader(_)
                | Fault::Halves(_)
                | Fault::Bridge(_)
                | Fault::Ring(_)
                | Fault::IsolateAgent(_)
        );
        if partition && !cluster.network {
            return Some(match cluster.control {
                Control::Local { .. } => "partitions need the cluster on its own network \
                     (--network netns: root, iproute2, iptables) or behind a fault proxy \
                     (--network proxy)"
                    .into(),
                Control::Exec { .. } => {
                    "give --nemesis-exec cut='...' and heal='...' to inject partitions".into()
                }
            });
        }
        if partition && let Some(host) = cluster.control.shared_host() {
            return Some(format!(
                "two processes run on {host}, and cuts are made between hosts: partitions \
                 need every controller and agent on a host of its own"
            ));
        }
        if matches!(self, Fault::Ring(_)) && cluster.controllers.len() < 5 {
            return Some(format!(
                "a ring of {} controllers cuts nothing (every one is the others' neighbour): \
                 run with --controllers 5",
                cluster.controllers.len()
            ));
        }
        let needs: &[&str] = match self {
            Fault::KillLeader
            | Fault::KillController
            | Fault::KillAllControllers(_)
            | Fault::KillLeaderAtPreemption => &["kill-controller", "start-controller"],
            Fault::KillVictimAgentAtPreemption => &["kill-agent", "start-agent"],
            Fault::RestartController => &["stop-controller", "start-controller"],
            Fault::PauseLeader(_) => &["pause-controller", "resume-controller"],
            Fault::KillAgent => &["kill-agent", "start-agent"],
            Fault::PauseAgent(_) => &["pause-agent", "resume-agent"],
            Fault::XidCritical | Fault::XidApplication => &["xid"],
            Fault::StallLeaderDisk(_) | Fault::SlowLeaderDisk(_) => &["stall-disk", "unstall-disk"],
            Fault::SkewFollower(_) | Fault::SkewLeader(_) => {
                if let Control::Exec { .. } = cluster.control {
                    return Some(
                        "a clock skew restarts a controller under libfaketime: on a local \
                         cluster only"
                            .into(),
                    );
                }
                &[]
            }
            _ => &[],
        };
        cluster.control.missing(needs)
    }
}

/// Injects faults from `kinds`, one every `interval` (± a quarter), until
/// `stop`; each is healed before the next begins. Kinds this cluster cannot
/// take are recorded as skipped once and left out. A fault that could not
/// be healed ends the injections with an error: the cluster may be left
/// faulted, and the run must say so.
pub fn run(
    cluster: &Cluster,
    recorder: &Recorder,
    (kinds, interval, seed): (&[Fault], Duration, u64),
    stop: &AtomicBool,
) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6e65_6d65_7369_7300);
    let ids = AtomicU64::new(1);
    let kinds: Vec<Fault> = kinds
        .iter()
        .copied()
        .filter(|fault| match fault.unsupported(cluster) {
            Some(reason) => {
                recorder.record(EventKind::FaultSkipped {
                    kind: fault.name(),
                    reason,
                });
                false
            }
            None => true,
        })
        .collect();
    if kinds.is_empty() {
        return Ok(());
    }
    loop {
        let quarter = interval.as_millis() as u64 / 4;
        let pause = interval.as_millis() as u64 - quarter + rng.random_range(0..=2 * quarter);
        if sleep_unless_stopped(Duration::from_millis(pause), stop) {
            return Ok(());
        }
        let fault = kinds[rng.random_range(0..kinds.len())];
        let id = ids.fetch_add(1, Ordering::SeqCst);
        match inject(cluster, recorder, fault, id, &mut rng) {
            Ok(()) => {}
            Err(Injection::Skipped(e)) => {
                recorder.record(EventKind::FaultSkipped {
                    kind: fault.name(),
                    reason: format!("{e:#}"),
                });
            }
            Err(Injection::Unhealed(e)) => {
                return Err(format!(
                    "{} could not be healed ({e:#}); no more faults were injected, and the \
                     cluster may still be faulted",
                    fault.name()
                ));
            }
        }
    }
}

/// Sleeps `time`, waking early for `stop`; true when stopped.
fn sleep_unless_stopped(time: Duration, stop: &AtomicBool) -> bool {
    let until = Instant::now() + time;
    while Instant::now() < until {
        if stop.load(Ordering::SeqCst) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
    }
    stop.load(Ordering::SeqCst)
}

/// Where Debian's faketime package puts the library.
/// A follower picked at random, for a clock skew (skipped without
/// libfaketime, a leader or a follower).
fn follower_to_skew(cluster: &Cluster, rng: &mut StdRng) -> Result<u64, Injection> {
    crate::skew::faketime_library().map_err(Injection::Skipped)?;
    let (leader, _) = cluster
        .leader()
        .context("no controller names a leader")
        .map_err(Injection::Skipped)?;
    let followers: Vec<u64> = cluster
        .controllers
        .iter()
        .copied()
        .filter(|id| *id != leader)
        .collect();
    if followers.is_empty() {
        return Err(Injection::Skipped(anyhow::anyhow!("no follower to skew")));
    }
    Ok(followers[rng.random_range(0..followers.len())])
}

fn controller(id: u64) -> String {
    format!("controller-{id}")
}

/// Why a fault was not run to its end.
enum Injection {
    /// Not begun (no leader, no GPU in use, a tool missing): recorded as
    /// skipped.
    Skipped(anyhow::Error),
    /// Begun, but healing it failed: the cluster may be left faulted.
    Unhealed(anyhow::Error),
}

/// Applies a begun fault, holds it for `hold` when it applied, and heals it
/// whatever happened, recording the heal. A failed application is reported
/// (and healed); only a failed heal is an error.
fn hold_fault(
    (apply, hold): (impl FnOnce() -> anyhow::Result<()>, Duration),
    heal: impl FnOnce() -> anyhow::Result<()>,
    healed: impl FnOnce(),
) -> Result<(), Injection> {
    let applied = apply();
    if let Err(e) = &applied {
        eprintln!("corral-chaos: a fault applied only in part ({e:#}); healing it");
    } else {
        std::thread::sleep(hold);
    }
    let healing = heal();
    healed();
    healing.map_err(Injection::Unhealed)
}

fn inject(
    cluster: &Cluster,
    recorder: &Recorder,
    fault: Fault,
    id: u64,
    rng: &mut StdRng,
) -> Result<(), Injection> {
    // `cut_off`: the nodes whose agents the fault separates from the leader.
    let begin_cutting = |target: &str, cut_off: Vec<String>| {
        recorder.record(EventKind::FaultBegin {
            fault: id,
            kind: fault.name(),
            target: target.to_string(),
            cut_off,
        });
    };
    let begin = |target: &str| begin_cutting(target, Vec::new());
    let every_node = || cluster.nodes.clone();
    let control = &cluster.control;
    let any_controller = |rng: &mut StdRng| {
        controller(cluster.controllers[rng.random_range(0..cluster.controllers.len())])
    };
    let healed = || {
        recorder.record(EventKind::FaultHealed { fault: id });
    };
    let leader = || -> Result<String, Injection> {
        let (leader, _) = cluster
            .leader()
            .context("no controller names a leader")
            .map_err(Injection::Skipped)?;
        Ok(controller(leader))
    };
    let secs = Duration::from_secs;
    // Back on the true clock (a failed kill: it was not running).
    let unskew = |target: &str| {
        let _ = control.act(Act::Kill, target);
        control.act(Act::Start, target)
    };
    match fault {
        Fault::KillLeader | Fault::KillController => {
            let target = if fault == Fault::KillLeader {
                leader()?
            } else {
                any_controller(rng)
            };
            begin(&target);
            hold_fault(
                (|| control.act(Act::Kill, &target), secs(2)),
                || control.act(Act::Start, &target),
                healed,
            )
        }
        Fault::KillLeaderAtPreemption | Fault::KillVictimAgentAtPreemption => {
            let victim =
                crate::preemption_watch::next(cluster, crate::site::TIMES.grace_ms, secs(20))
                    .map_err(Injection::Skipped)?;
            let (target, cut_off, hold) = if fault == Fault::KillLeaderAtPreemption {
                (leader()?, Vec::new(), secs(2))
            } else {
                let pick = rng.random_range(0..victim.nodes.len().max(1));
                let node = victim
                    .nodes
                    .get(pick)
                    .cloned()
                    .with_context(|| format!("preempted job {} has no node", victim.job))
                    .map_err(Injection::Skipped)?;
                (format!("agent-{node}"), vec![node], secs(3))
            };
            begin_cutting(&target, cut_off);
            hold_fault(
                (|| control.act(Act::Kill, &target), hold),
                || control.act(Act::Start, &target),
                healed,
            )
        }
        Fault::KillAllControllers(seconds) => {
            begin_cutting("every controller", every_node());
            let all = || cluster.controllers.iter().map(|id| controller(*id));
            hold_fault(
                (
                    || all().try_for_each(|c| control.act(Act::Kill, &c)),
                    secs(seconds),
                ),
                // Every one is started, even after one fails to.
                || {
                    let started: Vec<anyhow::Result<()>> =
                        all().map(|c| control.act(Act::Start, &c)).collect();
                    started
                        .into_iter()
                        .collect::<anyhow::Result<Vec<()>>>()
                        .map(|_| ())
                },
                healed,
            )
        }
        Fault::RestartController => {
            let target = any_controller(rng);
            begin(&target);
            hold_fault(
                (|| control.act(Act::Stop, &target), secs(0)),
                || control.act(Act::Start, &target),
                healed,
            )
        }
        Fault::PauseLeader(seconds) => {
            let target = leader()?;
            begin(&target);
            hold_fault(
                (|| control.act(Act::Pause, &target), secs(seconds)),
                || control.act(Act::Resume, &target),
                healed,
            )
        }
        Fault::KillAgent | Fault::PauseAgent(_) => {
            let node = &cluster.nodes[rng.random_range(0..cluster.nodes.len())];
            let target = format!("agent-{node}");
            let (act, hold, heal) = match fault {
                Fault::PauseAgent(seconds) => (Act::Pause, secs(seconds), Act::Resume),
                _ => (Act::Kill, secs(3), Act::Start),
            };
            begin_cutting(&target, vec![node.clone()]);
            hold_fault(
                (|| control.act(act, &target), hold),
                || control.act(heal, &target),
                healed,
            )
        }
        Fault::SkewFollower(seconds) => {
            let target = controller(follower_to_skew(cluster, rng)?);
            begin(&target);
            hold_fault(
                (
                    || crate::skew::restart_skewed(control, &target, seconds),
                    secs(8),
                ),
                || unskew(&target),
                healed,
            )
        }
        Fault::SkewLeader(seconds) => {
            let skewed = follower_to_skew(cluster, rng)?;
            let target = controller(skewed);
            begin(&target);
            // What shows it took: the skewed controller led (the elections
            // it took are the leaders killed, recorded by the observer).
            let mut led = false;
            let result = hold_fault(
                (
                    || {
                        crate::skew::restart_skewed(control, &target, seconds)?;
                        crate::skew::bring_to_lead(cluster, skewed)?;
                        led = true;
                        Ok(())
                    },
                    secs(10),
                ),
                || unskew(&target),
                healed,
            );
            recorder.record(EventKind::FaultEffect {
                fault: id,
                effect: format!("term led by {target} with its clock {seconds:+} s off"),
                count: u64::from(led),
            });
            result
        }
        Fault::IsolateLeader(_)
        | Fault::Halves(_)
        | Fault::Bridge(_)
        | Fault::Ring(_)
        | Fault::IsolateAgent(_) => {
            let (seconds, cuts, target) =
                partition(cluster, fault, rng).map_err(Injection::Skipped)?;
            let cut_off = cut_off_agents(&cluster.controllers, &cluster.nodes, &cuts);
            begin_cutting(&target, cut_off);
            let minority = without_majority(&cluster.controllers, &cuts);
            if !minority.is_empty() {
                recorder.record(EventKind::Minority {
                    fault: id,
                    controllers: minority,
                });
            }
            hold_fault(
                (
                    || {
                        cuts.iter()
                            .try_for_each(|(one, other)| control.cut(one, other))
                    },
                    secs(seconds),
                ),
                || control.heal(),
                healed,
            )
        }
        Fault::StallLeaderDisk(seconds) | Fault::SlowLeaderDisk(seconds) => {
            let rate = match fault {
                Fault::SlowLeaderDisk(_) => crate::disk_stall::SLOW_BYTES_PER_S,
                _ => crate::disk_stall::TRICKLE_BYTES_PER_S,
            };
            let target = leader()?;
            let log = control.log_path(&target);
            let from = log
                .as_ref()
                .and_then(|l| std::fs::metadata(l).ok())
                .map_or(0, |m| m.len());
            let stall = control
                .stall_disk(&target, rate)
                .map_err(Injection::Skipped)?;
            begin(&target);
            let result = hold_fault(
                (|| Ok(()), secs(seconds)),
                || control.unstall_disk(stall),
                healed,
            );
            // What shows the stall took: the leader's own "slow sync" lines
            // (fsyncs over 20 ms) written while it lasted; and, for a stall
            // past the core-hold limit, its word that it stopped vouching
            // for itself (so that the others elect a leader).
            if let Some(log) = log {
                recorder.record(EventKind::FaultEffect {
                    fault: id,
                    effect: format!("slow syncs logged by {target}"),
                    count: lines_since(&log, from, "slow sync"),
                });
                if matches!(fault, Fault::StallLeaderDisk(_)) {
                    recorder.record(EventKind::FaultEffect {
                        fault: id,
                        effect: format!("'{CORE_HELD_LINE}' logged by {target}"),
                        count: lines_since(&log, from, CORE_HELD_LINE),
                    });
                }
            }
            result
        }
        Fault::Membership(seconds) => {
            let target = cluster
                .controllers
                .get(rng.random_range(0..cluster.controllers.len()))
                .copied()
                .context("no controller")
                .map_err(Injection::Skipped)?;
            let (peer, api) = cluster
                .member_addresses(target)
                .map_err(Injection::Skipped)?;
            let id = target.to_string();
            begin(&controller(target));
            hold_fault(
                (
                    || cluster.admin(&["admin", "members", "remove", &id]),
                    secs(seconds),
                ),
                || {
                    cluster.admin(&[
                        "admin", "members", "add", &id, "--peer", &peer, "--api", &api,
                    ])
                },
                healed,
            )
        }
        Fault::XidCritical | Fault::XidApplication => {
            let xid = if fault == Fault::XidCritical { 79 } else { 13 };
            let (node, gpu) = gpu_in_use(cluster, rng).map_err(Injection::Skipped)?;
            begin(&format!("{node} GPU {gpu}"));
            if fault == Fault::XidApplication {
                // Nothing to heal: the GPU stays in service.
                return hold_fault(
                    (|| control.xid(&node, gpu, xid), secs(0)),
                    || Ok(()),
                    healed,
                );
            }
            // An XID 79 drains the whole node (the GPU needs an operator).
            // The operator here returns the node to service 5 s later, as
            // after a GPU reset; the dead GPU itself stays out of service.
            hold_fault(
                (|| control.xid(&node, gpu, xid), secs(5)),
                || wait_drained_then_resume(cluster, &node),
                healed,
            )
        }
    }
}

/// Resumes `node` (`corral node resume`) once its drain by an XID 79 has
/// committed.
fn wait_drained_then_resume(cluster: &Cluster, node: &str) -> anyhow::Result<()> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let out = cluster.corral(&["--json", "nodes"], Duration::from_secs(10))?;
        let listing: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let drained = listing["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|n| n["name"].as_str() == Some(node) && !n["drain"].is_null());
        if drained || Instant::now() > until {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    cluster.admin(&["node", "resume", node])
}

/// The nodes whose agents a partition of `cuts` may cut off from the
/// leader: those that cannot reach some controller that could lead during
/// it (one that reaches a majority of the controllers, itself included).
pub fn cut_off_agents(
    controllers: &[u64],
    nodes: &[String],
    cuts: &[(Vec<String>, Vec<String>)],
) -> Vec<String> {
    let (could_lead, _) = split_by_majority(controllers, cuts);
    nodes
        .iter()
        .filter(|node| {
            let agent = format!("agent-{node}");
            could_lead.iter().any(|c| apart(cuts, &agent, c))
        })
        .cloned()
        .collect()
}

/// The controllers `cuts` leave without a majority of the controllers
/// (themselves included): none of them can lead until the heal.
pub fn without_majority(controllers: &[u64], cuts: &[(Vec<String>, Vec<String>)]) -> Vec<String> {
    split_by_majority(controllers, cuts).1
}

/// True when `cuts` separate `a` and `b`.
fn apart(cuts: &[(Vec<String>, Vec<String>)], a: &str, b: &str) -> bool {
    cuts.iter().any(|(one, other)| {
        (one.iter().any(|x| x == a) && other.iter().any(|x| x == b))
            || (one.iter().any(|x| x == b) && other.iter().any(|x| x == a))
    })
}

/// The controllers that still reach a majority of the controllers through
/// `cuts`, and those that do not.
fn split_by_majority(
    controllers: &[u64],
    cuts: &[(Vec<String>, Vec<String>)],
) -> (Vec<String>, Vec<String>) {
    let names: Vec<String> = controllers.iter().map(|id| controller(*id)).collect();
    let majority = names.len() / 2 + 1;
    names
        .iter()
        .cloned()
        .partition(|c| names.iter().filter(|o| !apart(cuts, c, o)).count() >= majority)
}

/// The cuts a partition makes (pairs of sides), how long it lasts, and how
/// the history names its target.
#[allow(clippy::type_complexity)]
fn partition(
    cluster: &Cluster,
    fault: Fault,
    rng: &mut StdRng,
) -> anyhow::Result<(u64, Vec<(Vec<String>, Vec<String>)>, String)> {
    let controllers: Vec<String> = cluster
        .controllers
        .iter()
        .copied()
        .map(controller)
        .collect();
    let agents: Vec<String> = cluster.nodes.iter().map(|n| format!("agent-{n}")).collect();
    let leader = || -> anyhow::Result<String> {
        let (leader, _) = cluster.leader().context("no controller names a leader")?;
        Ok(controller(leader))
    };
    let but = |list: &[String], out: &[String]| -> Vec<String> {
        list.iter().filter(|x| !out.contains(x)).cloned().collect()
    };
    let shuffled = |list: &[String], rng: &mut StdRng| {
        let mut list = list.to_vec();
        for i in (1..list.len()).rev() {
            list.swap(i, rng.random_range(0..=i));
        }
        list
    };
    let side = |names: &[String]| names.join(",");
    Ok(match fault {
        Fault::IsolateLeader(seconds) => {
            let target = leader()?;
            let rest = but(&controllers, std::slice::from_ref(&target))
                .into_iter()
                .chain(agents.iter().cloned())
                .collect();
            (seconds, vec![(vec![target.clone()], rest)], target)
        }
        Fault::Halves(seconds) => {
            let order = shuffled(&controllers, rng);
            let (mut one, mut other) = {
                let (a, b) = order.split_at(order.len() / 2);
                (a.to_vec(), b.to_vec())
            };
            for agent in &agents {
                if rng.random_bool(0.5) {
                    one.push(agent.clone());
                } else {
                    other.push(agent.clone());
                }
            }
            let target = format!("{} | {}", side(&one), side(&other));
            (seconds, vec![(one, other)], target)
        }
        Fault::Bridge(seconds) => {
            let leader = leader()?;
            let bridge = shuffled(&but(&controllers, std::slice::from_ref(&leader)), rng)
                .pop()
                .context("no controller but the leader to bridge the sides")?;
            let rest = shuffled(&but(&controllers, &[leader.clone(), bridge.clone()]), rng);
            let (mut one, mut other) = (vec![leader], Vec::new());
            for (i, name) in rest.into_iter().enumerate() {
                if i % 2 == 0 {
                    other.push(name);
                } else {
                    one.push(name);
                }
            }
            for agent in &agents {
                if rng.random_bool(0.5) {
                    one.push(agent.clone());
                } else {
                    other.push(agent.clone());
                }
            }
            let target = format!("{} | {} | {}", side(&one), bridge, side(&other));
            (seconds, vec![(one, other)], target)
        }
        Fault::Ring(seconds) => {
            let ring = shuffled(&controllers, rng);
            let n = ring.len();
            let mut cuts = Vec::new();
            for i in 0..n {
                // Each pair once: i with the non-neighbours after it.
                let far: Vec<String> = (i + 2..n)
                    .filter(|j| !(i == 0 && *j == n - 1))
                    .map(|j| ring[j].clone())
                    .collect();
                if !far.is_empty() {
                    cuts.push((vec![ring[i].clone()], far));
                }
            }
            (seconds, cuts, format!("ring {}", ring.join("-")))
        }
        Fault::IsolateAgent(seconds) => {
            let target = agents[rng.random_range(0..agents.len())].clone();
            (seconds, vec![(vec![target.clone()], controllers)], target)
        }
        other => anyhow::bail!("{} is not a partition", other.name()),
    })
}

/// Lines holding `text` in the file at `path` past byte `from` (0 when it
/// cannot be read).
fn lines_since(path: &std::path::Path, from: u64, text: &str) -> u64 {
    let Ok(bytes) = std::fs::read(path) else {
        return 0;
    };
    let tail = bytes.get(from as usize..).unwrap_or_default();
    String::from_utf8_lossy(tail)
        .lines()
        .filter(|l| l.contains(text))
        .count() as u64
}

/// A GPU that a running job holds, picked at random.
fn gpu_in_use(cluster: &Cluster, rng: &mut StdRng) -> anyhow::Result<(String, u32)> {
    let out = cluster.corral(
        &["--json", "queue", "-t", "RUNNING"],
        Duration::from_secs(10),
    )?;
    let jobs: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("reading the queue")?;
    let mut held = Vec::new();
    for job in jobs.as_array().into_iter().flatten() {
        let Some(attempt) = job["attempts"].as_array().and_then(|a| a.last()) else {
            continue;
        };
        for part in attempt["allocation"].as_array().into_iter().flatten() {
            let node = part["node"].as_str().unwrap_or_default().to_string();
            for gpu in part["gpus"].as_array().into_iter().flatten() {
                if let Some(gpu) = gpu.as_u64() {
                    held.push((node.clone(), gpu as u32));
                }
            }
        }
    }
    if held.is_empty() {
        anyhow::bail!("no job holds a GPU now");
    }
    Ok(held.swap_remove(rng.random_range(0..held.len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_agents_apart_from_a_controller_that_could_lead_are_cut_off() {
        let controllers = [1, 2, 3];
        let nodes = names(&["gpu01", "gpu02"]);
        // The leader alone: the others still lead, and every agent reaches them.
        let isolate = vec![(
            names(&["controller-1"]),
            names(&["controller-2", "controller-3", "agent-gpu01", "agent-gpu02"]),
        )];
        assert!(cut_off_agents(&controllers, &nodes, &isolate).is_empty());
        // Halves: the agent beside the lone controller is cut off.
        let halves = vec![(
            names(&["controller-1", "agent-gpu01"]),
            names(&["controller-2", "controller-3", "agent-gpu02"]),
        )];
        assert_eq!(
            cut_off_agents(&controllers, &nodes, &halves),
            names(&["gpu01"])
        );
        // A bridge (3 reaches both sides): either end may lead, so both
        // sides' agents may be cut off from it.
        let bridge = vec![(
            names(&["controller-1", "agent-gpu01"]),
            names(&["controller-2", "agent-gpu02"]),
        )];
        assert_eq!(cut_off_agents(&controllers, &nodes, &bridge), nodes);
        // An agent cut off from every controller.
        let agent = vec![(
            names(&["agent-gpu02"]),
            names(&["controller-1", "controller-2", "controller-3"]),
        )];
        assert_eq!(
            cut_off_agents(&controllers, &nodes, &agent),
            names(&["gpu02"])
        );
    }

    #[test]
    fn the_controllers_without_a_majority_are_the_minority() {
        let controllers = [1, 2, 3];
        let isolate = vec![(
            names(&["controller-1"]),
            names(&["controller-2", "controller-3", "agent-gpu01"]),
        )];
        assert_eq!(
            without_majority(&controllers, &isolate),
            names(&["controller-1"])
        );
        // A bridge leaves every controller a majority.
        let bridge = vec![(names(&["controller-1"]), names(&["controller-2"]))];
        assert!(without_majority(&controllers, &bridge).is_empty());
        // An agent cut off touches no controller.
        let agent = vec![(
            names(&["agent-gpu02"]),
            names(&["controller-1", "controller-2", "controller-3"]),
        )];
        assert!(without_majority(&controllers, &agent).is_empty());
    }
}
