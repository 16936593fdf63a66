//! End to end on this machine's real GPUs: `corral local up --gpu-backend nvml`
//! (three `corrald`, one `corral-agent --gpus nvml`), the node registered with
//! the GPUs NVML finds, and a job given one GPU running a CUDA program (a
//! PyTorch matrix product, where python3 has torch) that reports the device it
//! used: the GPU corral allocated, and no other.
//!
//! Where there is no NVIDIA GPU the test says it is skipped and passes; with
//! `CORRAL_REQUIRE_GPU=1` it fails instead, and also requires python3 with
//! torch, so a run on a GPU machine cannot pass by skipping.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::{LocalCluster, script, submit, wait_job};

/// The CUDA program: identifies the device it sees and checks a matrix product
/// against the CPU's.
const CUDA_PROGRAM: &str = r#"
import torch
assert torch.cuda.is_available(), "CUDA is not available to the job"
props = torch.cuda.get_device_properties(0)
a = torch.randn(2048, 2048, device="cuda", dtype=torch.float32)
product = a @ a
torch.cuda.synchronize()
reference = a.cpu().double() @ a.cpu().double()
error = (product.cpu().double() - reference).abs().max().item() / reference.abs().max().item()
print(f"cuda_device_count={torch.cuda.device_count()}")
print(f"cuda_device_name={props.name}")
print(f"cuda_device_uuid={getattr(props, 'uuid', 'unknown')}")
print(f"matmul_relative_error={error:.3e}")
"#;

fn required() -> bool {
    std::env::var("CORRAL_REQUIRE_GPU").as_deref() == Ok("1")
}

#[test]
fn a_job_given_one_real_gpu_runs_cuda_on_that_gpu() {
    let inventory = match corral_agent::gpu::nvml_inventory() {
        Ok(found) => found,
        Err(error) => {
            assert!(
                !required(),
                "CORRAL_REQUIRE_GPU=1 but there is no usable GPU: {error}"
            );
            eprintln!("skipped: no NVIDIA GPU here ({error})");
            return;
        }
    };
    let cluster = LocalCluster::start_with_args(3, &["--gpu-backend", "nvml"]);
    let dir = cluster.dir.path();
    let output = dir.join("cuda.out");
    let has_torch = std::process::Command::new("python3")
        .args(["-c", "import torch"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_torch || !required(),
        "CORRAL_REQUIRE_GPU=1 needs python3 with torch for the CUDA program"
    );
    let program = if has_torch {
        format!("python3 - <<'EOF'\n{CUDA_PROGRAM}\nEOF\n")
    } else {
        eprintln!("python3 has no torch: the job checks its GPU variables only");
        String::new()
    };
    let path = script(
        dir,
        "cuda.sh",
        &format!(
            "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --output={}\n\
             echo \"CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES\"\n\
             echo \"SLURM_JOB_GPUS=$SLURM_JOB_GPUS\"\n{program}",
            output.display()
        ),
    );
    let id = submit(&cluster, &path);
    let job = wait_job(&cluster, &id, Duration::from_secs(180), "completion", |j| {
        j["state"] == "Completed" || j["state"] == "Failed"
    });
    let out = std::fs::read_to_string(&output).unwrap_or_default();
    eprintln!("job {id} wrote:\n{out}");
    assert_eq!(job["state"], "Completed", "{job}\n{out}");
    let allocation = &job["attempts"][0]["allocation"][0];
    let gpus = allocation["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 1, "{allocation}");
    let index = gpus[0].as_u64().unwrap() as u32;
    assert!(
        out.contains(&format!("CUDA_VISIBLE_DEVICES={index}\n")),
        "{out}"
    );
    assert!(out.contains(&format!("SLURM_JOB_GPUS={index}\n")), "{out}");
    if !has_torch {
        return;
    }
    let value = |key: &str| {
        out.lines()
            .find_map(|line| line.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key} in:\n{out}"))
            .to_string()
    };
    assert_eq!(value("cuda_device_count"), "1", "the job sees one GPU");
    let allocated = inventory
        .iter()
        .find(|gpu| gpu.index == index)
        .unwrap_or_else(|| panic!("GPU {index} is not in NVML's inventory {inventory:?}"));
    assert_eq!(value("cuda_device_name"), allocated.name);
    let uuid = value("cuda_device_uuid");
    if uuid != "unknown" {
        assert_eq!(
            format!("GPU-{}", uuid.trim_start_matches("GPU-")),
            allocated.uuid,
            "CUDA ran on another GPU than the one allocated"
        );
    }
    let error: f64 = value("matmul_relative_error").parse().unwrap();
    assert!(error < 1e-3, "the GPU's matrix product is wrong: {error}");
}
