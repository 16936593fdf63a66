//! The Slurm environment of batch scripts and step tasks, variable by variable,
//! on real job records built with the state machine's test kit.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use corral_agent::job::environment::layout::{block_layout, placements};
use corral_agent::job::environment::{
    LaunchContext, TaskPlacement, batch_environment, task_environment,
};
use corral_agent::job::process::output_paths;
use corral_state::job::{Attempt, Job};
use corral_state::slurm::array::ArraySpec;
use corral_state::testkit::{at, cluster, ok, spec, start, submit, user};
use corral_state::{ClusterState, Command, JobId};

/// The submitting shell's exported environment: a stale `SLURM_*` set from
/// another job and a `CUDA_VISIBLE_DEVICES` that must not survive.
fn base_env() -> BTreeMap<String, String> {
    env(&[
        ("PATH", "/usr/bin:/bin"),
        ("HOME", "/home/alice"),
        ("SLURM_NTASKS", "99"),
        ("SLURM_ARRAY_TASK_ID", "7"),
        ("SLURM_MEM_PER_CPU", "1"),
        ("CUDA_VISIBLE_DEVICES", "5"),
    ])
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn batch(job: &Job, node: &str, base: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let attempt = job.current_attempt().unwrap();
    batch_environment(&context(job, attempt, node, base))
}

fn context<'a>(
    job: &'a Job,
    attempt: &'a Attempt,
    node: &'a str,
    base: &'a BTreeMap<String, String>,
) -> LaunchContext<'a> {
    LaunchContext {
        job,
        attempt,
        node,
        cluster_name: "corral-test",
        checkpoint_dir: "/ckpt/job/attempt",
        base_env: base,
        dispatched_by: (2, 7),
        topology: None,
    }
}

/// A 2-node gang of 4 tasks per node at 2 CPUs each with 2 GPUs per node,
/// started at t=100 after a 1-node job took GPUs 0 and 1 of n1.
fn gang() -> (ClusterState, JobId) {
    let mut state = cluster(2, 4);
    let filler = submit(&mut state, spec("bob", 1, 2), at(10));
    start(&mut state, filler, at(20));
    let mut gang = spec("alice", 2, 2);
    gang.ntasks_per_node = Some(4);
    gang.cpus_per_task = 2;
    let id = submit(&mut state, gang, at(50));
    start(&mut state, id, at(100));
    (state, id)
}

