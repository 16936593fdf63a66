//! End to end with agents: three `corrald` and four `corral-agent` processes with
//! simulated GPUs (`corral local up`). A 2-node gang sees Slurm's environment; an
//! XID on one of its GPUs kills it, drains the GPU and requeues it, and it resumes
//! from its last checkpoint; a SIGKILLed agent's jobs are requeued after the
//! down-timeout; a stopped (hung) agent's watchdog kills its job when the lease
//! runs out; an agent cut off from every controller kills its job itself;
//! launches that stall longer than the lease (hung shared storage) do not
//! stop heartbeats; processes that survive SIGKILL drain their node, named,
//! and the job runs elsewhere; an agent that dies just after registering
//! still has its node declared down.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use support::{
    LocalCluster, alive, corral_bin, job_pid, logs, pid_of, script, signal, submit,
    submit_and_start, wait_job, wait_until,
};

/// Submits `path` and waits until the job completes; returns its id and record.
fn submit_and_complete(cluster: &LocalCluster, path: &Path) -> (String, serde_json::Value) {
    let id = submit(cluster, path);
    let job = wait_job(cluster, &id, Duration::from_secs(60), "completion", |j| {
        j["state"] == "Completed"
    });
    (id, job)
}

/// The nodes of a job record's first attempt, in allocation order.
fn allocation_nodes(job: &serde_json::Value) -> Vec<String> {
    job["attempts"][0]["allocation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["node"].as_str().unwrap().to_string())
        .collect()
}

/// `corral local xid`: injects `xid` into GPU `gpu` of `node`.
fn inject_xid(dir: &Path, node: &str, gpu: u64, xid: u32) {
    let out = Command::new(corral_bin())
        .args(["local", "xid", "--dir"])
        .arg(dir)
        .args([
            "--node",
            node,
            "--gpu",
            &gpu.to_string(),
            "--xid",
            &xid.to_string(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn read_output(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

#[test]
fn a_gang_job_runs_with_slurms_environment() {
    let cluster = LocalCluster::start_with_agents(3, 4);
    let dir = cluster.dir.path();
    let path = script(
        dir,
        "env.sh",
        "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --gpus-per-node=8\n#SBATCH --output=env-%j.out\nenv | sort\n",
    );
    let (id, job) = submit_and_complete(&cluster, &path);
    let out = read_output(dir, &format!("env-{id}.out"));
    let nodes = allocation_nodes(&job);
    for expected in [
        format!("SLURM_JOB_ID={id}"),
        format!("SLURM_JOBID={id}"),
        "SLURM_NNODES=2".to_string(),
        "SLURM_JOB_NUM_NODES=2".to_string(),
        format!("SLURMD_NODENAME={}", nodes[0]),
        "SLURM_NODEID=0".to_string(),
        "SLURM_PROCID=0".to_string(),
        "SLURM_GPUS_ON_NODE=8".to_string(),
        "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7".to_string(),
        "SLURM_JOB_PARTITION=gpu".to_string(),
        "SLURM_CLUSTER_NAME=local".to_string(),
        "CORRAL_ATTEMPT=1".to_string(),
    ] {
        assert!(
            out.contains(&format!("{expected}\n")),
            "missing {expected} in:\n{out}"
        );
    }
    let nodelist = out
        .lines()
        .find_map(|l| l.strip_prefix("SLURM_JOB_NODELIST="))
        .unwrap_or_else(|| panic!("no SLURM_JOB_NODELIST in:\n{out}"));
    assert!(
        nodelist.starts_with("gpu") && nodelist.contains('['),
        "{nodelist}"
    );
}

#[test]
fn a_batch_script_gets_what_its_options_pass_on_and_show_job_keeps_them() {
    let cluster = LocalCluster::start_with_agents(3, 1);
    let dir = cluster.dir.path();
    let path = script(
        dir,
        "opts.sh",
        "#!/bin/bash\n#SBATCH --mail-type=END\n#SBATCH --mail-type=FAIL\n#SBATCH -c 1\n\
         #SBATCH --hint=nomultithread\n#SBATCH --open-mode=append\n#SBATCH --export=NONE\n\
         #SBATCH --time=10 --time-min=5\n#SBATCH --output=opts-%j.out\necho PID=$$\nenv | sort\n",
    );
    let (id, _) = submit_and_complete(&cluster, &path);
    let out = read_output(dir, &format!("opts-{id}.out"));
    for expected in [
        "SLURM_CPUS_PER_TASK=1",
        "SLURM_HINT=nomultithread",
        "SLURM_THREADS_PER_CORE=1",
        "SLURM_OPEN_MODE=a",
        "SLURM_EXPORT_ENV=NONE",
        "SLURM_GET_USER_ENV=1",
        // `corral local up` puts the nodes under leaf switches and a spine.
        "SLURM_TOPOLOGY_ADDR=spine.leaf1.gpu01",
        "SLURM_TOPOLOGY_ADDR_PATTERN=switch.switch.node",
    ] {
        assert!(
            out.contains(&format!("{expected}\n")),
            "missing {expected} in:\n{out}"
        );
    }
    // The script's own pid, as slurmstepd gives it.
    let pid = out.lines().find_map(|l| l.strip_prefix("PID=")).unwrap();
    assert!(out.contains(&format!("SLURM_TASK_PID={pid}\n")), "{out}");
    // --export=NONE: a login's variables, not the submitting shell's.
    assert!(out.contains("\nHOME=") && out.contains("\nPATH="), "{out}");
    let (shell_only, _) = std::env::vars()
        .find(|(name, _)| {
            !name.starts_with("SLURM_")
                && !name.starts_with("CORRAL_")
                && ![
                    "HOME", "PATH", "SHELL", "USER", "LOGNAME", "TMPDIR", "PWD", "SHLVL", "_",
                ]
                .contains(&name.as_str())
        })
        .expect("the test runs with some variable of its own");
    assert!(
        !out.contains(&format!("\n{shell_only}=")),
        "{shell_only} leaked:\n{out}"
    );
    let shown = cluster.ok(&support::me(), &["show", "job", &id]);
    let user = shown
        .split("UserId=")
        .nth(1)
        .and_then(|rest| rest.split('(').next())
        .unwrap();
    for expected in [
        "TimeLimit=00:10:00 TimeMin=00:05:00",
        &format!("Command={}", path.display()),
        // The submitting user unless --mail-user was given.
        &format!("MailUser={user} MailType=END,FAIL"),
    ] {
        assert!(shown.contains(expected), "missing {expected} in:\n{shown}");
    }
}

#[test]
fn the_leader_mails_begin_and_end_through_the_mail_program() {
    // A mail program that writes down how it was called.
    let bin = tempfile::tempdir().unwrap();
    let log = bin.path().join("mails.log");
    let program = script(
        bin.path(),
        "mail",
        &format!(
            "#!/bin/sh\necho \"$1|$2|$3|$4|$SLURM_JOB_MAIL_TYPE|$SLURM_JOB_STATE\" >> {}\n",
            log.display()
        ),
    );
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let cluster = LocalCluster::start_with_args(
        3,
        &["--nodes", "1", "--mail-program", program.to_str().unwrap()],
    );
    let path = script(
        cluster.dir.path(),
        "mailed.sh",
        "#!/bin/bash\n#SBATCH --mail-type=BEGIN\n#SBATCH --mail-type=END\n#SBATCH --mail-user=ops@example.org\ntrue\n",
    );
    let (id, _) = submit_and_complete(&cluster, &path);
    wait_until(Duration::from_secs(30), "two mails", || {
        read_output(bin.path(), "mails.log").lines().count() >= 2
    });
    let mails = read_output(bin.path(), "mails.log");
    let lines: Vec<&str> = mails.lines().collect();
    assert_eq!(lines.len(), 2, "{mails}");
    let began = format!("-s|Slurm Job_id={id} Name=mailed.sh Began, Queued time 00:00:");
    assert!(lines[0].starts_with(&began), "{mails}");
    assert!(
        lines[0].ends_with("|--|ops@example.org|Began|RUNNING"),
        "{mails}"
    );
    let ended = format!("-s|Slurm Job_id={id} Name=mailed.sh Ended, Run time 00:00:");
    assert!(lines[1].starts_with(&ended), "{mails}");
    assert!(
        lines[1].ends_with(", COMPLETED, ExitCode 0|--|ops@example.org|Ended|COMPLETED"),
        "{mails}"
    );
    // A recipient the mail program would read as an option (GNU mail's
    // --exec runs a command as the controller's user) is refused at
    // submission: no job, no mail.
    let pwned = cluster.dir.path().join("pwned");
    let hostile = format!("--mail-user=--exec=!touch {}", pwned.display());
    let refused = cluster.corral(
        &support::me(),
        &[
            "submit",
            "--mail-type=BEGIN",
            &hostile,
            path.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("user name") && stderr.contains("user@host"),
        "{stderr}"
    );
    assert_eq!(cluster.jobs().len(), 1, "the refused submission left a job");
    assert!(!pwned.exists());
    let config = support::slurm_link(&cluster, "scontrol", &support::me(), &["show", "config"]);
    let config = String::from_utf8_lossy(&config.stdout);
    assert!(
        config
            .lines()
            .any(|l| l.starts_with("MailProg ") && l.ends_with(&format!("= {}", program.display()))),
        "{config}"
    );
}

/// A training job that resumes from the step in `CORRAL_RESUME_FROM` and
/// checkpoints every 5 steps.
fn training_script(dir: &Path) -> std::path::PathBuf {
    let corral = corral_bin();
    script(
        dir,
        "train.sh",
        &format!(
            r#"#!/bin/bash
#SBATCH -N 2
#SBATCH --gpus-per-node=8
#SBATCH --output=train-%j.out
step=0
if [ -n "$CORRAL_RESUME_FROM" ]; then step=$(cat "$CORRAL_RESUME_FROM"); echo "resuming from step $step"; fi
while [ "$step" -lt 400 ]; do
  sleep 0.05
  step=$((step + 1))
  if [ $((step % 5)) -eq 0 ]; then
    echo "$step" > "$CORRAL_CHECKPOINT_DIR/step-$step"
    {} checkpoint --step "$step" --path "$CORRAL_CHECKPOINT_DIR/step-$step"
  fi
done
"#,
            corral.display()
        ),
    )
}

#[test]
fn an_xid_kills_the_gang_drains_the_gpu_and_the_job_resumes_from_its_checkpoint() {
    let cluster = LocalCluster::start_with_agents(3, 4);
    let dir = cluster.dir.path();
    let id = submit(&cluster, &training_script(dir));
    let job = wait_job(
        &cluster,
        &id,
        Duration::from_secs(60),
        "a checkpoint",
        |j| j["state"] == "Running" && j["last_checkpoint"]["step"].as_u64().unwrap_or(0) >= 10,
    );
    let allocation = job["attempts"][0]["allocation"].as_array().unwrap().clone();
    let node = allocation[1]["node"].as_str().unwrap().to_string();
    let gpu = allocation[1]["gpus"][0].as_u64().unwrap();
    inject_xid(dir, &node, gpu, 79);
    let checkpoint_at_xid = job["last_checkpoint"]["step"].as_u64().unwrap();

    let rerun = wait_job(
        &cluster,
        &id,
        Duration::from_secs(60),
        "the second attempt",
        |j| j["state"] == "Running" && j["attempts"].as_array().is_some_and(|a| a.len() == 2),
    );
    assert_eq!(rerun["requeue_count"], 1);
    let first = &rerun["attempts"][0];
    assert_eq!(first["end"]["state"], "Requeued", "{first}");
    // The drained GPU is not used again.
    for a in rerun["attempts"][1]["allocation"].as_array().unwrap() {
        assert!(
            !(a["node"] == node.as_str() && a["gpus"].as_array().unwrap().iter().any(|g| g == gpu)),
            "the second attempt got the failed GPU"
        );
    }
    let nodes: serde_json::Value =
        serde_json::from_str(&cluster.ok("user-corral-admin", &["--json", "nodes", "-n", &node]))
            .unwrap();
    let health = &nodes["nodes"][0]["gpus"][gpu as usize];
    assert!(
        health.to_string().contains("79"),
        "GPU {gpu} of {node} is not marked failed: {health}"
    );
    // The new attempt resumed from a checkpoint at least as late as the one
    // committed before the XID (never from step 0).
    let deadline = Instant::now() + Duration::from_secs(30);
    let resumed = loop {
        let out = read_output(dir, &format!("train-{id}.out"));
        if let Some(line) = out.lines().find(|l| l.starts_with("resuming from step")) {
            break line.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "the second attempt never resumed:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let step: u64 = resumed
        .trim_start_matches("resuming from step ")
        .parse()
        .unwrap();
    assert!(
        step >= checkpoint_at_xid && step > 0,
        "resumed from {step}, checkpoint was {checkpoint_at_xid}"
    );
}

#[test]
fn a_killed_agents_jobs_are_requeued_after_the_down_timeout() {
    let cluster = LocalCluster::start_with_agents(3, 4);
    let dir = cluster.dir.path();
    let path = script(
        dir,
        "long.sh",
        "#!/bin/bash\n#SBATCH --gpus-per-node=8\n#SBATCH --output=long-%j.out\necho attempt $CORRAL_ATTEMPT on $SLURMD_NODENAME\necho $$ > \"$SLURM_SUBMIT_DIR/long.pid\"\nsleep 600\n",
    );
    let (id, node) = submit_and_start(&cluster, &path);
    let job_pid = job_pid(dir, "long", Duration::from_secs(60));
    let killed_at = Instant::now();
    signal(pid_of(dir, &format!("agent-{node}")), "-9");
    let rerun = wait_job(
        &cluster,
        &id,
        Duration::from_secs(60),
        "requeue and restart",
        |j| j["state"] == "Running" && j["attempts"].as_array().is_some_and(|a| a.len() == 2),
    );
    let waited = killed_at.elapsed();
    assert!(
        waited >= Duration::from_secs(3),
        "requeued before the lease could lapse ({waited:?})"
    );
    // The dead agent's watchdog fenced attempt 1 when its lease ran out,
    // before the leader could run attempt 2.
    assert!(
        !alive(job_pid),
        "attempt 1 still runs beside attempt 2 after its agent died"
    );
    let second = rerun["attempts"][1]["allocation"][0]["node"]
        .as_str()
        .unwrap();
    assert_ne!(second, node, "the job restarted on the dead node");
    let nodes: serde_json::Value =
        serde_json::from_str(&cluster.ok("user-corral-admin", &["--json", "nodes", "-n", &node]))
            .unwrap();
    assert!(
        nodes["nodes"][0]["availability"]
            .to_string()
            .contains("Down"),
        "{}",
        nodes["nodes"][0]
    );
}

#[test]
fn a_hung_agents_watchdog_kills_its_job_before_the_leader_runs_it_again() {
    let cluster = LocalCluster::start_with_agents(3, 4);
    let dir = cluster.dir.path();
    let path = script(
        dir,
        "hung.sh",
        "#!/bin/bash\n#SBATCH --gpus-per-node=8\n#SBATCH --output=hung-%j.out\necho $$ > \"$SLURM_SUBMIT_DIR/hung.pid\"\nsleep 600\n",
    );
    let (id, node) = submit_and_start(&cluster, &path);
    let job_pid = job_pid(dir, "hung", Duration::from_secs(60));
    // The agent is there but does nothing (a VM stall, a deadlock): its pipe
    // to the watchdog stays open, so only the lease can tell.
    let agent = pid_of(dir, &format!("agent-{node}"));
    signal(agent, "-STOP");
    let rerun = wait_job(
        &cluster,
        &id,
        Duration::from_secs(90),
        "requeue and restart elsewhere",
        |j| j["state"] == "Running" && j["attempts"].as_array().is_some_and(|a| a.len() == 2),
    );
    // Attempt 1 died with the lease, before the leader ran attempt 2.
    let first_alive = alive(job_pid);
    signal(agent, "-CONT");
    assert!(
        !first_alive,
        "attempt 1 still runs beside attempt 2 while its agent is stopped"
    );
    assert_ne!(
        rerun["attempts"][1]["allocation"][0]["node"]
            .as_str()
            .unwrap(),
        node,
        "the job restarted on the hung node"
    );
    assert!(
        !cluster
            .agent_log_lines("has not renewed its lease")
            .is_empty(),
        "the watchdog did not say why it killed the job:\n{}",
        logs(dir)
    );
}

#[test]
fn heartbeats_go_on_while_launches_stall_longer_than_the_lease() {
    let cluster = LocalCluster::start_with_agents(3, 1);
    let dir = cluster.dir.path();
    // Every launch on gpu01 now stalls 14 s on its blocking thread (shared
    // storage that hangs), longer than the 10 s lease.
    signal(pid_of(dir, "agent-gpu01"), "-TERM");
    wait_until(Duration::from_secs(30), "agent-gpu01 stops", || {
        !alive(pid_of(dir, "agent-gpu01"))
    });
    cluster.restart_with_env(
        "agent-gpu01",
        &["CORRAL_AGENT_FAULT_LAUNCH_STALL_S=14".to_string()],
    );
    let long = script(
        dir,
        "long.sh",
        "#!/bin/bash\n#SBATCH --gpus-per-node=1\n#SBATCH --output=long-%j.out\necho $$ > \"$SLURM_SUBMIT_DIR/long.pid\"\nsleep 600\n",
    );
    let short = script(
        dir,
        "short.sh",
        "#!/bin/bash\n#SBATCH --gpus-per-node=1\n#SBATCH --output=short-%j.out\necho done\n",
    );
    let long_id = submit(&cluster, &long);
    let short_id = submit(&cluster, &short);
    // Both launches stall together; heartbeats must go on meanwhile, or the
    // lease lapses and the leader declares the node down.
    let short_job = wait_job(
        &cluster,
        &short_id,
        Duration::from_secs(90),
        "completion",
        |j| j["state"] == "Completed",
    );
    job_pid(dir, "long", Duration::from_secs(60));
    let long_job = wait_job(
        &cluster,
        &long_id,
        Duration::from_secs(30),
        "running",
        |j| j["state"] == "Running",
    );
    for job in [&short_job, &long_job] {
        assert_eq!(
            job["attempts"].as_array().map(Vec::len),
            Some(1),
            "a stalled launch cost an attempt: {job}\n{}",
            logs(dir)
        );
    }
    assert!(
        !cluster
            .agent_log_lines("fault injected: the launch stalls")
            .is_empty(),
        "the launches did not stall"
    );
    let lapsed = cluster.agent_log_lines("lease lapsed");
    assert!(
        lapsed.is_empty(),
        "the lease lapsed while launches stalled:\n{}",
        lapsed.join("\n")
    );
}

/// gpu01's record, as `corral --json nodes -n gpu01` shows it.
fn gpu01(cluster: &LocalCluster) -> serde_json::Value {
    let nodes: serde_json::Value =
        serde_json::from_str(&cluster.ok("user-corral-admin", &["--json", "nodes", "-n", "gpu01"]))
            .unwrap();
    nodes["nodes"][0].clone()
}

#[test]
fn an_agent_that_dies_just_after_registering_is_declared_down() {
    // Three nodes: a leader declares a node down only while a majority of
    // them answer it (two of two would be needed with two).
    let cluster = LocalCluster::start_with_agents(3, 3);
    let dir = cluster.dir.path();
    let first_boot = gpu01(&cluster)["registration"]["boot_id"].clone();
    signal(pid_of(dir, "agent-gpu01"), "-TERM");
    wait_until(Duration::from_secs(30), "agent-gpu01 stops", || {
        !alive(pid_of(dir, "agent-gpu01"))
    });
    cluster.restart("agent-gpu01");
    // SIGKILL the new agent as soon as its registration is committed.
    let deadline = Instant::now() + Duration::from_secs(30);
    while gpu01(&cluster)["registration"]["boot_id"] == first_boot {
        assert!(
            Instant::now() < deadline,
            "the restarted agent never registered"
        );
    }
    signal(pid_of(dir, "agent-gpu01"), "-KILL");
    let killed = Instant::now();
    // Declared down after lease and margin (15 s); the patience only
    // catches a node that is never declared down.
    wait_until(Duration::from_secs(60), "gpu01 declared down", || {
        gpu01(&cluster)["availability"].get("Down").is_some()
    });
    eprintln!(
        "gpu01 declared down {:.1} s after its agent died",
        killed.elapsed().as_secs_f64()
    );
}

/// The freezer cgroup (v1) hierarchy, when this machine has one we may write.
fn freezer() -> Option<std::path::PathBuf> {
    let root = Path::new("/sys/fs/cgroup/freezer");
    let probe = root.join(format!("corral-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).ok()?;
    let _ = std::fs::remove_dir(&probe);
    Some(root.to_path_buf())
}

#[test]
fn unkillable_processes_drain_the_node_naming_them_and_the_job_runs_elsewhere() {
    // A frozen process (a freezer cgroup, as a stuck NFS read or a D-state
    // driver call holds one) cannot die of SIGKILL until thawed.
    let Some(freezer) = freezer() else {
        eprintln!("skipped: no writable freezer cgroup (v1) to make a process unkillable");
        return;
    };
    let cluster = LocalCluster::start_with_agents(3, 2);
    let dir = cluster.dir.path();
    for agent in ["agent-gpu01", "agent-gpu02"] {
        signal(pid_of(dir, agent), "-TERM");
        wait_until(Duration::from_secs(30), "the agent stops", || {
            !alive(pid_of(dir, agent))
        });
        cluster.restart_with_env(agent, &["CORRAL_AGENT_UNKILLABLE_TIMEOUT_S=3".to_string()]);
    }
    let path = script(
        dir,
        "stuck.sh",
        "#!/bin/bash\n#SBATCH --gpus-per-node=1\n#SBATCH --output=stuck-%j.out\necho $$ > \"$SLURM_SUBMIT_DIR/stuck.pid\"\nsleep 600\n",
    );
    let (id, node) = submit_and_start(&cluster, &path);
    let pid = job_pid(dir, "stuck", Duration::from_secs(30));
    let cgroup = freezer.join(format!("corral-test-{pid}"));
    std::fs::create_dir(&cgroup).unwrap();
    std::fs::write(cgroup.join("cgroup.procs"), pid.to_string()).unwrap();
    std::fs::write(cgroup.join("freezer.state"), "FROZEN").unwrap();
    let thaw = || {
        let _ = std::fs::write(cgroup.join("freezer.state"), "THAWED");
        wait_until(Duration::from_secs(30), "the thawed process dies", || {
            !alive(pid)
        });
        let _ = std::fs::remove_dir(&cgroup);
    };
    // Ending the attempt: SIGKILL cannot take the frozen script.
    let out = cluster.corral("user-corral-admin", &["requeue", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rerun = std::panic::catch_unwind(|| {
        wait_job(
            &cluster,
            &id,
            Duration::from_secs(60),
            "a second attempt",
            |j| j["state"] == "Running" && j["attempts"].as_array().is_some_and(|a| a.len() == 2),
        )
    });
    let nodes: serde_json::Value =
        serde_json::from_str(&cluster.ok("user-corral-admin", &["--json", "nodes", "-n", &node]))
            .unwrap();
    let still_frozen = alive(pid);
    thaw();
    let rerun = rerun.unwrap_or_else(|_| panic!("the job was not run again\n{}", logs(dir)));
    assert!(
        still_frozen,
        "the frozen process died before the test looked"
    );
    assert_ne!(
        rerun["attempts"][1]["allocation"][0]["node"].as_str(),
        Some(node.as_str()),
        "the second attempt ran on the node that still held the first"
    );
    let reason = nodes["nodes"][0]["drain"]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains(&format!("job {id}")) && reason.contains(&pid.to_string()),
        "{node}'s drain reason does not name the job and the process: {:?}",
        nodes["nodes"][0]
    );
}

#[test]
fn an_agent_cut_off_from_the_controllers_alone_kills_its_job_itself() {
    // Cut off from every controller while the other agents reach the
    // leader (the fault proxy parts agents from controllers, not from each
    // other): the other nodes say a leader reaches them, so this node is the
    // one cut off and fences when its lease runs out.
    let cluster = LocalCluster::start_with_args(3, &["--nodes", "3", "--fault-proxy"]);
    let dir = cluster.dir.path();
    let path = script(
        dir,
        "pid.sh",
        "#!/bin/bash\n#SBATCH --gpus-per-node=8\n#SBATCH --output=pid-%j.out\necho $$ > \"$SLURM_SUBMIT_DIR/job.pid\"\nsleep 600\n",
    );
    let (id, node) = submit_and_start(&cluster, &path);
    let job_pid = job_pid(dir, "job", Duration::from_secs(30));
    support::wait_whole_roster(&cluster, 3);
    let controllers: Vec<String> = (1..=3).map(|c| format!("controller-{c}")).collect();
    cluster.cut(&format!("agent-{node}"), &controllers);
    let cut = Instant::now();
    // The lease is 10 s; the patience only catches an agent that never fences.
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(job_pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let killed_after = cut.elapsed();
    let killed = !alive(job_pid);
    // Requeued once the leader declares the node down (never run twice at once).
    let job = wait_job(&cluster, &id, Duration::from_secs(60), "requeue", |j| {
        j["requeue_count"].as_u64().unwrap_or(0) >= 1
    });
    cluster.heal();
    assert!(
        killed,
        "the agent kept running its job without a lease\n{}",
        logs(dir)
    );
    eprintln!("fenced {:.1} s after the cut", killed_after.as_secs_f64());
    assert!(
        killed_after < Duration::from_secs(15),
        "fenced after the leader's wait: {killed_after:?}"
    );
    let refused = cluster.agent_log_lines("may be the one cut off");
    assert!(
        !refused.is_empty(),
        "the agent says why it fenced\n{}",
        logs(dir)
    );
    assert_eq!(job["requeue_count"], 1, "{job}");
}

#[test]
fn an_application_xid_requeues_the_job_and_keeps_the_gpu_in_service() {
    let cluster = LocalCluster::start_with_agents(3, 2);
    let dir = cluster.dir.path();
    let path = script(
        dir,
        "app.sh",
        "#!/bin/bash\n#SBATCH --gpus-per-node=8\n#SBATCH --output=app-%j.out\nsleep 600\n",
    );
    let (id, node) = submit_and_start(&cluster, &path);
    // XID 31: a GPU memory page fault, an application error.
    inject_xid(dir, &node, 2, 31);
    let rerun = wait_job(
        &cluster,
        &id,
        Duration::from_secs(60),
        "requeue and restart",
        |j| j["state"] == "Running" && j["attempts"].as_array().is_some_and(|a| a.len() == 2),
    );
    assert_eq!(rerun["requeue_count"], 1);
    let end = &rerun["attempts"][0]["end"];
    assert_eq!(end["state"], "Requeued", "{end}");
    let cause = &end["cause"]["ApplicationXid"];
    assert!(
        cause["xid"] == 31 && cause["gpu"] == 2 && cause["node"] == node.as_str(),
        "the first attempt's end cause is not the application XID: {end}"
    );
    let nodes: serde_json::Value =
        serde_json::from_str(&cluster.ok("user-corral-admin", &["--json", "nodes", "-n", &node]))
            .unwrap();
    let record = &nodes["nodes"][0];
    assert!(record["drain"].is_null(), "the node was drained: {record}");
    assert!(
        !record["gpus"][2].to_string().contains("31"),
        "GPU 2 was taken out of service: {}",
        record["gpus"][2]
    );
}

/// A batch script whose `srun` shims are found in the cluster's `bin/`.
fn step_script(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
    let header = format!(
        "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --gpus-per-node=8\n#SBATCH --output={name}-%j.out\nexport PATH={}:$PATH\n",
        dir.join("bin").display()
    );
    script(dir, &format!("{name}.sh"), &format!("{header}{body}"))
}

#[test]
fn srun_runs_a_step_on_every_node_with_per_task_ranks_and_returns_the_worst_exit() {
    let cluster = LocalCluster::start_with_agents(3, 4);
    let dir = cluster.dir.path();
    let path = step_script(
        dir,
        "steps",
        concat!(
            "export MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n1)\n",
            "srun -l --ntasks-per-node=2 bash -c 'echo \"rank=$SLURM_PROCID local=$SLURM_LOCALID node=$SLURMD_NODENAME nodeid=$SLURM_NODEID ntasks=$SLURM_NTASKS step=$SLURM_STEP_ID master=$MASTER_ADDR\"'\n",
            "echo \"first=$?\"\n",
            "srun -N1 bash -c 'echo one-node; exit 3'\n",
            "echo \"second=$?\"\n",
            "srun bash -c 'if [ $SLURM_PROCID = 1 ]; then exit 5; fi'\n",
            "echo \"third=$?\"\n",
            "srun no-such-program-corral-test\n",
            "echo \"fourth=$?\"\n",
            "srun -l -m cyclic --ntasks-per-node=2 bash -c 'echo \"cyclic rank=$SLURM_PROCID node=$SLURMD_NODENAME gtids=$SLURM_GTIDS\"'\n",
            "srun -l -N1 -n4 --gpus-per-task=2 bash -c 'echo \"bound rank=$SLURM_PROCID gpus=$CUDA_VISIBLE_DEVICES\"'\n",
            "srun --ntasks-per-node=1 -o 'task-%t-%N.out' bash -c 'echo \"to file $SLURM_PROCID\"; echo \"err $SLURM_PROCID\" >&2'\n",
            "echo \"fifth=$?\"\n",
            "srun --ntasks-per-node=1 -o 'one-%j.%s.log' bash -c 'echo \"local $SLURM_PROCID\"'\n",
            "srun -l --ntasks-per-node=1 -o 1 bash -c 'echo \"only $SLURM_PROCID\"'\n",
        ),
    );
    let (id, job) = submit_and_complete(&cluster, &path);
    let out = read_output(dir, &format!("steps-{id}.out"));
    let mut sorted = allocation_nodes(&job);
    sorted.sort();
    let (first, second) = (sorted[0].as_str(), sorted[1].as_str());
    for (rank, local, node, nodeid) in [
        (0, 0, first, 0),
        (1, 1, first, 0),
        (2, 0, second, 1),
        (3, 1, second, 1),
    ] {
        let line = format!(
            "{rank}: rank={rank} local={local} node={node} nodeid={nodeid} ntasks=4 step=0 master={first}\n"
        );
        assert!(out.contains(&line), "missing {line:?} in:\n{out}");
    }
    for expected in [
        "first=0\n",
        "one-node\n",
        "second=3\n",
        "third=5\n",
        "fourth=2\n",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    assert_eq!(out.matches("one-node").count(), 1, "{out}");
    assert!(
        out.contains(&format!(
            "srun: error: {second}: task 1: Exited with exit code 5"
        )),
        "{out}"
    );
    assert!(
        out.contains("no-such-program-corral-test"),
        "the failed start is explained:\n{out}"
    );
    // -m cyclic: ranks dealt to the nodes in turn, as Slurm's.
    for (rank, node, gtids) in [
        (0, first, "0,2"),
        (1, second, "1,3"),
        (2, first, "0,2"),
        (3, second, "1,3"),
    ] {
        let line = format!("{rank}: cyclic rank={rank} node={node} gtids={gtids}\n");
        assert!(out.contains(&line), "missing {line:?} in:\n{out}");
    }
    // --gpus-per-task: each task its own GPUs of the node.
    for (rank, gpus) in [(0, "0,1"), (1, "2,3"), (2, "4,5"), (3, "6,7")] {
        let line = format!("{rank}: bound rank={rank} gpus={gpus}\n");
        assert!(out.contains(&line), "missing {line:?} in:\n{out}");
    }
    // -o: each task's output and errors in its own file on its node.
    assert!(out.contains("fifth=0\n"), "{out}");
    assert!(
        !out.contains("to file"),
        "per-task output reached srun:\n{out}"
    );
    for (rank, node) in [(0, first), (1, second)] {
        let file = read_output(dir, &format!("task-{rank}-{node}.out"));
        assert_eq!(file, format!("to file {rank}\nerr {rank}\n"), "task {rank}");
    }
    // A name without %t, %n or %N: one file, written by srun itself.
    let mut local: Vec<String> = read_output(dir, &format!("one-{id}.7.log"))
        .lines()
        .map(String::from)
        .collect();
    local.sort();
    assert_eq!(local, ["local 0", "local 1"]);
    // A task id: that task's output only.
    assert!(
        out.contains("1: only 1\n") && !out.contains("only 0"),
        "{out}"
    );
    // sacct shows each step as its own row, as Slurm's.
    let expected = format!(
        "{id}|steps.sh|COMPLETED|0:0\n{id}.batch|batch|COMPLETED|0:0\n\
         {id}.0|bash|COMPLETED|0:0\n{id}.1|bash|FAILED|3:0\n{id}.2|bash|FAILED|5:0\n\
         {id}.3|no-such-program-corral-test|FAILED|2:0\n{id}.4|bash|COMPLETED|0:0\n\
         {id}.5|bash|COMPLETED|0:0\n{id}.6|bash|COMPLETED|0:0\n\
         {id}.7|bash|COMPLETED|0:0\n{id}.8|bash|COMPLETED|0:0\n"
    );
    let sacct = || {
        let out = support::slurm_link(
            &cluster,
            "sacct",
            &support::me(),
            &[
                "-j",
                &id,
                "-P",
                "-n",
                "--format=JobID,JobName,State,ExitCode",
            ],
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The last step's end may commit just after the job's.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut shown = sacct();
    while shown != expected && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        shown = sacct();
    }
    assert_eq!(shown, expected);
}

/// Whether process `pid` still runs (a zombie or a vanished process does not).
fn process_alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
        !state.is_some_and(|s| s.starts_with('Z') || s.starts_with('X'))
    })
}

#[test]
fn an_xid_on_another_node_kills_the_steps_tasks_there_and_on_the_batch_host() {
    let cluster = LocalCluster::start_with_agents(3, 4);
    let dir = cluster.dir.path();
    let path = step_script(
        dir,
        "long-step",
        &format!(
            "srun bash -c 'echo $$ > {}/pid-$CORRAL_ATTEMPT-$SLURM_PROCID; exec sleep 600'\n",
            dir.display()
        ),
    );
    let (id, _) = submit_and_start(&cluster, &path);
    let deadline = Instant::now() + Duration::from_secs(30);
    let pids: Vec<String> = loop {
        let pids: Vec<String> = (0..2)
            .map(|rank| {
                read_output(dir, &format!("pid-1-{rank}"))
                    .trim()
                    .to_string()
            })
            .collect();
        if pids.iter().all(|p| !p.is_empty()) {
            break pids;
        }
        assert!(
            Instant::now() < deadline,
            "the step's tasks did not start:\n{}",
            logs(dir)
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(pids.iter().all(|p| process_alive(p)));
    let job = cluster.ok("user-corral-admin", &["--json", "show", "job", &id]);
    let job: serde_json::Value = serde_json::from_str(&job).unwrap();
    // The second node in nodelist order runs rank 1.
    let other = allocation_nodes(&job["job"]).into_iter().max().unwrap();
    inject_xid(dir, &other, 0, 79);
    wait_job(&cluster, &id, Duration::from_secs(60), "requeue", |j| {
        j["attempts"].as_array().is_some_and(|a| a.len() >= 2)
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while pids.iter().any(|p| process_alive(p)) {
        assert!(
            Instant::now() < deadline,
            "attempt 1's tasks outlived the XID: {pids:?}\n{}",
            logs(dir)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = read_output(dir, &format!("long-step-{id}.out"));
    assert!(
        out.contains(&format!("srun: error: {other}: task 1: Killed by signal")),
        "srun reports the killed remote task:\n{out}"
    );
    cluster.ok("user-corral-admin", &["cancel", &id]);
}

#[test]
fn a_quiet_step_outlives_the_idle_timeout_and_escaped_processes_end_with_the_job() {
    let cluster = LocalCluster::start_with_agents(3, 4);
    let dir = cluster.dir.path();
    // Each rank leaves a process in a session of its own (as torchrun does
    // with its workers) holding the step's output open, then prints nothing
    // for longer than QUIC's idle timeout (30 s).
    let path = step_script(
        dir,
        "quiet",
        &format!(
            concat!(
                "srun bash -c 'setsid bash -c \"echo \\$\\$ > {dir}/escaped-$SLURM_PROCID; exec sleep 600\" & ",
                "sleep 36; echo quiet-done-$SLURM_PROCID'\n",
                "echo \"srun=$?\"\n",
            ),
            dir = dir.display()
        ),
    );
    let id = submit(&cluster, &path);
    let job = wait_job(&cluster, &id, Duration::from_secs(120), "completion", |j| {
        j["state"] == "Completed" || j["state"] == "Failed"
    });
    let out = read_output(dir, &format!("quiet-{id}.out"));
    assert_eq!(job["state"], "Completed", "{out}\n{}", logs(dir));
    for expected in ["quiet-done-0\n", "quiet-done-1\n", "srun=0\n"] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    for rank in 0..2 {
        let pid = read_output(dir, &format!("escaped-{rank}"))
            .trim()
            .to_string();
        assert!(!pid.is_empty(), "rank {rank} wrote no pid");
        let deadline = Instant::now() + Duration::from_secs(30);
        while process_alive(&pid) {
            assert!(
                Instant::now() < deadline,
                "rank {rank}'s escaped process {pid} outlived the job"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
