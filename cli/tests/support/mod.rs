//! A local cluster of real `corrald` processes for end-to-end tests, driven
//! through the real `corral` binary (`corral local up` / `down`).
#![allow(clippy::unwrap_used, dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The corral binary under test.
pub fn corral_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_corral"))
}

/// The corrald binary beside it, built if this test run did not build it.
pub fn corrald_bin() -> PathBuf {
    sibling("corrald")
}

/// A workspace binary beside `corral`, built if this test run did not build it.
pub fn sibling(name: &str) -> PathBuf {
    let path = corral_bin().with_file_name(name);
    if !path.exists() {
        let profile_release = corral_bin().parent().unwrap().ends_with("release");
        let mut build = Command::new(env!("CARGO"));
        build.args(["build", "--bin", name]);
        if profile_release {
            build.arg("--release");
        }
        let status = build.status().unwrap();
        assert!(status.success(), "building {name} failed");
    }
    path
}

/// `corral` aimed at `cluster` with the CA `ca` and the certificate and key of
/// `principal` (`user-alice`) found in `certs`.
pub fn client(cluster: &str, ca: &Path, certs: &Path, principal: &str) -> Command {
    let mut command = Command::new(corral_bin());
    command
        .arg("--cluster")
        .arg(cluster)
        .arg("--ca")
        .arg(ca)
        .arg("--cert")
        .arg(certs.join(format!("{principal}.pem")))
        .arg("--key")
        .arg(certs.join(format!("{principal}.key")));
    command
}

/// A running local cluster; stopped (and its directory removed) on drop.
pub struct LocalCluster {
    pub dir: tempfile::TempDir,
    pub addresses: Vec<String>,
}

impl LocalCluster {
    /// `corral local up` with `controllers` replicas and `nodes` nodes, without
    /// agents (jobs queue; nothing runs them).
    pub fn start(controllers: u32, nodes: u32) -> LocalCluster {
        Self::start_with(controllers, nodes, false)
    }

    /// `corral local up` with agents (simulated GPUs) on every node.
    pub fn start_with_agents(controllers: u32, nodes: u32) -> LocalCluster {
        Self::start_with(controllers, nodes, true)
    }

    fn start_with(controllers: u32, nodes: u32, agents: bool) -> LocalCluster {
        let nodes = nodes.to_string();
        let mut args = vec!["--nodes", &nodes];
        if !agents {
            args.push("--no-agents");
        }
        Self::start_with_args(controllers, &args)
    }

    /// `corral local up` with `controllers` replicas and `args` (agents unless
    /// `--no-agents` is among them).
    ///
    /// `CORRAL_E2E_BIN_DIR=DIR` runs the cluster with the `corral`, `corrald`
    /// and `corral-agent` in DIR (another build's: to check that a test fails
    /// on a build without the feature it tests).
    pub fn start_with_args(controllers: u32, args: &[&str]) -> LocalCluster {
        Self::start_with_env(controllers, args, &[])
    }

    /// `start_with_args`, with `env` set for `corral local up` (and so for
    /// the daemons it starts).
    pub fn start_with_env(controllers: u32, args: &[&str], env: &[(&str, &str)]) -> LocalCluster {
        let (corrald, agent) = match std::env::var_os("CORRAL_E2E_BIN_DIR") {
            Some(dir) => {
                let dir = PathBuf::from(dir);
                (dir.join("corrald"), dir.join("corral-agent"))
            }
            None => (corrald_bin(), sibling("corral-agent")),
        };
        Self::start_with_daemons(controllers, (&corrald, &agent), args, env)
    }

