//! The preemption scenarios' urgent gangs: one client that, every 6 to 10 s
//! (the first after 4 to 6 s),
//! submits a gang wanting every GPU of most nodes, alternately in partition
//! `urgent` (a higher tier) and with QOS `high` (which preempts `normal`), so
//! whatever trainers run there are preempted. The gangs are short trainers
//! (2-4 s) that die of a notice (a `high` gang may itself be preempted by an
//! `urgent` one). Seeded like the other clients.

use std::sync::atomic::Ordering;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::trainer::{self, OnNotice};
use crate::workload::{Shared, submit_script};

/// GPUs of a node of the preemption site: a gang takes them all.
const GPUS_PER_NODE: u32 = 8;

/// Submits gangs as client `process` until `shared.stop`.
pub fn run(process: u32, seed: u64, shared: &Shared<'_>) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x7072_6565_6d70_7400);
    let all = shared.cluster.nodes.len().max(1) as u32;
    let mut urgent = true;
    // The first soon (4-6 s: trainers run by then, past their exemption),
    // so that even a short run preempts.
    let mut range = 4_000..=6_000;
    loop {
        let pause = Duration::from_millis(rng.random_range(range.clone()));
        range = 6_000..=10_000;
        if wait(pause, shared) {
            return;
        }
        let op = shared.next_op.fetch_add(1, Ordering::SeqCst);
        let name = format!("u{op}");
        let nodes = rng.random_range(all.saturating_sub(1).max(1)..=all);
        let steps = rng.random_range(20..=40);
        let sbatch: &[&str] = if urgent {
            &["-p urgent"]
        } else {
            &["--qos=high"]
        };
        urgent = !urgent;
        let script = trainer::batch_script(
            &name,
            (nodes, GPUS_PER_NODE),
            (steps, 10),
            &shared.run_dir,
            (
                shared.cluster.job_path.as_deref(),
                &shared.cluster.job_corral,
            ),
            (OnNotice::Die, sbatch),
        );
        submit_script(
            shared,
            (process, op),
            &name,
            (nodes, GPUS_PER_NODE),
            &script,
        );
    }
}

/// Waits `time`, waking early for the stop; true when stopped.
fn wait(time: Duration, shared: &Shared<'_>) -> bool {
    let until = std::time::Instant::now() + time;
    while std::time::Instant::now() < until {
        if shared.stop.load(Ordering::SeqCst) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    shared.stop.load(Ordering::SeqCst)
}
