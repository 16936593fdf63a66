//! What really runs on each GPU of a local cluster, read from `/proc`: every
//! live process whose environment names a job attempt (`SLURM_JOB_ID`,
//! `CORRAL_ATTEMPT`), its node (`SLURMD_NODENAME`) and its GPUs
//! (`CUDA_VISIBLE_DEVICES`). Two attempts on one GPU at one look is a GPU
//! given twice, whatever the controllers' state says. Only the jobs submitted
//! from the benchmark's cluster directory count (`SLURM_SUBMIT_DIR`): another
//! local cluster on the same machine names its nodes `gpu01`... too.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A job attempt: (job id, attempt number).
pub type AttemptKey = (u64, u32);

/// The attempts seen on each (node, GPU).
pub type Occupancy = BTreeMap<(String, u32), BTreeSet<AttemptKey>>;

/// Looks once, at the jobs submitted from under `submitted_under`.
pub fn look(submitted_under: &std::path::Path) -> Occupancy {
    let mut occupancy = Occupancy::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return occupancy;
    };
    for entry in entries.flatten() {
        let is_pid = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        if !is_pid {
            continue;
        }
        // A process may end while we look: skip what cannot be read.
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let Some(process) = JobProcess::from_environ(&environ) else {
            continue;
        };
        if !process
            .submit_dir
            .as_deref()
            .is_some_and(|dir| std::path::Path::new(dir).starts_with(submitted_under))
        {
            continue;
        }
        let zombie = std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start())
                .is_some_and(|state| state.starts_with('Z') || state.starts_with('X'))
        });
        if zombie {
            continue;
        }
        for gpu in process.gpus {
            occupancy
                .entry((process.node.clone(), gpu))
                .or_default()
                .insert(process.attempt);
        }
    }
    occupancy
}

/// The job variables of one process.
struct JobProcess {
    attempt: AttemptKey,
    node: String,
    gpus: Vec<u32>,
    submit_dir: Option<String>,
}

impl JobProcess {
    fn from_environ(environ: &[u8]) -> Option<JobProcess> {
        let mut job = None;
        let mut attempt = None;
        let mut node = None;
        let mut gpus = Vec::new();
        let mut submit_dir = None;
        for entry in environ.split(|b| *b == 0) {
            let Ok(entry) = std::str::from_utf8(entry) else {
                continue;
            };
            let Some((name, value)) = entry.split_once('=') else {
                continue;
            };
            match name {
                "SLURM_JOB_ID" => job = value.parse().ok(),
                "CORRAL_ATTEMPT" => attempt = value.parse().ok(),
                "SLURMD_NODENAME" => node = Some(value.to_string()),
                "SLURM_SUBMIT_DIR" => submit_dir = Some(value.to_string()),
                "CUDA_VISIBLE_DEVICES" => {
                    gpus = value.split(',').filter_map(|g| g.parse().ok()).collect();
                }
                _ => {}
            }
        }
        Some(JobProcess {
            attempt: (job?, attempt?),
            node: node?,
            gpus,
            submit_dir,
        })
    }
}

/// What a watcher saw.
#[derive(Debug, Default)]
pub struct Findings {
    /// Looks taken.
    pub looks: u64,
    /// Each GPU seen held by two attempts or more, with when (since the
    /// watcher started) and by whom.
    pub double_booked: Vec<(Duration, String, u32, BTreeSet<AttemptKey>)>,
}

/// Looks every `every` on a thread of its own until stopped.
pub struct Watcher {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Findings>,
}

impl Watcher {
    /// Starts looking at the jobs submitted from under `submitted_under`.
    pub fn start(every: Duration, submitted_under: std::path::PathBuf) -> Watcher {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let started = Instant::now();
                let mut findings = Findings::default();
                while !stop.load(Ordering::Relaxed) {
                    let occupancy = look(&submitted_under);
                    findings.looks += 1;
                    for ((node, gpu), attempts) in occupancy {
                        if attempts.len() > 1 {
                            findings
                                .double_booked
                                .push((started.elapsed(), node, gpu, attempts));
                        }
                    }
                    std::thread::sleep(every);
                }
                findings
            })
        };
        Watcher { stop, thread }
    }

    /// Stops and returns what it saw.
    pub fn stop(self) -> Findings {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_process_is_read_from_its_environment() {
        let env = b"PATH=/bin\0SLURM_JOB_ID=12\0CORRAL_ATTEMPT=2\0SLURMD_NODENAME=gpu03\0CUDA_VISIBLE_DEVICES=4,5\0";
        let process = JobProcess::from_environ(env).expect("a job process");
        assert_eq!(process.attempt, (12, 2));
        assert_eq!(process.node, "gpu03");
        assert_eq!(process.gpus, vec![4, 5]);
        assert!(JobProcess::from_environ(b"PATH=/bin\0SLURM_JOB_ID=12\0").is_none());
    }
}
