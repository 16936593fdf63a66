//! End to end, preemption with requeue on a local cluster of real processes
//! (`corral local up --config SITE`): a partition `gpu` whose jobs are
//! requeued when preempted, and `urgent`, a higher tier. Three victims of one
//! node each step and commit checkpoints (`corral checkpoint`) until they are
//! preempted, each hearing of it its own way:
//!
//! - a bash script without a trap, which dies at the SIGTERM that ends the
//!   grace (the batch shell gets no notice: Slurm signals only steps);
//! - a bash script with `--signal=B:TERM@60` (and the controllers'
//!   `preempt_send_user_signal`) whose trap commits its current step and exits
//!   at the notice;
//! - a submitit job (`submitit.SlurmExecutor`, driving `sbatch`, `sacct`,
//!   `srun` and `scontrol requeue` through the links of `corral shims`), whose
//!   USR2 handler pickles its `Checkpointable` and requeues the job.
//!
//! An urgent job that needs every node preempts all three. Each victim's first
//! attempt ends requeued (never FAILED), the next resumes from the checkpoint
//! committed before (`CORRAL_RESUME_FROM`; submitit's own counter too) and the
//! job completes; the urgent job starts only once the victims' processes are
//! gone. Without python3 and submitit (`.ci/run` installs it) the submitit
//! victim is left out, and the cluster has a node less.
//!
//! `CORRAL_E2E_BIN_DIR=DIR` runs the cluster with another build's `corral`,
//! `corrald` and `corral-agent` (to check that the test fails on a build
//! without the feature).

#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{LocalCluster, corral_bin, wait_job};

/// Steps between two committed checkpoints (in every victim; the submitit
/// fixture says the same).
const COMMIT_EVERY: u64 = 3;

/// Steps an attempt after the first takes before it ends (as above).
const STEPS_AFTER_RESUME: u64 = 15;

/// A batch script that steps every 0.2 s, commits a checkpoint every `EVERY`
/// steps, and resumes from `$CORRAL_RESUME_FROM`; `NAME`, `EXTRA_OPTIONS`
/// (more `#SBATCH` options), `TRAP` and the numbers filled in by
/// `victim_script`.
const VICTIM: &str = r#"#!/bin/bash
#SBATCH --requeue --gres=gpu:8 -N 1 -J NAME EXTRA_OPTIONS
log="$SLURM_SUBMIT_DIR/NAME.log"
attempt=$((${SLURM_RESTART_COUNT:-0} + 1))
echo $$ > "$SLURM_SUBMIT_DIR/pids/NAME-$attempt"
step=0
if [ -n "$CORRAL_RESUME_FROM" ]; then step=$(cat "$CORRAL_RESUME_FROM"); fi
# The first attempt runs until it is preempted; a later one ends AFTER steps on.
if [ "$attempt" -gt 1 ]; then last=$((step + AFTER)); else last=100000; fi
echo "start attempt=$attempt step=$step resume=${CORRAL_RESUME_FROM:-none}" >> "$log"
commit() {
  f="$CORRAL_CHECKPOINT_DIR/step-$step"
  echo "$step" > "$f"
  corral checkpoint --step "$step" --path "$f" > /dev/null && echo "committed $step" >> "$log"
}
TRAP
while [ "$step" -lt "$last" ]; do
  step=$((step + 1))
  echo "step $step $(date +%s%3N)" >> "$log"
  if [ $((step % EVERY)) -eq 0 ]; then commit; fi
  sleep 0.2
done
echo "done $step" >> "$log"
"#;

/// The trap of the second victim: commit the step it is at, and stop.
const TRAP: &str = r#"on_term() {
  echo "trap $step $(date +%s%3N)" >> "$log"
  commit
  exit 0
}
trap on_term TERM"#;

