//! End to end: `srun` and `salloc` from a login node, through the links
//! `corral local up` puts in its `bin/`, against a local cluster of three
//! controllers and two agents: srun outside a job creates an allocation, runs
//! the step on it with Slurm's messages, and ends the job with the step's
//! status; `srun --test-only` submits nothing; salloc runs a command with the
//! allocation's variables, in which srun runs steps; `srun --jobid --overlap`
//! reaches a running batch job and only its owner may; an interrupt while the
//! job waits cancels it, and scancel revokes salloc's allocation; `sstat`
//! and `scontrol listpids` show a running job's steps as its nodes' agents
//! see them; `scontrol -d show job` and `write batch_script`.

#![allow(clippy::unwrap_used)]

mod support;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{LocalCluster, me, slurm_link as slurm, wait_job};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run(cluster: &LocalCluster, name: &str, args: &[&str]) -> Output {
    slurm(cluster, name, &me(), args)
}

/// `srun ARGS` through its link with `input` on its standard input.
fn run_with_input(cluster: &LocalCluster, args: &[&str], input: &str) -> Output {
    let mut child = spawn_command(cluster, "srun", args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, input.as_bytes()).unwrap();
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// The link `name` as a command, with the environment [`slurm`] gives it.
fn spawn_command(cluster: &LocalCluster, name: &str, args: &[&str]) -> Command {
    let dir = cluster.dir.path();
    let certs = dir.join("certs");
    let mut command = Command::new(dir.join("bin").join(name));
    command
        .args(args)
        .env("HOME", dir)
        .env("CORRAL_CLUSTER", cluster.addresses.join(","))
        .env("CORRAL_CA", certs.join("ca.pem"))
        .env("CORRAL_CERT", certs.join(format!("{}.pem", me())))
        .env("CORRAL_KEY", certs.join(format!("{}.key", me())))
        .current_dir(dir);
    command
}

/// `JobName|State|ExitCode` of job `id`, as sacct shows it.
fn accounted(cluster: &LocalCluster, id: &str) -> String {
    let out = run(
        cluster,
        "sacct",
        &[
            "-X",
            "-n",
            "-P",
            "-j",
            id,
            "--format=JobName,State,ExitCode",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout).trim().to_string()
}

/// The job id in srun's or salloc's `job N queued and waiting for resources`.
fn job_of(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| {
            l.split_once(": job ")?
                .1
                .strip_suffix(" queued and waiting for resources")
        })
        .unwrap_or_else(|| panic!("no allocation message in:\n{stderr}"))
        .to_string()
}

/// The link `name` running as a child process, with the same environment as
/// [`slurm`] gives it, and its standard error read line by line as it comes.
struct Running {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: String,
}

fn spawn(cluster: &LocalCluster, name: &str, args: &[&str]) -> Running {
    spawn_with(cluster, name, args, Stdio::null())
}

/// Like [`spawn`], with `stdin` as the command's standard input.
fn spawn_with(cluster: &LocalCluster, name: &str, args: &[&str], stdin: Stdio) -> Running {
    let mut child = spawn_command(cluster, name, args)
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)) {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    Running {
        child,
        lines,
        seen: String::new(),
    }
}

impl Running {
    /// Waits (a minute at most) for a line containing `text`.
    fn wait_for(&mut self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                    if line.contains(text) {
                        return line;
                    }
                }
                Err(_) => panic!("no '{text}' from the command; it said:\n{}", self.seen),
            }
        }
    }

    /// Its exit status and everything it printed on standard error.
    fn finish(mut self) -> (Option<i32>, String) {
        let status = self.child.wait().unwrap();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(10)) {
            self.seen.push_str(&line);
            self.seen.push('\n');
        }
        (status.code(), self.seen)
    }
}

