//! The scenarios: which faults, how often. Each runs the same workload.

use std::time::Duration;

use crate::nemesis::Fault;

/// A named fault schedule.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: &'static str,
    /// What it shows, in a sentence.
    pub about: &'static str,
    pub faults: Vec<Fault>,
    /// Time between one fault's heal and the next fault.
    pub interval: Duration,
    /// Whether it runs on the preemption site (`site.rs`), with urgent gangs
    /// arriving and trainers that trap or ignore the notice.
    pub preemption: bool,
    /// Seconds of workload it runs for in the CI matrix (faults are held to
    /// their own length past it), chosen by risk: a minute where leadership
    /// moves, 15 s elsewhere; `None` leaves it out of the matrix.
    pub matrix_s: Option<u64>,
}

/// Seconds a scenario runs for in the CI matrix unless it says otherwise.
const MATRIX_S: u64 = 15;
/// Seconds for the scenarios where leadership moves.
const MATRIX_RISKY_S: u64 = 60;

/// Every scenario, in the order `corral-chaos list` prints them.
pub fn all() -> Vec<Scenario> {
    let s = |name, about, faults: Vec<Fault>, secs| Scenario {
        name,
        about,
        faults,
        interval: Duration::from_secs(secs),
        preemption: false,
        matrix_s: Some(MATRIX_S),
    };
    let risky = |name, about, faults: Vec<Fault>, secs| Scenario {
        matrix_s: Some(MATRIX_RISKY_S),
        ..s(name, about, faults, secs)
    };
    let preempting = |name, about, faults: Vec<Fault>, secs| Scenario {
        preemption: true,
        ..s(name, about, faults, secs)
    };
    vec![
        s(
            "none",
            "no faults: the workload and checkers alone",
            vec![],
            10,
        ),
        risky(
            "kill-leader",
            "SIGKILL the leader, restart it 2 s later",
            vec![Fault::KillLeader],
            8,
        ),
        risky(
            "pause-leader",
            "SIGSTOP the leader for 3 s or 12 s (longer than the agents' lease)",
            vec![Fault::PauseLeader(3), Fault::PauseLeader(12)],
            6,
        ),
        s(
            "kill-controller",
            "SIGKILL a controller at random, restart it 2 s later",
            vec![Fault::KillController],
            6,
        ),
        s(
            "kill-all-controllers",
            "SIGKILL every controller, restart them 2 s later",
            vec![Fault::KillAllControllers(2)],
            10,
        ),
        s(
            "controllers-away",
            "SIGKILL every controller for 30 s, twice the lease and margin: the agents keep every job on each other's word",
            vec![Fault::KillAllControllers(30)],
            5,
        ),
        s(
            "restart-controller",
            "stop a controller (SIGTERM) and start it from its disk",
            vec![Fault::RestartController],
            6,
        ),
        s(
            "kill-agent",
            "SIGKILL a node's agent, restart it 3 s later",
            vec![Fault::KillAgent],
            8,
        ),
        s(
            "pause-agent",
            "SIGSTOP a node's agent for 18 s, past lease and margin: its watchdog kills its jobs before the leader runs them elsewhere",
            vec![Fault::PauseAgent(18)],
            6,
        ),
        s(
            "xid",
            "XID 79 (GPU lost) and XID 13 (application error) on GPUs jobs use",
            vec![Fault::XidCritical, Fault::XidApplication],
            5,
        ),
        s(
            "skew-follower",
            "restart a follower with its clock an hour fast, then slow, for 8 s each time",
            vec![Fault::SkewFollower(3600), Fault::SkewFollower(-3600)],
            5,
        ),
        risky(
            "skew-leader",
            "restart a follower with its clock an hour fast, then slow, and kill the leader until it leads, for 10 s each time: the others' clocks outvote it",
            vec![Fault::SkewLeader(3600), Fault::SkewLeader(-3600)],
            5,
        ),
        risky(
            "isolate-leader",
            "cut the leader off from the other controllers and the agents for 12 s (past the lease)",
            vec![Fault::IsolateLeader(12)],
            6,
        ),
        risky(
            "partition",
            "random halves, a bridge, a ring (5 controllers), and an agent cut off from the controllers for 5 s or 20 s",
            vec![
                Fault::Halves(12),
                Fault::Bridge(12),
                Fault::Ring(12),
                Fault::IsolateAgent(5),
                Fault::IsolateAgent(20),
            ],
            5,
        ),
        s(
            "long-isolate-leader",
            "cut the leader off from the other controllers and the agents for 60 s (a switch reboot): it steps down and stays quiet, and rejoins at lag 0",
            vec![Fault::IsolateLeader(60)],
            5,
        ),
        s(
            "long-partition",
            "random halves, a bridge, or one agent cut off from the controllers, for 60 s",
            vec![
                Fault::Halves(60),
                Fault::Bridge(60),
                Fault::IsolateAgent(60),
            ],
            5,
        ),
        Scenario {
            matrix_s: None,
            ..s(
                "long-faults-300",
                "the leader cut off, random halves, a bridge or one agent cut off, for 300 s each (not in the CI matrix: --duration-s 1300 runs about four)",
                vec![
                    Fault::IsolateLeader(300),
                    Fault::Halves(300),
                    Fault::Bridge(300),
                    Fault::IsolateAgent(300),
                ],
                5,
            )
        },
        risky(
            "membership",
            "remove a controller (the leader, perhaps) from the voters and add it back 8 s later",
            vec![Fault::Membership(8)],
            5,
        ),
        s(
            "disk-stall",
            "throttle the leader's disk writes to 1 KiB/s for 8 s (a cgroup block-I/O limit): it is replaced",
            vec![Fault::StallLeaderDisk(8)],
            5,
        ),
        risky(
            "slow-disk",
            "throttle the leader's disk writes to 20 KiB/s for 20 s (fsyncs of 0.4-0.8 s): it stays leader",
            vec![Fault::SlowLeaderDisk(20)],
            5,
        ),
        risky(
            "mixed",
            "every fault above, in a seeded random order",
            vec![
                Fault::KillLeader,
                Fault::PauseLeader(3),
                Fault::KillController,
                Fault::KillAllControllers(2),
                Fault::KillAllControllers(30),
                Fault::RestartController,
                Fault::KillAgent,
                Fault::PauseAgent(18),
                Fault::SkewFollower(3600),
                Fault::SkewLeader(3600),
                Fault::IsolateLeader(12),
                Fault::Halves(12),
                Fault::Bridge(12),
                Fault::IsolateAgent(20),
                Fault::Membership(8),
                Fault::StallLeaderDisk(8),
                Fault::SlowLeaderDisk(20),
                Fault::XidCritical,
                Fault::XidApplication,
            ],
            5,
        ),
        preempting(
            "preempt",
            "urgent-tier and high-QOS gangs preempt running trainers (some trap the notice and checkpoint, some ignore it and are killed), no other fault",
            vec![],
            10,
        ),
        preempting(
            "preempt-faults",
            "as preempt, with a fault right as a preemption begins: the leader killed, or a victim's agent",
            vec![
                Fault::KillLeaderAtPreemption,
                Fault::KillVictimAgentAtPreemption,
            ],
            2,
        ),
    ]
}

/// The scenario called `name`.
pub fn named(name: &str) -> Option<Scenario> {
    all().into_iter().find(|s| s.name == name)
}
