//! `corral local` as a process: a local cluster whose bootstrap fails leaves no
//! controller running behind it; `--config` gives a local cluster a site's
//! nodes, partitions and accounts.

#![allow(clippy::unwrap_used)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use support::{LocalCluster, corral_bin, me, slurm_link};

#[test]
fn a_failed_local_up_stops_the_controllers_it_started() {
    let dir = tempfile::tempdir().unwrap();
    // A stand-in for corrald that runs but cannot bootstrap.
    let fake = dir.path().join("fake-corrald");
    std::fs::write(
        &fake,
        "#!/bin/sh\nif [ \"$1\" = init ]; then echo 'bootstrap refused: test' >&2; exit 1; fi\nwhile true; do sleep 1; done\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cluster = dir.path().join("cluster");
    let out = Command::new(corral_bin())
        .args(["local", "up", "--controllers", "3", "--nodes", "1", "--dir"])
        .arg(&cluster)
        .arg("--corrald")
        .arg(&fake)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "local up with a failing bootstrap succeeded"
    );
    let status = Command::new(corral_bin())
        .args(["--json", "local", "status", "--dir"])
        .arg(&cluster)
        .output()
        .unwrap();
    let processes: Vec<serde_json::Value> = serde_json::from_slice(&status.stdout).unwrap();
    let left: Vec<&serde_json::Value> = processes.iter().filter(|p| p["running"] == true).collect();
    // Never leave them behind, whatever the outcome.
    let _ = Command::new(corral_bin())
        .args(["local", "down", "--dir"])
        .arg(&cluster)
        .output();
    assert!(left.is_empty(), "processes left running: {left:?}");
}