/// Polls squeue until job `id` shows `state` (or gives up after a minute).
fn wait_state(cluster: &LocalCluster, id: &str, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = run(
            cluster,
            "squeue",
            &["-h", "-t", "all", "-j", id, "-o", "%T"],
        );
        if text(&out.stdout).trim() == state {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "job {id} never became {state}: {}",
            text(&out.stdout)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn srun_and_salloc_from_a_login_node_allocate_run_and_release() {
    let cluster = LocalCluster::start_with_agents(3, 2);

    // srun outside a job: an allocation for the step, gone with it.
    let out = run(&cluster, "srun", &["-N2", "-l", "hostname"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let id = job_of(&stderr);
    assert!(
        stderr.contains(&format!("srun: job {id} has been allocated resources")),
        "{stderr}"
    );
    let mut ranks: Vec<&str> = stdout.lines().map(|l| &l[..2]).collect();
    ranks.sort_unstable();
    assert_eq!(ranks, ["0:", "1:"], "{stdout}");
    // Ended (not just released) when srun returns, and nothing left in the
    // user's directory (the holder writes no output).
    assert_eq!(accounted(&cluster, &id), "hostname|COMPLETED|0:0");
    assert!(!cluster.dir.path().join(format!("slurm-{id}.out")).exists());

    // srun's standard input reaches every task (Slurm's default), or the one
    // --input names.
    let read = "read line; echo got:$line";
    let out = run_with_input(&cluster, &["-N2", "-l", "sh", "-c", read], "hello\n");
    let mut got: Vec<String> = text(&out.stdout).lines().map(String::from).collect();
    got.sort();
    assert_eq!(
        got,
        ["0: got:hello", "1: got:hello"],
        "{}",
        text(&out.stderr)
    );
    let out = run_with_input(
        &cluster,
        &["-N2", "-l", "--input=1", "sh", "-c", read],
        "hi\n",
    );
    let mut got: Vec<String> = text(&out.stdout).lines().map(String::from).collect();
    got.sort();
    assert_eq!(got, ["0: got:", "1: got:hi"], "{}", text(&out.stderr));

    // --pty: task 0 on a terminal of its own (a shell reads its commands
    // there, interactive), the other tasks' output dropped, the shell's exit
    // status srun's.
    let out = run_with_input(
        &cluster,
        &["-N2", "--pty", "sh"],
        "tty; test -t 1 && echo rank-$SLURM_PROCID-on-a-terminal\nexit 3\n",
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("/dev/pts/"), "{stdout}");
    assert!(stdout.contains("rank-0-on-a-terminal\r\n"), "{stdout}");
    assert!(!stdout.contains("rank-1"), "{stdout}");

    // Tasks that never read their input hold up neither srun's signals nor
    // its end: 8 MiB of input, then an interrupt, and the step ends.
    let mut ignoring = spawn_with(&cluster, "srun", &["-N2", "sleep", "600"], Stdio::piped());
    let mut feed = ignoring.child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let block = vec![0u8; 1 << 20];
        for _ in 0..8 {
            if std::io::Write::write_all(&mut feed, &block).is_err() {
                return;
            }
        }
    });
    let fed = job_of(&ignoring.wait_for("queued and waiting for resources"));
    ignoring.wait_for("has been allocated resources");
    feeder.join().unwrap();
    nix_kill(ignoring.child.id(), "INT");
    let (status, stderr) = ignoring.finish();
    assert_ne!(status, Some(0), "{stderr}");
    wait_state(&cluster, &fed, "FAILED");

    // The step's status is srun's and the job's.
    let out = run(&cluster, "srun", &["-N1", "sh", "-c", "exit 5"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains(": task 0: Exited with exit code 5"),
        "{stderr}"
    );
    assert_eq!(accounted(&cluster, &job_of(&stderr)), "sh|FAILED|5:0");

    // Refused requests in srun's words; nothing is left behind.
    let out = run(&cluster, "srun", &["-p", "nosuch", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("srun: error: Unable to allocate resources: "),
        "{}",
        text(&out.stderr)
    );
    // A plugin's option is unknown to srun: getopt's words and status, so a
    // script probing for the plugin takes its fallback.
    let out = run(&cluster, "srun", &["--container-image=nvcr.io/x", "true"]);
    assert_eq!(out.status.code(), Some(255));
    assert_eq!(
        text(&out.stderr),
        "srun: unrecognized option '--container-image=nvcr.io/x'\nTry \"srun --help\" for more information\n"
    );

    // --test-only says where and when, and submits nothing.
    let before = text(&run(&cluster, "squeue", &["-h", "-t", "all"]).stdout);
    let out = run(
        &cluster,
        "srun",
        &["--test-only", "-N2", "--gres=gpu:8", "true"],
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.starts_with("srun: Job ")
            && stderr.contains(" to start at ")
            && stderr.contains(" using 2 processors on nodes gpu[01-02] in partition "),
        "{stderr}"
    );
    let after = text(&run(&cluster, "squeue", &["-h", "-t", "all"]).stdout);
    assert_eq!(before, after, "--test-only submitted a job");

    // salloc: a command here with the allocation's variables; srun in it
    // runs steps on the allocation; the command's status ends the job.
    let command = format!(
        "echo nodes=$SLURM_JOB_NODELIST n=$SLURM_NNODES per=$SLURM_TASKS_PER_NODE; echo working=$SLURM_WORKING_CLUSTER; {}/srun -l hostname; exit 3",
        cluster.dir.path().join("bin").display()
    );
    let out = run(&cluster, "salloc", &["-N2", "sh", "-c", &command]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let id = job_of(&stderr);
    for line in [
        format!("salloc: Pending job allocation {id}"),
        format!("salloc: Granted job allocation {id}"),
        format!("salloc: Relinquishing job allocation {id}"),
    ] {
        assert!(stderr.contains(&line), "no '{line}' in:\n{stderr}");
    }
    assert!(
        stdout.contains("nodes=gpu[01-02] n=2 per=1(x2)"),
        "{stdout}"
    );
    // The cluster, the first controller the agents know, Slurm 22.05's
    // protocol version and select/cons_tres.
    let first = &cluster.addresses[0];
    assert!(
        stdout.contains(&format!("working=local:{first}:9728:109")),
        "{stdout}"
    );
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.starts_with("0: ") || l.starts_with("1: "))
            .count(),
        2,
        "{stdout}"
    );
    assert_eq!(accounted(&cluster, &id), "interactive|FAILED|3:0");

    // srun --jobid --overlap reaches a running batch job, its owner only.
    let out = run(
        &cluster,
        "sbatch",
        &["--parsable", "-J", "longrun", "--wrap", "sleep 600"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let batch = text(&out.stdout).trim().to_string();
    wait_job(&cluster, &batch, Duration::from_secs(60), "start", |j| {
        j["state"] == "Running"
    });
    let jobid = format!("--jobid={batch}");
    let out = run(
        &cluster,
        "srun",
        &[
            &jobid,
            "--overlap",
            "sh",
            "-c",
            "echo job=$SLURM_JOB_ID step=$SLURM_STEP_ID",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), format!("job={batch} step=0\n"));
    let other = if me() == "user-alice" {
        "user-bob"
    } else {
        "user-alice"
    };
    let out = slurm(&cluster, "srun", other, &[&jobid, "true"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("may not start steps in job"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&cluster, "scancel", &[&batch]);
    assert!(out.status.success());

    // sstat: what a running job's steps use now, from its nodes' agents.
    let step = format!(
        "{}/srun -N2 sleep 600",
        cluster.dir.path().join("bin").display()
    );
    let out = run(&cluster, "sbatch", &["--parsable", "-N2", "--wrap", &step]);
    let stepped = text(&out.stdout).trim().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    let shown = loop {
        let out = run(
            &cluster,
            "sstat",
            &[
                "-j",
                &stepped,
                "-n",
                "-P",
                "--format=JobID,NTasks,Nodelist,Pids,MaxRSS",
            ],
        );
        let shown = text(&out.stdout);
        // Both tasks: a step seen while one node's task is still starting
        // shows one (seen in CI: `1|gpu02`).
        if shown.starts_with(&format!("{stepped}.0|2|")) {
            break shown;
        }
        assert!(
            Instant::now() < deadline,
            "no step in sstat: {shown}{}",
            text(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let cells: Vec<&str> = shown.trim().split('|').collect();
    assert_eq!(cells[1..3], ["2", "gpu[01-02]"], "{shown}");
    assert_eq!(cells[3].split(',').count(), 2, "a pid per task: {shown}");
    assert!(
        cells[4].ends_with('K') || cells[4].ends_with('M'),
        "{shown}"
    );
    let all = run(
        &cluster,
        "sstat",
        &["-a", "-n", "-P", "-o", "JobID", "-j", &stepped],
    );
    assert_eq!(
        text(&all.stdout),
        format!("{stepped}.batch\n{stepped}.0\n"),
        "{}",
        text(&all.stderr)
    );
    // scontrol: the job's processes per node, its nodes in detail, its script.
    let pids = text(&run(&cluster, "scontrol", &["listpids", &stepped]).stdout);
    assert!(
        pids.starts_with("PID      JOBID    STEPID   LOCALID GLOBALID\n"),
        "{pids}"
    );
    let step_rows = pids
        .lines()
        .filter(|l| l.split_whitespace().nth(2) == Some("0"));
    let ranks: Vec<&str> = step_rows
        .filter_map(|l| l.split_whitespace().nth(4))
        .collect();
    assert_eq!(ranks, ["0", "1"], "{pids}");
    assert!(
        pids.lines()
            .any(|l| l.split_whitespace().nth(2) == Some("batch")),
        "{pids}"
    );
    let details = text(&run(&cluster, "scontrol", &["-d", "show", "job", &stepped]).stdout);
    assert!(
        details.contains("\n     Nodes=gpu01 CPUs=1 Mem=0\n"),
        "{details}"
    );
    let script = run(
        &cluster,
        "scontrol",
        &["write", "batch_script", &stepped, "-"],
    );
    assert_eq!(
        text(&script.stdout),
        format!("#!/bin/sh\n# This script was created by sbatch --wrap.\n\n{step}\n")
    );
    let out = slurm(&cluster, "sstat", other, &["-j", &stepped]);
    assert!(
        text(&out.stderr).contains("may not see job"),
        "{}",
        text(&out.stderr)
    );
    assert!(run(&cluster, "scancel", &[&stepped]).status.success());

    // An interrupt (here the terminal going away) while the job waits cancels it.
    let out = run(
        &cluster,
        "sbatch",
        &[
            "--parsable",
            "-N2",
            "--gres=gpu:8",
            "--exclusive",
            "--wrap",
            "sleep 600",
        ],
    );
    let blocker = text(&out.stdout).trim().to_string();
    wait_job(&cluster, &blocker, Duration::from_secs(60), "start", |j| {
        j["state"] == "Running"
    });
    let mut waiting = spawn(&cluster, "srun", &["--gres=gpu:1", "true"]);
    let waiter = job_of(&waiting.wait_for("queued and waiting for resources"));
    wait_state(&cluster, &waiter, "PENDING");
    nix_kill(waiting.child.id(), "HUP");
    let (status, stderr) = waiting.finish();
    assert_eq!(status, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("Job allocation {waiter} has been revoked")),
        "{stderr}"
    );
    wait_state(&cluster, &waiter, "CANCELLED");
    assert!(run(&cluster, "scancel", &[&blocker]).status.success());

    // scancel revokes salloc's allocation: its command is told to stop.
    let mut holding = spawn(&cluster, "salloc", &["-N1", "sleep", "600"]);
    let granted = holding.wait_for("Granted job allocation");
    let held = granted.rsplit(' ').next().unwrap().to_string();
    assert!(run(&cluster, "scancel", &[&held]).status.success());
    let (status, stderr) = holding.finish();
    assert!(
        stderr.contains(&format!("salloc: Job allocation {held} has been revoked.")),
        "{stderr}"
    );
    assert_ne!(status, Some(0));
    wait_state(&cluster, &held, "CANCELLED");
}

/// Sends `signal` (a name `kill -s` takes) to process `pid`.
fn nix_kill(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}