/// The preemptor: when it starts, whether each first attempt's processes
/// (their pids, written by the victims) are gone.
const URGENT: &str = r#"#!/bin/bash
#SBATCH -p urgent --gres=gpu:8 -J urgent
now=$(date +%s%3N)
log="$SLURM_SUBMIT_DIR/urgent.log"
for f in "$SLURM_SUBMIT_DIR"/pids/*-1; do
  if kill -0 "$(cat "$f")" 2> /dev/null; then
    echo "alive $(basename "$f")" >> "$log"
  else
    echo "gone $(basename "$f")" >> "$log"
  fi
done
echo "start $now" >> "$log"
"#;

fn victim_script(name: &str, options: &str, trap: &str) -> String {
    VICTIM
        .replace("NAME", name)
        .replace("EXTRA_OPTIONS", options)
        .replace("TRAP", trap)
        .replace("AFTER", &STEPS_AFTER_RESUME.to_string())
        .replace("EVERY", &COMMIT_EVERY.to_string())
}

/// The site: `nodes` nodes of 8 GPUs, `gpu` requeues its preempted jobs,
/// `urgent` preempts it; a 5 s grace, no exemption, user signals on.
fn site(nodes: usize) -> String {
    format!(
        r#"cluster_name = "preempt"

[leader]
kill_wait = "00:00:02"
preempt_send_user_signal = true

[scheduling]
preempt_exempt = "00:00:00"
preempt_grace = "00:00:05"

[[nodes]]
names = "gpu[01-0{nodes}]"
cpus = 16
memory = "64G"
gpus = 8
gpu_type = "h100"

[[partitions]]
name = "gpu"
nodes = "gpu[01-0{nodes}]"
default = true
preempt_mode = "requeue"

[[partitions]]
name = "urgent"
nodes = "gpu[01-0{nodes}]"
priority_tier = 10
"#
    )
}

/// `corral local up --config SITE` (`$CORRAL_E2E_BIN_DIR`'s build, where set).
fn start_cluster(site: &Path) -> LocalCluster {
    LocalCluster::start_with_args(3, &["--config", site.to_str().unwrap()])
}

/// The environment of a user's shell on the cluster: the `corral shims`
/// directory first on PATH, then the cluster's `bin/` (for `corral` itself),
/// and the variables of the cluster's `env` file.
struct UserShell {
    env: Vec<(String, String)>,
    shims: PathBuf,
    work: PathBuf,
}

impl UserShell {
    fn new(cluster: &LocalCluster) -> UserShell {
        let dir = cluster.dir.path();
        let work = dir.join("work");
        std::fs::create_dir_all(work.join("pids")).unwrap();
        let shims = dir.join("shims");
        let corral = std::fs::read_link(dir.join("bin/corral")).unwrap_or_else(|_| corral_bin());
        let out = Command::new(&corral)
            .arg("shims")
            .arg(&shims)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "corral shims: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let path = std::env::var("PATH").unwrap_or_default();
        let mut env = vec![(
            "PATH".to_string(),
            format!("{}:{}:{path}", shims.display(), dir.join("bin").display()),
        )];
        let file = std::fs::read_to_string(dir.join("env")).unwrap();
        for line in file.lines() {
            let Some((key, value)) = line
                .strip_prefix("export ")
                .and_then(|pair| pair.split_once('='))
            else {
                continue;
            };
            if key.starts_with("CORRAL_") {
                env.push((key.to_string(), value.to_string()));
            }
        }
        assert!(
            env.iter().any(|(key, _)| key == "CORRAL_CERT"),
            "no CORRAL_CERT in the cluster's env file: {file}"
        );
        UserShell { env, shims, work }
    }

    /// `program ARGS` in the work directory with this environment.
    fn command(&self, program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Command {
        let mut command = Command::new(program);
        command
            .args(args)
            .env_remove("CORRAL_CONFIG")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.work);
        for variable in ["SQUEUE_FORMAT", "SACCT_FORMAT", "SLURM_JOB_ID"] {
            command.env_remove(variable);
        }
        command
    }

    /// `sbatch --parsable ARGS`: the job id.
    fn sbatch(&self, args: &[&str]) -> String {
        let out = self
            .command(self.shims.join("sbatch"), &[&["--parsable"], args].concat())
            .output()
            .unwrap();
        succeeded(&out, &format!("sbatch {args:?}"))
            .trim()
            .to_string()
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.work.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.work.join(format!("{name}.log"))).unwrap_or_default()
    }

    /// Every victim's and the preemptor's log, for failure messages.
    fn logs(&self) -> String {
        let mut text = String::new();
        for name in ["plain", "trap", "submitit", "urgent"] {
            text.push_str(&format!("== {name}.log\n{}", self.log(name)));
        }
        text
    }
}

fn succeeded(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Why submitit cannot run here, if it cannot.
fn submitit_missing() -> Option<String> {
    match Command::new("python3")
        .args(["-c", "import submitit; print(submitit.__version__)"])
        .output()
    {
        Err(error) => Some(format!("python3 cannot run: {error}")),
        Ok(out) if !out.status.success() => Some(format!(
            "python3 cannot import submitit (python3 -m pip install submitit): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Ok(_) => None,
    }
}

/// The submitit driver, running: its job id, and its process (which prints
/// `result N` once submitit sees the job done).
struct Submitit {
    id: String,
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Submitit {
    fn submit(shell: &UserShell) -> Submitit {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/preemption/submitit_victim.py");
        let work = shell.work.display().to_string();
        let mut child = shell
            .command(
                "python3",
                &[
                    fixture.to_str().unwrap(),
                    &format!("{work}/submitit"),
                    &format!("{work}/submitit.log"),
                    &format!("{work}/pids"),
                ],
            )
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(shell.work.join("driver.err")).unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let id = match lines.recv_timeout(Duration::from_secs(60)) {
            Ok(id) => id,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "submitit printed no job id within 60 s: {}",
                    std::fs::read_to_string(shell.work.join("driver.err")).unwrap_or_default()
                );
            }
        };
        assert!(id.parse::<u64>().is_ok(), "submitit's job id: {id:?}");
        Submitit { id, child, lines }
    }

    /// What `job.result()` returned, once the driver has it.
    fn result(&mut self, shell: &UserShell, patience: Duration) -> u64 {
        let line = self.lines.recv_timeout(patience);
        let errors = std::fs::read_to_string(shell.work.join("driver.err")).unwrap_or_default();
        let line = line.unwrap_or_else(|_| {
            panic!("submitit's job.result() did not return within {patience:?}: {errors}")
        });
        line.strip_prefix("result ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("submitit's driver printed {line:?}: {errors}"))
    }
}

impl Drop for Submitit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One attempt's lines of a victim's log (from its `start` line on).
#[derive(Debug, Default)]
struct AttemptLog {
    /// The step it started from.
    start_step: u64,
    /// `CORRAL_RESUME_FROM`, `none` without.
    resume: String,
    /// The last step it logged as committed.
    last_committed: Option<u64>,
    /// When it was last heard of (ms): a step, the trap, submitit's checkpoint.
    last_seen_ms: u64,
    /// `trap N T` / `checkpoint N T`: the step and when.
    notice: Option<(u64, u64)>,
    /// `done N`.
    done: Option<u64>,
}

fn attempts_in(log: &str) -> Vec<AttemptLog> {
    let mut attempts: Vec<AttemptLog> = Vec::new();
    for line in log.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let number = |i: usize| words.get(i).and_then(|w| w.parse::<u64>().ok());
        if words.first() == Some(&"start") {
            let field = |key: &str| {
                words
                    .iter()
                    .find_map(|w| w.strip_prefix(key))
                    .unwrap_or_default()
                    .to_string()
            };
            attempts.push(AttemptLog {
                start_step: field("step=").parse().unwrap(),
                resume: field("resume="),
                ..AttemptLog::default()
            });
            continue;
        }
        let attempt = attempts.last_mut().unwrap();
        match (words.first().copied(), number(1), number(2)) {
            (Some("step"), Some(_), Some(at)) => attempt.last_seen_ms = at,
            (Some("committed"), Some(step), _) => attempt.last_committed = Some(step),
            (Some("trap" | "checkpoint"), Some(step), Some(at)) => {
                attempt.notice = Some((step, at));
                attempt.last_seen_ms = at;
            }
            (Some("done"), Some(step), _) => attempt.done = Some(step),
            _ => panic!("unexpected log line {line:?} in\n{log}"),
        }
    }
    attempts
}

/// Waits until each of `names`' logs shows a committed checkpoint.
fn wait_for_commits(shell: &UserShell, names: &[&str]) {
    let patience = Duration::from_secs(90);
    let deadline = Instant::now() + patience;
    loop {
        let pending: Vec<&&str> = names
            .iter()
            .filter(|name| !shell.log(name).contains("committed "))
            .collect();
        if pending.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{pending:?} committed no checkpoint within {patience:?}\n{}",
            shell.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn number(value: &Value) -> u64 {
    value.as_u64().unwrap()
}

#[test]
fn preempted_jobs_are_requeued_and_resume_from_their_checkpoints() {
    let began = Instant::now();
    let submitit = match submitit_missing() {
        None => true,
        Some(why) => {
            eprintln!("the submitit victim is left out: {why}");
            false
        }
    };
    let victims = if submitit { 3 } else { 2 };
    let site_dir = tempfile::tempdir().unwrap();
    let site_file = site_dir.path().join("site.toml");
    std::fs::write(&site_file, site(victims)).unwrap();
    let cluster = start_cluster(&site_file);
    let shell = UserShell::new(&cluster);

    let plain = shell.write("plain.sh", &victim_script("plain", "", ""));
    let trap = shell.write(
        "trap.sh",
        &victim_script("trap", "--signal=B:TERM@60", TRAP),
    );
    let mut jobs = vec![
        ("plain", shell.sbatch(&[plain.to_str().unwrap()])),
        ("trap", shell.sbatch(&[trap.to_str().unwrap()])),
    ];
    let mut driver = submitit.then(|| {
        let driver = Submitit::submit(&shell);
        jobs.push(("submitit", driver.id.clone()));
        driver
    });
    let names: Vec<&str> = jobs.iter().map(|(name, _)| *name).collect();
    for (name, id) in &jobs {
        wait_job(&cluster, id, Duration::from_secs(90), "start", |j| {
            j["state"] == "Running"
        });
        eprintln!("{name} is job {id}");
    }
    wait_for_commits(&shell, &names);

    // One urgent job needs every node: all three are preempted.
    let urgent_script = shell.write("urgent.sh", URGENT);
    let nodes = format!("-N{victims}");
    let urgent = shell.sbatch(&[&nodes, urgent_script.to_str().unwrap()]);
    let urgent_job = wait_job(&cluster, &urgent, Duration::from_secs(90), "end", |j| {
        !j["ended_at"].is_null()
    });
    assert_eq!(urgent_job["state"], "Completed", "{urgent_job}");
    let urgent_started = number(&urgent_job["attempts"][0]["started_at"]);

    let mut finished = Vec::new();
    for (name, id) in &jobs {
        let job = wait_job(&cluster, id, Duration::from_secs(90), "end", |j| {
            !j["ended_at"].is_null()
        });
        finished.push((*name, id.clone(), job));
    }

    let log = shell.log("urgent");
    let urgent_log_start: u64 = log
        .lines()
        .find_map(|l| l.strip_prefix("start "))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("the urgent job logged no start: {log}"));
    assert!(
        !log.contains("alive"),
        "the urgent job started while a victim's processes ran:\n{}",
        shell.logs()
    );
    let pids_checked = log.lines().filter(|l| l.starts_with("gone ")).count();
    let expected_pids = if submitit { 4 } else { 2 };
    assert_eq!(pids_checked, expected_pids, "{}", shell.logs());

    for (name, id, job) in &finished {
        let context = format!("{name} (job {id}): {job}\n{}", shell.logs());
        // Preempted by the urgent job, its first attempt requeued, not FAILED.
        assert_eq!(job["state"], "Completed", "{context}");
        let attempts = job["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 2, "{context}");
        let first = &attempts[0];
        assert_eq!(
            first["preemption"]["for_job"].to_string(),
            urgent,
            "{context}"
        );
        assert_eq!(first["end"]["state"], "Requeued", "{context}");
        let cause = &first["end"]["cause"];
        if *name == "submitit" {
            // submitit's handler runs `scontrol requeue` within the grace:
            // requeued as asked, as on Slurm (REQUEUED).
            assert!(!cause["RequeueRequested"].is_null(), "{context}");
        } else {
            assert_eq!(
                cause["Preempted"]["for_job"].to_string(),
                urgent,
                "{context}"
            );
        }
        assert_eq!(job["requeue_count"], 1, "{context}");
        assert_eq!(attempts[1]["end"]["state"], "Completed", "{context}");
        // The urgent job ran on the victim's node only once it was free.
        assert!(urgent_started >= number(&first["end"]["at"]), "{context}");

        // The second attempt resumed from the checkpoint committed in the first.
        let committed = &first["checkpoint"];
        let committed_step = number(&committed["step"]);
        let log = shell.log(name);
        let runs = attempts_in(&log);
        assert_eq!(runs.len(), 2, "{context}");
        let (before, after) = (&runs[0], &runs[1]);
        let logged = before.last_committed.unwrap();
        assert!(committed_step >= logged, "{context}");
        assert_eq!(
            after.resume,
            committed["path"].as_str().unwrap(),
            "{context}"
        );
        assert!(after.resume.ends_with(&format!("step-{committed_step}")));
        assert!(before.done.is_none(), "{context}");
        assert!(after.done.is_some(), "{context}");
        assert!(committed_step >= COMMIT_EVERY, "{context}");
        // The victim was last heard of before the urgent job started.
        assert!(before.last_seen_ms <= urgent_log_start, "{context}");
        match *name {
            "plain" => assert_eq!(after.start_step, committed_step, "{context}"),
            "trap" => {
                // The trap ran at the notice, not at the end of the grace,
                // and committed the step it was at.
                let (step, at) = before
                    .notice
                    .unwrap_or_else(|| panic!("no trap: {context}"));
                assert_eq!(step, committed_step, "{context}");
                assert!(at < number(&first["preemption"]["deadline"]), "{context}");
                assert_eq!(after.start_step, committed_step, "{context}");
            }
            _ => {
                // submitit's own state: the counter went on from where its
                // checkpoint (at USR2) left it, at or past the committed step.
                let (step, _) = before
                    .notice
                    .unwrap_or_else(|| panic!("no submitit checkpoint: {context}"));
                assert_eq!(number(&first["preemption"]["signal"]), 12, "{context}");
                assert!(step >= committed_step, "{context}");
                assert_eq!(after.start_step, step, "{context}");
                // And `job.result()` is what the callable returned.
                let driver = driver.as_mut().unwrap();
                let result = driver.result(&shell, Duration::from_secs(60));
                assert_eq!(result, step + STEPS_AFTER_RESUME, "{context}");
            }
        }
        if *name != "submitit" {
            assert_eq!(
                after.done,
                Some(committed_step + STEPS_AFTER_RESUME),
                "{context}"
            );
        }
    }
    eprintln!("preemption test took {:?}", began.elapsed());
}