/// `corral local up --config FILE`: the site's nodes (typed GPUs, a CPU-only
/// node), partitions and accounts, with the local users added; jobs run on it.
#[test]
fn a_local_cluster_takes_a_sites_configuration() {
    let site = tempfile::tempdir().unwrap();
    let file = site.path().join("site.toml");
    std::fs::write(
        &file,
        r#"cluster_name = "site"
# Daemon keys of the site's own controllers: replaced by the local cluster's.
id = 7
[[replicas]]
id = 7
peer = "head1:7100"
api = "head1:7000"

[[nodes]]
names = "dgx[1-2]"
cpus = 32
memory = "1T"
gpus = 4
gpu_type = "A100"
features = ["ib"]

[[nodes]]
names = "cpu1"
cpus = 16
memory = "64G"

[[partitions]]
name = "gpu"
nodes = "dgx[1-2]"
max_time = "1-00:00:00"
default = true

[[partitions]]
name = "cpu"
nodes = "cpu1"
max_time = "4:00:00"

[[accounts]]
name = "vision"
shares = 2
"#,
    )
    .unwrap();
    let cluster = LocalCluster::start_with_args(3, &["--config", file.to_str().unwrap()]);
    // Every node registers with the file's resources.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let nodes = loop {
        let out = slurm_link(
            &cluster,
            "sinfo",
            &me(),
            &["-N", "-h", "-o", "%N %c %G %P %T"],
        );
        let text = String::from_utf8(out.stdout).unwrap();
        if text.lines().count() == 3 && !text.contains("down") {
            break text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nodes never came up: {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(nodes.contains("dgx1 32 gpu:A100:4 gpu* idle"), "{nodes}");
    assert!(nodes.contains("cpu1 16 (null) cpu idle"), "{nodes}");
    // The site's partitions and typed GPUs take jobs; the local user charges
    // the file's account.
    let out = slurm_link(
        &cluster,
        "srun",
        &me(),
        &[
            "-N2",
            "--gres=gpu:A100:4",
            "-l",
            "sh",
            "-c",
            "echo $SLURM_CLUSTER_NAME $SLURM_JOB_ACCOUNT",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.lines().filter(|l| l.ends_with("site vision")).count(),
        2,
        "{text}"
    );
    let out = slurm_link(
        &cluster,
        "srun",
        &me(),
        &["-p", "cpu", "-c", "16", "hostname"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A team's Slurm files, imported and run: `corral import-slurm` on a real
/// Slurm 22.05 configuration, then `corral local up --config` on its output.
#[test]
fn an_imported_slurm_configuration_runs_as_a_local_cluster() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import-slurm/reference");
    let out = Command::new(corral_bin())
        .arg("import-slurm")
        .arg("--slurm-conf")
        .arg(fixtures.join("slurm.conf"))
        .arg("--gres-conf")
        .arg(fixtures.join("gres.conf"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let site = tempfile::tempdir().unwrap();
    let file = site.path().join("corral.toml");
    std::fs::write(&file, &out.stdout).unwrap();
    let cluster = LocalCluster::start_with_args(3, &["--config", file.to_str().unwrap()]);
    let out = slurm_link(
        &cluster,
        "srun",
        &me(),
        &[
            "-N2",
            "-p",
            "debug",
            "--gres=gpu:2",
            "-l",
            "sh",
            "-c",
            "echo $SLURM_CLUSTER_NAME",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.lines().filter(|l| l.ends_with("reference")).count(),
        2,
        "{text}"
    );
}

/// MIG: a node whose GPU 1 is split into two 3g.20gb instances offers them as
/// GPUs of type a100_3g.20gb beside its whole GPU 0. Each job given an
/// instance sees it by its MIG UUID in `CUDA_VISIBLE_DEVICES` (its slot number
/// in `SLURM_JOB_GPUS`), two jobs get two different instances, and an XID on
/// GPU 1 ends and requeues both while the job on GPU 0 runs on.
#[test]
fn mig_instances_are_scheduled_as_typed_gpus_of_their_own() {
    let site = tempfile::tempdir().unwrap();
    let file = site.path().join("site.toml");
    std::fs::write(
        &file,
        r#"cluster_name = "mig"
[[nodes]]
names = "mig1"
cpus = 8
memory = "16G"
gpus = 2
gpu_type = "a100"
mig = ["1:3g.20gb*2"]

[[partitions]]
name = "gpu"
nodes = "mig1"
max_time = "1-00:00:00"
default = true
"#,
    )
    .unwrap();
    let cluster = LocalCluster::start_with_args(3, &["--config", file.to_str().unwrap()]);
    let out_dir = cluster.dir.path().to_path_buf();
    let sinfo = || {
        let out = slurm_link(&cluster, "sinfo", &me(), &["-N", "-h", "-o", "%N %G %T"]);
        String::from_utf8(out.stdout).unwrap()
    };
    support::wait_until(Duration::from_secs(60), "the node came up", || {
        sinfo().contains("idle")
    });
    let shown = sinfo();
    assert!(
        shown.contains("gpu:a100:1,gpu:a100_3g.20gb:2"),
        "sinfo shows each type: {shown}"
    );
    // More instances than the node has: refused at submission, nothing queued.
    let out = slurm_link(
        &cluster,
        "sbatch",
        &me(),
        &["--gres=gpu:a100_3g.20gb:3", "--wrap", "true"],
    );
    assert!(!out.status.success());
    let sbatch = |name: &str, gres: &str| {
        let out = slurm_link(
            &cluster,
            "sbatch",
            &me(),
            &[
                "--parsable",
                &format!("--gres={gres}"),
                "-o",
                out_dir.join(format!("{name}.out")).to_str().unwrap(),
                "--wrap",
                "echo $CUDA_VISIBLE_DEVICES $SLURM_JOB_GPUS; sleep 600",
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let first = sbatch("first", "gpu:a100_3g.20gb:1");
    let second = sbatch("second", "gpu:a100_3g.20gb:1");
    let whole = sbatch("whole", "gpu:a100:1");
    let line = |name: &str| {
        std::fs::read_to_string(out_dir.join(format!("{name}.out")))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    support::wait_until(
        Duration::from_secs(60),
        "the three jobs wrote their GPUs",
        || {
            ["first", "second", "whole"]
                .iter()
                .all(|n| !line(n).is_empty())
        },
    );
    let (a, b) = (line("first"), line("second"));
    let mut slots = Vec::new();
    for seen in [&a, &b] {
        let (device, slot) = seen.split_once(' ').unwrap();
        assert!(
            device.starts_with("MIG-"),
            "an instance is named by its UUID: {seen}"
        );
        slots.push(slot.to_string());
    }
    assert_ne!(a, b, "two jobs, two instances");
    slots.sort();
    assert_eq!(slots, ["1", "2"]);
    let whole_gpu = line("whole");
    assert!(
        whole_gpu.starts_with("GPU-") && whole_gpu.ends_with(" 0"),
        "beside instances a whole GPU is named by its UUID, its slot number kept: {whole_gpu}"
    );
    // An XID on GPU 1 (double-bit ECC: drains the GPU) ends the jobs on both
    // of its instances; they are requeued and wait, as no instance is left.
    let out = Command::new(corral_bin())
        .args(["local", "xid", "--dir"])
        .arg(cluster.dir.path())
        .args(["--node", "mig1", "--gpu", "1", "--xid", "48"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for id in [&first, &second] {
        let job = support::wait_job(&cluster, id, Duration::from_secs(60), "requeued", |j| {
            j["state"] == "Pending"
                && j["attempts"].as_array().is_some_and(|a| a.len() == 1)
                && j["attempts"][0]["end"]["state"] == "Requeued"
        });
        assert_eq!(job["attempts"][0]["end"]["state"], "Requeued", "{job}");
    }
    let job = support::wait_job(&cluster, &whole, Duration::from_secs(5), "running", |j| {
        j["state"] == "Running"
    });
    assert_eq!(job["attempts"].as_array().map(Vec::len), Some(1), "{job}");
}

/// `corral local up --fault-proxy`: without root, a cut still parts the
/// leader from the others (a new leader is elected on their side, the old
/// one falls behind), and the heal joins it again (it catches up).
#[test]
fn the_fault_proxy_parts_the_leader_and_the_heal_joins_it() {
    let cluster = LocalCluster::start_with_args(3, &["--nodes", "1", "--fault-proxy"]);
    let old = cluster.leader();
    let others: Vec<String> = (1..=3)
        .filter(|c| *c != old)
        .map(|c| format!("controller-{c}"))
        .chain(["agent-gpu01".to_string()])
        .collect();
    cluster.cut(&format!("controller-{old}"), &others);
    let patience = std::time::Duration::from_secs(60);
    let deadline = std::time::Instant::now() + patience;
    let new = loop {
        // Asked on the majority's side (the proxy never parts this machine).
        let leader = cluster.status()["leader"].as_u64();
        if let Some(new) = leader.filter(|new| *new != old) {
            break new;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no new leader while {old} was cut off"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    // Writes commit without the cut-off replica, which falls behind.
    cluster.ok(&me(), &["submit", "--hold", "--wrap", "true"]);
    cluster.heal();
    let deadline = std::time::Instant::now() + patience;
    loop {
        let status = cluster.status();
        let members = status["members"].as_array().cloned().unwrap_or_default();
        let caught_up = members
            .iter()
            .all(|m| m["lag"].as_u64() == Some(0) && m["voter"] == true);
        if caught_up && members.len() == 3 && status["leader"].as_u64().is_some() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "controller-{old} did not catch up with leader {new} after the heal: {status}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