#[test]
fn gang_batch_host_gets_exactly_slurms_variables() {
    let (state, id) = gang();
    let job = state.job(id).unwrap();
    assert_eq!(job.current_attempt().unwrap().batch_host(), Some("n1"));
    let expected = env(&[
        ("CORRAL_ATTEMPT", "1"),
        ("CORRAL_CHECKPOINT_DIR", "/ckpt/job/attempt"),
        ("CORRAL_DISPATCHED_BY", "2:7"),
        ("CUDA_VISIBLE_DEVICES", "2,3"),
        ("ENVIRONMENT", "BATCH"),
        ("GPU_DEVICE_ORDINAL", "2,3"),
        ("HOME", "/home/alice"),
        ("HOSTNAME", "n1"),
        ("PATH", "/usr/bin:/bin"),
        ("SLURMD_NODENAME", "n1"),
        ("SLURM_CLUSTER_NAME", "corral-test"),
        ("SLURM_CPUS_ON_NODE", "8"),
        ("SLURM_CPUS_PER_TASK", "2"),
        ("SLURM_GPUS_ON_NODE", "2"),
        ("SLURM_GPUS_PER_NODE", "2"),
        ("SLURM_GTIDS", "0"),
        ("SLURM_JOBID", "2"),
        ("SLURM_JOB_ACCOUNT", "ml"),
        ("SLURM_JOB_CPUS_PER_NODE", "8(x2)"),
        ("SLURM_JOB_END_TIME", "3700"),
        ("SLURM_JOB_GID", "1000"),
        ("SLURM_JOB_GPUS", "2,3"),
        ("SLURM_JOB_ID", "2"),
        ("SLURM_JOB_NAME", "train"),
        ("SLURM_JOB_NODELIST", "n[1-2]"),
        ("SLURM_JOB_NUM_NODES", "2"),
        ("SLURM_JOB_PARTITION", "gpu"),
        ("SLURM_JOB_START_TIME", "100"),
        ("SLURM_JOB_UID", "1000"),
        ("SLURM_JOB_USER", "alice"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_NNODES", "2"),
        ("SLURM_NODEID", "0"),
        ("SLURM_NODELIST", "n[1-2]"),
        ("SLURM_NODE_ALIASES", "(null)"),
        ("SLURM_NPROCS", "8"),
        ("SLURM_NTASKS", "8"),
        ("SLURM_NTASKS_PER_NODE", "4"),
        ("SLURM_PRIO_PROCESS", "0"),
        ("SLURM_PROCID", "0"),
        ("SLURM_SUBMIT_DIR", "/home/user"),
        ("SLURM_SUBMIT_HOST", "login1"),
        ("SLURM_TASKS_PER_NODE", "4(x2)"),
        ("SLURM_TOPOLOGY_ADDR", "n1"),
        ("SLURM_TOPOLOGY_ADDR_PATTERN", "node"),
        ("TMPDIR", "/tmp"),
    ]);
    assert_eq!(batch(job, "n1", &base_env()), expected);
}

#[test]
fn gang_second_node_differs_only_in_node_variables() {
    let (state, id) = gang();
    let job = state.job(id).unwrap();
    let first = batch(job, "n1", &base_env());
    let second = batch(job, "n2", &base_env());
    let differing: BTreeMap<&str, (&str, &str)> = first
        .iter()
        .filter(|(k, v)| second.get(*k) != Some(*v))
        .map(|(k, v)| (k.as_str(), (v.as_str(), second[k].as_str())))
        .collect();
    let expected: BTreeMap<&str, (&str, &str)> = [
        ("CUDA_VISIBLE_DEVICES", ("2,3", "0,1")),
        ("GPU_DEVICE_ORDINAL", ("2,3", "0,1")),
        ("HOSTNAME", ("n1", "n2")),
        ("SLURMD_NODENAME", ("n1", "n2")),
        ("SLURM_GTIDS", ("0", "1")),
        ("SLURM_JOB_GPUS", ("2,3", "0,1")),
        ("SLURM_NODEID", ("0", "1")),
        ("SLURM_PROCID", ("0", "1")),
        ("SLURM_TOPOLOGY_ADDR", ("n1", "n2")),
    ]
    .into_iter()
    .collect();
    assert_eq!(differing, expected);
    assert_eq!(first.len(), second.len());
    assert_eq!(second["SLURM_LOCALID"], "0");
    assert_eq!(second["SLURM_CPUS_ON_NODE"], "8");
}

#[test]
fn base_environment_comes_first_and_slurm_overrides_it() {
    let (state, id) = gang();
    let job = state.job(id).unwrap();
    let out = batch(job, "n1", &base_env());
    assert_eq!(out["HOME"], "/home/alice");
    assert_eq!(out["SLURM_NTASKS"], "8");
    assert_eq!(out["CUDA_VISIBLE_DEVICES"], "2,3");
    // Stale variables this job does not set are dropped, not inherited.
    assert!(!out.contains_key("SLURM_ARRAY_TASK_ID"));
    assert!(!out.contains_key("SLURM_MEM_PER_CPU"));
}

#[test]
fn qos_and_reservation_appear_only_when_set() {
    let (state, id) = gang();
    let mut job = state.job(id).unwrap().clone();
    let out = batch(&job, "n1", &BTreeMap::new());
    assert!(!out.contains_key("SLURM_JOB_QOS"));
    assert!(!out.contains_key("SLURM_JOB_RESERVATION"));
    job.qos = Some("high".into());
    job.spec.reservation = Some("maint".into());
    let out = batch(&job, "n1", &BTreeMap::new());
    assert_eq!(out["SLURM_JOB_QOS"], "high");
    assert_eq!(out["SLURM_JOB_RESERVATION"], "maint");
}

#[test]
fn a_job_without_gpus_hides_every_gpu() {
    let mut state = cluster(1, 4);
    let id = submit(&mut state, spec("alice", 1, 0), at(1));
    start(&mut state, id, at(2));
    let out = batch(state.job(id).unwrap(), "n1", &base_env());
    assert_eq!(out["CUDA_VISIBLE_DEVICES"], "NoDevFiles");
    for absent in [
        "SLURM_GPUS_ON_NODE",
        "SLURM_JOB_GPUS",
        "SLURM_GPUS_PER_NODE",
        "SLURM_GPUS",
    ] {
        assert!(!out.contains_key(absent), "{absent} is set");
    }
}

#[test]
fn defaults_set_no_task_count_and_derive_tasks_from_cpus() {
    let mut state = cluster(2, 1);
    let id = submit(&mut state, spec("alice", 2, 0), at(1));
    start(&mut state, id, at(2));
    let out = batch(state.job(id).unwrap(), "n1", &BTreeMap::new());
    assert!(!out.contains_key("SLURM_NTASKS"));
    assert!(!out.contains_key("SLURM_NPROCS"));
    assert!(!out.contains_key("SLURM_CPUS_PER_TASK"));
    assert!(!out.contains_key("SLURM_NTASKS_PER_NODE"));
    assert_eq!(out["SLURM_TASKS_PER_NODE"], "1(x2)");
    assert_eq!(out["SLURM_JOB_CPUS_PER_NODE"], "1(x2)");
    assert!(!out.contains_key("SLURM_RESTART_COUNT"));
    assert!(!out.contains_key("CORRAL_RESUME_FROM"));
}

#[test]
fn uneven_tasks_use_slurms_repetition_form() {
    let mut state = cluster(3, 0);
    let mut five = spec("alice", 2, 0);
    five.ntasks = Some(5);
    let id = submit(&mut state, five, at(1));
    start(&mut state, id, at(2));
    let out = batch(state.job(id).unwrap(), "n1", &BTreeMap::new());
    assert_eq!(out["SLURM_NTASKS"], "5");
    assert_eq!(out["SLURM_NPROCS"], "5");
    assert_eq!(out["SLURM_JOB_CPUS_PER_NODE"], "3(x2)");
    assert_eq!(out["SLURM_TASKS_PER_NODE"], "3,2");

    let mut state = cluster(3, 0);
    let mut seven = spec("alice", 3, 0);
    seven.ntasks = Some(7);
    let id = submit(&mut state, seven, at(1));
    start(&mut state, id, at(2));
    let out = batch(state.job(id).unwrap(), "n3", &BTreeMap::new());
    assert_eq!(out["SLURM_JOB_CPUS_PER_NODE"], "3(x3)");
    assert_eq!(out["SLURM_TASKS_PER_NODE"], "3,2(x2)");
    assert_eq!(out["SLURM_NODEID"], "2");
}

#[test]
fn memory_and_gpu_requests_are_echoed_as_given() {
    use corral_state::job::MemoryRequest;
    use corral_state::slurm::gres::GpuRequest;
    let (state, id) = gang();
    let mut job = state.job(id).unwrap().clone();
    job.spec.memory = MemoryRequest::PerGpuMb(4096);
    job.spec.gpus_per_node = Some(GpuRequest {
        gpu_type: Some("h100".into()),
        count: 2,
    });
    job.spec.cpus_per_gpu = Some(6);
    let out = batch(&job, "n1", &BTreeMap::new());
    assert_eq!(out["SLURM_MEM_PER_GPU"], "4096");
    assert_eq!(out["SLURM_GPUS_PER_NODE"], "h100:2");
    assert_eq!(out["SLURM_CPUS_PER_GPU"], "6");
    assert!(!out.contains_key("SLURM_MEM_PER_NODE"));
    job.spec.memory = MemoryRequest::PerNodeMb(65536);
    assert_eq!(
        batch(&job, "n1", &BTreeMap::new())["SLURM_MEM_PER_NODE"],
        "65536"
    );
    job.spec.memory = MemoryRequest::PerCpuMb(2048);
    assert_eq!(
        batch(&job, "n1", &BTreeMap::new())["SLURM_MEM_PER_CPU"],
        "2048"
    );
}

#[test]
fn an_array_task_knows_its_array() {
    let mut state = cluster(1, 0);
    let mut array = spec("alice", 1, 0);
    array.array = Some(ArraySpec {
        indices: vec![1, 3, 5, 7],
        throttle: None,
    });
    let first = submit(&mut state, array, at(1));
    let third = JobId(first.0 + 2);
    start(&mut state, third, at(2));
    let job = state.job(third).unwrap();
    let out = batch(job, "n1", &base_env());
    let array_vars: BTreeMap<&str, &str> = out
        .iter()
        .filter(|(k, _)| k.starts_with("SLURM_ARRAY_"))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let first_id = first.0.to_string();
    let expected: BTreeMap<&str, &str> = [
        ("SLURM_ARRAY_JOB_ID", first_id.as_str()),
        ("SLURM_ARRAY_TASK_COUNT", "4"),
        ("SLURM_ARRAY_TASK_ID", "5"),
        ("SLURM_ARRAY_TASK_MAX", "7"),
        ("SLURM_ARRAY_TASK_MIN", "1"),
        ("SLURM_ARRAY_TASK_STEP", "2"),
    ]
    .into_iter()
    .collect();
    assert_eq!(array_vars, expected);
    assert_eq!(out["SLURM_JOB_ID"], third.0.to_string());
    let (stdout, stderr) = output_paths(job, "n1", std::path::Path::new("/home/user"));
    let name = format!("/home/user/slurm-{}_5.out", first.0);
    assert_eq!(stdout.to_str(), Some(name.as_str()));
    assert_eq!(stderr, stdout);
}

#[test]
fn uneven_array_indices_have_no_step() {
    let mut state = cluster(1, 0);
    let mut array = spec("alice", 1, 0);
    array.array = Some(ArraySpec {
        indices: vec![0, 1, 4],
        throttle: None,
    });
    let first = submit(&mut state, array, at(1));
    start(&mut state, first, at(2));
    let out = batch(state.job(first).unwrap(), "n1", &BTreeMap::new());
    assert_eq!(out["SLURM_ARRAY_TASK_COUNT"], "3");
    assert_eq!(out["SLURM_ARRAY_TASK_MIN"], "0");
    assert_eq!(out["SLURM_ARRAY_TASK_MAX"], "4");
    assert!(!out.contains_key("SLURM_ARRAY_TASK_STEP"));
}

#[test]
fn a_requeued_job_resumes_from_its_checkpoint() {
    let mut state = cluster(2, 2);
    let id = submit(&mut state, spec("alice", 2, 1), at(1));
    start(&mut state, id, at(10));
    let first = batch(state.job(id).unwrap(), "n1", &BTreeMap::new());
    assert!(!first.contains_key("SLURM_RESTART_COUNT"));
    assert!(!first.contains_key("CORRAL_RESUME_FROM"));
    ok(
        &mut state,
        Command::ReportCheckpoint {
            job: id,
            attempt: 1,
            node: "n1".into(),
            step: 500,
            path: "/ckpt/train/step500".into(),
            at: at(20),
        },
    );
    ok(
        &mut state,
        Command::Requeue {
            job: id,
            by: user("alice"),
            at: at(30),
        },
    );
    for node in ["n1", "n2"] {
        ok(
            &mut state,
            Command::NodeReleased {
                job: id,
                attempt: 1,
                node: node.into(),
                at: at(31),
            },
        );
    }
    start(&mut state, id, at(40));
    let job = state.job(id).unwrap();
    assert_eq!(job.current_attempt().unwrap().number, 2);
    for node in ["n1", "n2"] {
        let out = batch(job, node, &BTreeMap::new());
        assert_eq!(out["SLURM_RESTART_COUNT"], "1");
        assert_eq!(out["CORRAL_RESUME_FROM"], "/ckpt/train/step500");
        assert_eq!(out["CORRAL_ATTEMPT"], "2");
        assert_eq!(out["SLURM_JOB_START_TIME"], "40");
        assert_eq!(out["SLURM_JOB_END_TIME"], "3640");
    }
}

#[test]
fn nodes_are_numbered_in_nodelist_order() {
    let mut state = cluster(10, 0);
    let id = submit(&mut state, spec("alice", 10, 0), at(1));
    start(&mut state, id, at(2));
    let job = state.job(id).unwrap();
    let allocation: Vec<&str> = job
        .current_attempt()
        .unwrap()
        .allocation
        .iter()
        .map(|a| a.node.as_str())
        .collect();
    // The test kit allocates in name order (n1, n10, n2, ...); Slurm numbers
    // nodes as the hostlist lists them (n1, n2, ..., n10).
    assert_eq!(allocation[1], "n10");
    let out = batch(job, "n10", &BTreeMap::new());
    assert_eq!(out["SLURM_JOB_NODELIST"], "n[1-10]");
    assert_eq!(out["SLURM_NODEID"], "9");
    assert_eq!(batch(job, "n2", &BTreeMap::new())["SLURM_NODEID"], "1");

    let mut reversed = job.current_attempt().unwrap().clone();
    reversed.allocation.reverse();
    let base = BTreeMap::new();
    let out = batch_environment(&context(job, &reversed, "n1", &base));
    assert_eq!(out["SLURM_NODEID"], "0");
    assert_eq!(out["SLURM_JOB_NODELIST"], "n[1-10]");
}

#[test]
fn step_tasks_get_their_ranks_and_the_steps_layout() {
    let (state, id) = gang();
    let job = state.job(id).unwrap();
    let attempt = job.current_attempt().unwrap();
    let step = block_layout(job, attempt, 8, 0);
    let on_n2 = placements(&step, "n2");
    assert_eq!(
        on_n2
            .iter()
            .map(|t| (t.procid, t.localid, t.nodeid))
            .collect::<Vec<_>>(),
        vec![(4, 0, 1), (5, 1, 1), (6, 2, 1), (7, 3, 1)]
    );
    let base = base_env();
    let ctx = context(job, attempt, "n2", &base);
    let out = task_environment(&ctx, &step, on_n2[1]);
    let batch_env = batch_environment(&ctx);
    // NODEID (1), NTASKS and NPROCS (8) already agree with the batch script's.
    let expected_changes = env(&[
        ("SLURM_DISTRIBUTION", "block"),
        ("SLURM_GTIDS", "4,5,6,7"),
        ("SLURM_LOCALID", "1"),
        ("SLURM_PROCID", "5"),
        ("SLURM_STEPID", "0"),
        ("SLURM_STEP_GPUS", "0,1"),
        ("SLURM_STEP_ID", "0"),
        ("SLURM_STEP_NODELIST", "n[1-2]"),
        ("SLURM_STEP_NUM_NODES", "2"),
        ("SLURM_STEP_NUM_TASKS", "8"),
        ("SLURM_STEP_TASKS_PER_NODE", "4(x2)"),
    ]);
    let changes: BTreeMap<String, String> = out
        .iter()
        .filter(|(k, v)| batch_env.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(changes, expected_changes);
    assert_eq!(out["SLURM_NODEID"], "1");
    assert_eq!(out["SLURM_NTASKS"], "8");
    assert_eq!(out["SLURM_TASKS_PER_NODE"], "4(x2)");
    assert_eq!(out["CUDA_VISIBLE_DEVICES"], "0,1");
}

#[test]
fn a_cyclic_step_deals_ranks_round_by_round_as_slurm_does() {
    let (state, id) = gang();
    let job = state.job(id).unwrap();
    let attempt = job.current_attempt().unwrap();
    let mut step = block_layout(job, attempt, 4, 0);
    step.distribution = corral_proto::step::TaskDistribution::Cyclic;
    // Slurm 22.05, `srun -l -m cyclic` with 2 tasks on each of n1 and n2:
    // n1 runs ranks 0 and 2, n2 ranks 1 and 3, and SLURM_GTIDS says so.
    let on_n2 = placements(&step, "n2");
    assert_eq!(
        on_n2
            .iter()
            .map(|t| (t.procid, t.localid, t.nodeid))
            .collect::<Vec<_>>(),
        vec![(1, 0, 1), (3, 1, 1)]
    );
    let base = base_env();
    let out = task_environment(&context(job, attempt, "n2", &base), &step, on_n2[1]);
    assert_eq!(out["SLURM_PROCID"], "3");
    assert_eq!(out["SLURM_LOCALID"], "1");
    assert_eq!(out["SLURM_GTIDS"], "1,3");
    assert_eq!(out["SLURM_DISTRIBUTION"], "cyclic");
}

#[test]
fn gpus_per_task_binds_each_task_to_its_own_gpus() {
    let (state, id) = gang();
    let job = state.job(id).unwrap();
    let attempt = job.current_attempt().unwrap();
    // n1's job GPUs are 2 and 3 (a filler job holds 0 and 1).
    let mut step = block_layout(job, attempt, 4, 0);
    step.gpus_per_task = Some(1);
    let base = base_env();
    let ctx = context(job, attempt, "n1", &base);
    let tasks = placements(&step, "n1");
    let seen: Vec<(String, String, String)> = tasks
        .iter()
        .map(|t| {
            let out = task_environment(&ctx, &step, *t);
            (
                out["CUDA_VISIBLE_DEVICES"].clone(),
                out["SLURM_STEP_GPUS"].clone(),
                out["SLURMD_TRES_BIND"].clone(),
            )
        })
        .collect();
    // As Slurm 22.05 with --gpus-per-task=1: CUDA_VISIBLE_DEVICES=0 for task 0,
    // 1 for task 1, ... of the node's job GPUs.
    assert_eq!(
        seen,
        vec![
            ("2".into(), "2".into(), "gpu:per_task:1".into()),
            ("3".into(), "3".into(), "gpu:per_task:1".into()),
        ]
    );
    let out = task_environment(&ctx, &step, tasks[1]);
    assert_eq!(out["GPU_DEVICE_ORDINAL"], "3");
    assert_eq!(out["SLURM_JOB_GPUS"], "2,3", "the job's GPUs stay listed");
}

#[test]
fn a_one_task_step_runs_on_the_first_node_only() {
    let (state, id) = gang();
    let job = state.job(id).unwrap();
    let attempt = job.current_attempt().unwrap();
    let step = block_layout(job, attempt, 1, 3);
    assert_eq!(step.nodes, vec!["n1".to_string()]);
    assert!(placements(&step, "n2").is_empty());
    let on_n1 = placements(&step, "n1");
    assert_eq!(
        on_n1,
        vec![TaskPlacement {
            procid: 0,
            localid: 0,
            nodeid: 0,
            ntasks: 1
        }]
    );
    let base = BTreeMap::new();
    let out = task_environment(&context(job, attempt, "n1", &base), &step, on_n1[0]);
    assert_eq!(out["SLURM_STEP_ID"], "3");
    assert_eq!(out["SLURM_STEP_NODELIST"], "n1");
    assert_eq!(out["SLURM_NNODES"], "1");
    assert_eq!(out["SLURM_TASKS_PER_NODE"], "1");
    assert_eq!(out["SLURM_JOB_NUM_NODES"], "2");
}

#[test]
fn output_files_follow_the_patterns() {
    let (state, id) = gang();
    let mut job = state.job(id).unwrap().clone();
    let workdir = std::path::Path::new("/work/dir");
    let (out, err) = output_paths(&job, "n1", workdir);
    assert_eq!(out, workdir.join("slurm-2.out"));
    assert_eq!(err, out);
    job.spec.stdout = Some("logs/%x-%j-%N.out".into());
    job.spec.stderr = Some("/scratch/%u/%j.err".into());
    let (out, err) = output_paths(&job, "n2", workdir);
    assert_eq!(out, workdir.join("logs/train-2-n2.out"));
    assert_eq!(err, std::path::PathBuf::from("/scratch/alice/2.err"));
    job.spec.stderr = None;
    job.spec.stdout = Some("bad-%q.out".into());
    let (out, err) = output_paths(&job, "n1", workdir);
    assert_eq!(out, workdir.join("bad-%q.out"));
    assert_eq!(err, out);
}

#[test]
fn salloc_gets_the_job_wide_variables_and_none_of_the_batch_hosts() {
    let (state, id) = gang();
    let job = state.job(id).unwrap();
    let attempt = job.current_attempt().unwrap();
    let base = base_env();
    let salloc =
        corral_agent::job::environment::allocation_environment(&context(job, attempt, "n1", &base));
    let batch = batch(job, "n1", &base);
    // What salloc sets, valued as the batch script sees it.
    for name in [
        "SLURM_JOB_ID",
        "SLURM_JOBID",
        "SLURM_JOB_NAME",
        "SLURM_JOB_NODELIST",
        "SLURM_NODELIST",
        "SLURM_JOB_NUM_NODES",
        "SLURM_NNODES",
        "SLURM_JOB_CPUS_PER_NODE",
        "SLURM_TASKS_PER_NODE",
        "SLURM_NTASKS_PER_NODE",
        "SLURM_JOB_PARTITION",
        "SLURM_CLUSTER_NAME",
        "SLURM_SUBMIT_DIR",
        "SLURM_NODE_ALIASES",
        "CORRAL_ATTEMPT",
    ] {
        assert_eq!(salloc.get(name), batch.get(name), "{name}");
        assert!(salloc.contains_key(name), "{name} missing");
    }
    // Nothing of the batch host's own, of the agent's, or of the job's
    // exported environment (the command keeps its own).
    for name in [
        "SLURMD_NODENAME",
        "SLURM_NODEID",
        "SLURM_PROCID",
        "SLURM_LOCALID",
        "SLURM_CPUS_ON_NODE",
        "SLURM_GTIDS",
        "CUDA_VISIBLE_DEVICES",
        "GPU_DEVICE_ORDINAL",
        "ENVIRONMENT",
        "HOSTNAME",
        "PATH",
        "HOME",
        "SLURM_JOB_UID",
        "TMPDIR",
    ] {
        assert!(
            !salloc.contains_key(name),
            "{name} set to {:?}",
            salloc.get(name)
        );
    }
}

#[test]
fn an_explicit_cpus_per_task_of_one_is_passed_on() {
    let mut state = cluster(1, 1);
    let mut asked = spec("alice", 1, 0);
    asked.cpus_per_task_given = true;
    let id = submit(&mut state, asked, at(1));
    start(&mut state, id, at(2));
    let out = batch(state.job(id).unwrap(), "n1", &BTreeMap::new());
    assert_eq!(out["SLURM_CPUS_PER_TASK"], "1");
}

#[test]
fn a_node_in_the_switch_tree_is_addressed_through_its_switches() {
    let (state, id) = gang();
    let job = state.job(id).unwrap();
    let attempt = job.current_attempt().unwrap();
    let place = corral_state::topology::TopologyAddress {
        address: "spine.leaf1.n1".into(),
        pattern: "switch.switch.node".into(),
    };
    let base = base_env();
    let ctx = LaunchContext {
        topology: Some(&place),
        ..context(job, attempt, "n1", &base)
    };
    let out = batch_environment(&ctx);
    assert_eq!(out["SLURM_TOPOLOGY_ADDR"], "spine.leaf1.n1");
    assert_eq!(out["SLURM_TOPOLOGY_ADDR_PATTERN"], "switch.switch.node");
}