    /// `start_with_env`, with the controllers and agents run from the
    /// binaries `daemons` names (`corrald`, `corral-agent`): another
    /// release's, for a cluster midway through an upgrade.
    pub fn start_with_daemons(
        controllers: u32,
        (corrald, agent): (&Path, &Path),
        args: &[&str],
        env: &[(&str, &str)],
    ) -> LocalCluster {
        let corral = match std::env::var_os("CORRAL_E2E_BIN_DIR") {
            Some(dir) => PathBuf::from(dir).join("corral"),
            None => corral_bin(),
        };
        let dir = tempfile::tempdir().unwrap();
        // `CORRAL_E2E_UNDER_NOHUP` among `env`: `corral local up`, and so
        // the daemons it starts, run with SIGHUP ignored, as under `nohup`.
        let mut up = if env.iter().any(|(key, _)| *key == "CORRAL_E2E_UNDER_NOHUP") {
            let mut nohup = Command::new("nohup");
            nohup.arg(corral);
            nohup
        } else {
            Command::new(corral)
        };
        let out = up
            .args(["--json", "local", "up", "--dir"])
            .arg(dir.path())
            .args(["--controllers", &controllers.to_string()])
            .arg("--corrald")
            .arg(corrald)
            .arg("--corral-agent")
            .arg(agent)
            .args(args)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "local up failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            logs(dir.path())
        );
        let reply: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let addresses = reply["cluster"]
            .as_str()
            .unwrap()
            .split(',')
            .map(String::from)
            .collect();
        LocalCluster { dir, addresses }
    }

    /// Runs `corral ARGS` as `principal` (a certificate name such as
    /// `user-alice` or `user-corral-admin`) against `cluster` addresses.
    pub fn corral_at(&self, principal: &str, cluster: &str, args: &[&str]) -> Output {
        let certs = self.dir.path().join("certs");
        client(cluster, &certs.join("ca.pem"), &certs, principal)
            .env_remove("CORRAL_CONFIG")
            .env("HOME", self.dir.path())
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .unwrap()
    }

    /// Runs `corral ARGS` as `principal` against every controller.
    pub fn corral(&self, principal: &str, args: &[&str]) -> Output {
        self.corral_at(principal, &self.addresses.join(","), args)
    }

    /// Like `corral`, but the command must succeed; returns stdout.
    pub fn ok(&self, principal: &str, args: &[&str]) -> String {
        let out = self.corral(principal, args);
        assert!(
            out.status.success(),
            "corral {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `corral cluster --json` as the admin.
    pub fn status(&self) -> serde_json::Value {
        serde_json::from_str(&self.ok("user-corral-admin", &["--json", "cluster"])).unwrap()
    }

    /// The leader's replica id, once one is known.
    pub fn leader(&self) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(id) = self.status()["leader"].as_u64() {
                return id;
            }
            assert!(Instant::now() < deadline, "no leader within 30 s");
            std::thread::yield_now();
        }
    }

    /// The pid of controller `id`.
    pub fn pid(&self, id: u64) -> i32 {
        let path = self.dir.path().join(format!("pids/controller-{id}.pid"));
        std::fs::read_to_string(path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// `corral local start NAME`: starts a stopped process of the cluster again.
    pub fn restart(&self, name: &str) {
        self.restart_with_env(name, &[]);
    }

    /// `corral local start NAME --env K=V...`: starts a stopped process again
    /// with extra environment (a skewed clock, say).
    pub fn restart_with_env(&self, name: &str, env: &[String]) {
        self.start_process(name, env, None);
    }

    /// `corral local start NAME --program PATH`: starts a stopped process
    /// again as another build (an upgrade of that one process).
    pub fn restart_as(&self, name: &str, program: &Path) {
        self.start_process(name, &[], Some(program));
    }

    fn start_process(&self, name: &str, env: &[String], program: Option<&Path>) {
        let out = Command::new(corral_bin())
            .args(["local", "start", "--dir"])
            .arg(self.dir.path())
            .arg(name)
            .args(env.iter().flat_map(|pair| ["--env", pair.as_str()]))
            .args(
                program
                    .iter()
                    .flat_map(|p| [std::ffi::OsStr::new("--program"), p.as_os_str()]),
            )
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "corral local start {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Every line of the agents' logs that contains `text`.
    pub fn agent_log_lines(&self, text: &str) -> Vec<String> {
        self.log_lines("agent-", text)
    }

    /// Every line of the controllers' logs that contains `text`.
    pub fn controller_log_lines(&self, text: &str) -> Vec<String> {
        self.log_lines("controller-", text)
    }

    /// Every line that contains `text` in the logs of the processes whose
    /// names start with `prefix`.
    fn log_lines(&self, prefix: &str, text: &str) -> Vec<String> {
        let mut lines = Vec::new();
        if let Ok(entries) = std::fs::read_dir(self.dir.path().join("logs")) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if !name.starts_with(prefix) {
                    continue;
                }
                let log = std::fs::read_to_string(entry.path()).unwrap_or_default();
                lines.extend(
                    log.lines()
                        .filter(|l| l.contains(text))
                        .map(|l| format!("{name}: {l}")),
                );
            }
        }
        lines
    }

    /// SIGKILLs controller `id`.
    pub fn kill(&self, id: u64) {
        let status = Command::new("kill")
            .args(["-9", &self.pid(id).to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// `corral local cut`: drops every packet between `one` and each of
    /// `from` (a cluster started with `--netns`).
    pub fn cut(&self, one: &str, from: &[String]) {
        self.local(&["cut", one, "--from", &from.join(",")]);
    }

    /// `corral local heal`: lifts every cut.
    pub fn heal(&self) {
        self.local(&["heal"]);
    }

    fn local(&self, args: &[&str]) {
        let out = Command::new(corral_bin())
            .arg("local")
            .arg(args[0])
            .arg("--dir")
            .arg(self.dir.path())
            .args(&args[1..])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "corral local {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The client address of controller `id`.
    pub fn api_of(&self, id: u64) -> String {
        let status = self.status();
        let members = status["members"].as_array().cloned().unwrap_or_default();
        members
            .iter()
            .find(|m| m["id"].as_u64() == Some(id))
            .and_then(|m| m["api"].as_str())
            .map(String::from)
            .unwrap_or_else(|| panic!("no controller {id} in {status}"))
    }

    /// Every job, as JSON records.
    pub fn jobs(&self) -> Vec<serde_json::Value> {
        let out = self.ok("user-corral-admin", &["--json", "queue", "-t", "all"]);
        serde_json::from_str::<Vec<serde_json::Value>>(&out).unwrap()
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        let _ = Command::new(corral_bin())
            .args(["local", "down", "--dir"])
            .arg(self.dir.path())
            .output();
    }
}

/// Why this machine cannot give a local cluster its own network
/// (`corral local up --netns`: root, `ip`, `iptables`, `nsenter`), if it cannot.
pub fn netns_unsupported() -> Option<String> {
    if !nix_is_root() {
        return Some("not root: network namespaces need root".into());
    }
    for program in ["ip", "iptables", "nsenter"] {
        if Command::new(program).arg("--version").output().is_err() {
            return Some(format!("`{program}` is not installed"));
        }
    }
    let probe = format!("crl-test-probe-{}", std::process::id());
    let made = Command::new("ip")
        .args(["netns", "add", &probe])
        .output()
        .is_ok_and(|out| out.status.success());
    if !made {
        return Some("this machine refuses to create network namespaces".into());
    }
    let _ = Command::new("ip").args(["netns", "del", &probe]).output();
    None
}

fn nix_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.trim_ascii() == b"0")
}

/// The controllers' logs, for failure messages.
pub fn logs(dir: &Path) -> String {
    let mut text = String::new();
    if let Ok(entries) = std::fs::read_dir(dir.join("logs")) {
        for entry in entries.flatten() {
            let log = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            text.push_str(&format!("== {}\n", entry.path().display()));
            for line in tail.into_iter().rev() {
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    text
}

/// Polls `corral show job --json` until `done` holds (or panics after `patience`).
pub fn wait_job(
    cluster: &LocalCluster,
    id: &str,
    patience: Duration,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + patience;
    loop {
        let out = cluster.corral("user-corral-admin", &["--json", "show", "job", id]);
        if out.status.success() {
            let reply: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            if done(&reply["job"]) {
                return reply["job"].clone();
            }
            if Instant::now() > deadline {
                panic!(
                    "job {id}: {what} did not happen within {patience:?}; job: {}\n{}",
                    reply["job"],
                    logs(cluster.dir.path())
                );
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The certificate name of the user running the tests (`user-NAME`).
pub fn me() -> String {
    let me = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    format!("user-{}", me.trim())
}

/// Jobs run as their user: submit as the user running the tests (the agents
/// run as that user too, or as root and switch to it).
pub fn submit(cluster: &LocalCluster, path: &Path) -> String {
    cluster
        .ok(&me(), &["submit", "--parsable", path.to_str().unwrap()])
        .trim()
        .to_string()
}

/// Submits `path` and waits until its first attempt started; returns the job id
/// and its batch host.
pub fn submit_and_start(cluster: &LocalCluster, path: &Path) -> (String, String) {
    let id = submit(cluster, path);
    let job = wait_job(cluster, &id, Duration::from_secs(60), "start", |j| {
        j["state"] == "Running"
            && j["attempts"][0]["started_on"]
                .as_array()
                .is_some_and(|s| !s.is_empty())
    });
    let node = job["attempts"][0]["allocation"][0]["node"]
        .as_str()
        .unwrap()
        .to_string();
    (id, node)
}

/// The pid a job wrote to `dir/NAME.pid`, once it has (or panics after
/// `patience`).
pub fn job_pid(dir: &Path, name: &str, patience: Duration) -> i32 {
    let path = dir.join(format!("{name}.pid"));
    let read = || -> Option<i32> { std::fs::read_to_string(&path).ok()?.trim().parse().ok() };
    wait_until(patience, "the job writes its pid", || read().is_some());
    read().unwrap()
}

/// The pid of process `name` (`controller-1`, `agent-gpu01`) of the cluster in `dir`.
pub fn pid_of(dir: &Path, name: &str) -> i32 {
    std::fs::read_to_string(dir.join(format!("pids/{name}.pid")))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// `kill SIGNAL PID` (`-9`, `-STOP`, ...).
pub fn signal(pid: i32, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Whether process `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().to_string())
        })
        .is_some_and(|state| !state.starts_with('Z') && !state.starts_with('X'))
}

/// Polls `condition` every 20 ms until it holds; panics after `patience`.
pub fn wait_until(patience: Duration, what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + patience;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {patience:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the Slurm command `name` through the link `corral local up` put in
/// the cluster's `bin/`, as `principal`, the cluster given through CORRAL_*
/// variables as a login shell that sourced the cluster's env file would, and
/// no SQUEUE_/SINFO_/SACCT_ format variables from the test's own environment.
pub fn slurm_link(cluster: &LocalCluster, name: &str, principal: &str, args: &[&str]) -> Output {
    let dir = cluster.dir.path();
    let certs = dir.join("certs");
    let mut command = Command::new(dir.join("bin").join(name));
    for variable in [
        "CORRAL_CONFIG",
        "SQUEUE_FORMAT",
        "SQUEUE_FORMAT2",
        "SQUEUE_SORT",
        "SINFO_FORMAT",
        "SACCT_FORMAT",
    ] {
        command.env_remove(variable);
    }
    command
        .args(args)
        .env("HOME", dir)
        .env("CORRAL_CLUSTER", cluster.addresses.join(","))
        .env("CORRAL_CA", certs.join("ca.pem"))
        .env("CORRAL_CERT", certs.join(format!("{principal}.pem")))
        .env("CORRAL_KEY", certs.join(format!("{principal}.key")))
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Writes a batch script into `dir` and returns its path.
pub fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

/// A job that writes its pid and attempt, runs until `release` appears in its
/// directory (or `seconds` pass), and writes "done" when it ends on its own.
pub fn waiting_job(dir: &Path, name: &str, release: &str, seconds: u32) -> PathBuf {
    script(
        dir,
        &format!("{name}.sh"),
        &format!(
            "#!/bin/bash\n#SBATCH --gpus-per-node=8\n#SBATCH --output={name}-%j.out\n\
             echo \"start attempt=$CORRAL_ATTEMPT node=$SLURMD_NODENAME\"\n\
             echo $$ > \"$SLURM_SUBMIT_DIR/{name}.pid\"\n\
             for i in $(seq 1 {tenths}); do [ -e \"$SLURM_SUBMIT_DIR/{release}\" ] && break; sleep 0.1; done\n\
             echo done\n",
            tenths = seconds * 10
        ),
    )
}

/// Completed with its first attempt, never requeued, one start in its output.
pub fn completed_once(cluster: &LocalCluster, id: &str, output: &str) {
    // Completing (the batch script ended, a node has not confirmed its
    // cleanup yet) is on the way: wait for the end.
    let job = wait_job(cluster, id, Duration::from_secs(90), "completion", |j| {
        j["state"] != "Running" && j["state"] != "Pending" && j["state"] != "Completing"
    });
    let text = std::fs::read_to_string(cluster.dir.path().join(output)).unwrap_or_default();
    assert_eq!(job["state"], "Completed", "{job}\n{text}");
    assert_eq!(job["attempts"].as_array().map(Vec::len), Some(1), "{job}");
    assert_eq!(job["requeue_count"], 0, "{job}");
    assert_eq!(
        text.matches("start attempt=").count(),
        1,
        "ran twice: {text}"
    );
    let fenced = cluster.agent_log_lines("lease lapsed");
    assert!(fenced.is_empty(), "agents fenced their jobs: {fenced:?}");
}

/// Waits until each of the cluster's `nodes` agents holds the roster with
/// every member's step address (a roster built before the last agent
/// registered names it without one, and an agent cannot ask a member
/// without an address during a controller outage).
pub fn wait_whole_roster(cluster: &LocalCluster, nodes: usize) {
    let line = format!("holds the cluster's roster nodes={nodes} reachable={nodes}");
    wait_until(
        Duration::from_secs(60),
        "every agent to hold the whole roster",
        || {
            let agents: std::collections::BTreeSet<String> = cluster
                .agent_log_lines(&line)
                .iter()
                .filter_map(|l| l.split(':').next().map(String::from))
                .collect();
            agents.len() >= nodes
        },
    );
}
