//! Clock skew faults: a controller restarted with its clock off (libfaketime
//! on a local cluster), and, for a skewed leader, the controller so started
//! brought to lead by killing whoever leads instead until it wins an
//! election (which of the others wins is the election's, so it may take a
//! few).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::cluster::Cluster;
use crate::control::{Act, Control};

const FAKETIME_LIBRARIES: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
];

/// Leaders killed, at most, for the skewed controller to win an election
/// (each time it has one chance in two or better: 1 in 64 never wins).
const MOST_ELECTIONS: u32 = 6;

/// How long a step (a new leader, every replica caught up) may take.
const STEP_DEADLINE: Duration = Duration::from_secs(20);

/// Tries at starting a killed leader again.
const START_TRIES: u32 = 3;

/// libfaketime's library, where installed.
pub fn faketime_library() -> anyhow::Result<&'static str> {
    FAKETIME_LIBRARIES
        .iter()
        .copied()
        .find(|p| std::path::Path::new(p).exists())
        .context("libfaketime is not installed (apt-get install faketime)")
}

/// Restarts controller `name` with its wall clock `seconds` off (its
/// monotonic clock true).
pub fn restart_skewed(control: &Control, name: &str, seconds: i64) -> anyhow::Result<()> {
    let library = faketime_library()?;
    control.act(Act::Kill, name)?;
    control.start_with_env(
        name,
        &[
            format!("LD_PRELOAD={library}"),
            format!("FAKETIME={seconds:+}s"),
            "FAKETIME_DONT_FAKE_MONOTONIC=1".into(),
        ],
    )
}

/// Kills the leader (starting it again once another leads) until controller
/// `id` leads, every replica caught up first each time so that `id` can win.
/// Returns the leaders killed; an error when `id` did not win in
/// [`MOST_ELECTIONS`] or the cluster stopped electing.
pub fn bring_to_lead(cluster: &Cluster, id: u64) -> anyhow::Result<u32> {
    for killed in 0..MOST_ELECTIONS {
        let view = poll(
            STEP_DEADLINE,
            "every replica caught up with a leader",
            || {
                cluster
                    .leader_view()
                    .filter(|v| v.members.iter().all(|m| v.caught_up.contains(m)))
            },
        )?;
        if view.leader == id {
            return Ok(killed);
        }
        // The leader and every other controller but `id` killed together,
        // those others started again at once: `id`, campaigning already, is
        // the one they vote for (a lower id goes first on a tie, so killing
        // the leader alone may never let `id` win).
        let lost = format!("controller-{}", view.leader);
        let others: Vec<String> = view
            .members
            .iter()
            .filter(|m| **m != id && **m != view.leader)
            .map(|m| format!("controller-{m}"))
            .collect();
        cluster.control.act(Act::Kill, &lost)?;
        for other in &others {
            cluster.control.act(Act::Kill, other)?;
        }
        for other in &others {
            start_again(&cluster.control, other)?;
        }
        let next = poll(STEP_DEADLINE, "a new leader", || {
            cluster.leader().filter(|(l, _)| *l != view.leader)
        });
        // Started again whatever happened, so the fault heals to three.
        start_again(&cluster.control, &lost)?;
        next?;
    }
    bail!("controller {id} did not win any of {MOST_ELECTIONS} elections")
}

/// Starts killed controller `name`, trying [`START_TRIES`] times a second
/// apart: a controller left down would shrink every later fault's cluster.
fn start_again(control: &Control, name: &str) -> anyhow::Result<()> {
    let mut last = None;
    for _ in 0..START_TRIES {
        match control.act(Act::Start, name) {
            Ok(()) => return Ok(()),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    Err(last.map_or_else(
        || anyhow::anyhow!("{name} was not started"),
        |e| {
            e.context(format!(
                "{name} could not be started again after {START_TRIES} tries"
            ))
        },
    ))
}

/// Polls `look` every 200 ms until it finds something or `deadline` passes.
fn poll<T>(
    deadline: Duration,
    what: &str,
    mut look: impl FnMut() -> Option<T>,
) -> anyhow::Result<T> {
    let until = Instant::now() + deadline;
    loop {
        if let Some(found) = look() {
            return Ok(found);
        }
        if Instant::now() >= until {
            bail!("no {what} within {} s", deadline.as_secs());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
