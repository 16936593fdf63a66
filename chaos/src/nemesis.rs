//! The faults: each one begun, held, and healed, and recorded as such. Run
//! by one thread on a seeded schedule, so a scenario and seed give the same
//! sequence of fault kinds (their targets follow the cluster: "the leader"
//! is whoever leads then).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use corral_jepsen::history::EventKind;
use nix::sys::signal::Signal;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::cluster::Cluster;
use crate::recorder::Recorder;

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL the leader; start it again after two seconds.
    KillLeader,
    /// SIGKILL a controller picked at random; start it again after two seconds.
    KillController,
    /// SIGKILL every controller; start them again after two seconds.
    KillAllControllers,
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
    /// XID 79 (fallen off the bus) on a GPU a job uses: the job is killed
    /// everywhere and requeued, the GPU drained.
    XidCritical,
    /// XID 13 (an application error): the job is requeued, the GPU stays.
    XidApplication,
}

impl Fault {
    /// Its name in histories and on the command line.
    pub fn name(self) -> String {
        match self {
            Fault::KillLeader => "kill-leader".into(),
            Fault::KillController => "kill-controller".into(),
            Fault::KillAllControllers => "kill-all-controllers".into(),
            Fault::RestartController => "restart-controller".into(),
            Fault::PauseLeader(s) => format!("pause-leader-{s}s"),
            Fault::KillAgent => "kill-agent".into(),
            Fault::PauseAgent(s) => format!("pause-agent-{s}s"),
            Fault::SkewFollower(s) => format!("skew-follower{s:+}s"),
            Fault::XidCritical => "xid-79".into(),
            Fault::XidApplication => "xid-13".into(),
        }
    }
}

/// Injects faults from `kinds`, one every `interval` (± a quarter), until
/// `stop`; each is healed before the next begins.
pub fn run(
    cluster: &Cluster,
    recorder: &Recorder,
    (kinds, interval, seed): (&[Fault], Duration, u64),
    stop: &AtomicBool,
) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6e65_6d65_7369_7300);
    let ids = AtomicU64::new(1);
    if kinds.is_empty() {
        return;
    }
    loop {
        let quarter = interval.as_millis() as u64 / 4;
        let pause = interval.as_millis() as u64 - quarter + rng.random_range(0..=2 * quarter);
        if sleep_unless_stopped(Duration::from_millis(pause), stop) {
            return;
        }
        let fault = kinds[rng.random_range(0..kinds.len())];
        let id = ids.fetch_add(1, Ordering::SeqCst);
        if let Err(e) = inject(cluster, recorder, fault, id, &mut rng) {
            recorder.record(EventKind::FaultSkipped {
                kind: fault.name(),
                reason: format!("{e:#}"),
            });
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
const FAKETIME_LIBRARIES: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
];

fn controller(id: u64) -> String {
    format!("controller-{id}")
}

fn inject(
    cluster: &Cluster,
    recorder: &Recorder,
    fault: Fault,
    id: u64,
    rng: &mut StdRng,
) -> anyhow::Result<()> {
    let begin = |target: &str| {
        recorder.record(EventKind::FaultBegin {
            fault: id,
            kind: fault.name(),
            target: target.to_string(),
        });
    };
    let healed = || {
        recorder.record(EventKind::FaultHealed { fault: id });
    };
    let leader = || -> anyhow::Result<String> {
        let (leader, _) = cluster.leader().context("no controller names a leader")?;
        Ok(controller(leader))
    };
    match fault {
        Fault::KillLeader | Fault::KillController => {
            let target = if fault == Fault::KillLeader {
                leader()?
            } else {
                controller(rng.random_range(1..=u64::from(cluster.controllers)))
            };
            begin(&target);
            cluster.signal(&target, Signal::SIGKILL)?;
            std::thread::sleep(Duration::from_secs(2));
            cluster.start(&target)?;
            healed();
        }
        Fault::KillAllControllers => {
            begin("every controller");
            for i in 1..=u64::from(cluster.controllers) {
                cluster.signal(&controller(i), Signal::SIGKILL)?;
            }
            std::thread::sleep(Duration::from_secs(2));
            for i in 1..=u64::from(cluster.controllers) {
                cluster.start(&controller(i))?;
            }
            healed();
        }
        Fault::RestartController => {
            let target = controller(rng.random_range(1..=u64::from(cluster.controllers)));
            begin(&target);
            cluster.signal(&target, Signal::SIGTERM)?;
            wait_gone(cluster, &target, Duration::from_secs(20))?;
            cluster.start(&target)?;
            healed();
        }
        Fault::PauseLeader(seconds) => {
            let target = leader()?;
            begin(&target);
            cluster.signal(&target, Signal::SIGSTOP)?;
            std::thread::sleep(Duration::from_secs(seconds));
            cluster.signal(&target, Signal::SIGCONT)?;
            healed();
        }
        Fault::KillAgent => {
            let node = &cluster.nodes[rng.random_range(0..cluster.nodes.len())];
            let target = format!("agent-{node}");
            begin(&target);
            cluster.signal(&target, Signal::SIGKILL)?;
            std::thread::sleep(Duration::from_secs(3));
            cluster.start(&target)?;
            healed();
        }
        Fault::PauseAgent(seconds) => {
            let node = &cluster.nodes[rng.random_range(0..cluster.nodes.len())];
            let target = format!("agent-{node}");
            begin(&target);
            cluster.signal(&target, Signal::SIGSTOP)?;
            std::thread::sleep(Duration::from_secs(seconds));
            cluster.signal(&target, Signal::SIGCONT)?;
            healed();
        }
        Fault::SkewFollower(seconds) => {
            let library = FAKETIME_LIBRARIES
                .iter()
                .find(|p| std::path::Path::new(p).exists())
                .context("libfaketime is not installed (apt-get install faketime)")?;
            let (leader, _) = cluster.leader().context("no controller names a leader")?;
            let followers: Vec<u64> = (1..=u64::from(cluster.controllers))
                .filter(|id| *id != leader)
                .collect();
            if followers.is_empty() {
                anyhow::bail!("no follower to skew");
            }
            let target = controller(followers[rng.random_range(0..followers.len())]);
            begin(&target);
            cluster.signal(&target, Signal::SIGKILL)?;
            wait_gone(cluster, &target, Duration::from_secs(20))?;
            cluster.start_with_env(
                &target,
                &[
                    format!("LD_PRELOAD={library}"),
                    format!("FAKETIME={seconds:+}s"),
                    "FAKETIME_DONT_FAKE_MONOTONIC=1".into(),
                ],
            )?;
            std::thread::sleep(Duration::from_secs(8));
            cluster.signal(&target, Signal::SIGKILL)?;
            wait_gone(cluster, &target, Duration::from_secs(20))?;
            cluster.start(&target)?;
            healed();
        }
        Fault::XidCritical | Fault::XidApplication => {
            let xid = if fault == Fault::XidCritical { 79 } else { 13 };
            let (node, gpu) = gpu_in_use(cluster, rng)?;
            begin(&format!("{node} GPU {gpu}"));
            cluster.xid(&node, gpu, xid)?;
            healed();
        }
    }
    Ok(())
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

fn wait_gone(cluster: &Cluster, name: &str, patience: Duration) -> anyhow::Result<()> {
    let until = Instant::now() + patience;
    while cluster.alive(name) {
        if Instant::now() > until {
            anyhow::bail!("{name} did not stop within {patience:?} of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}
