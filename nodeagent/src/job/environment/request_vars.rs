//! Variables Slurm sets only because the user asked for something: CPUs per task
//! or per GPU, tasks per node, GPU counts and memory. Each is set only when its
//! option was given, with the value as sbatch passes it on.

use corral_state::job::{JobSpec, MemoryRequest};
use corral_state::slurm::gres::GpuRequest;

use super::{Env, set};

/// Sets the variables of the options `spec` carries.
///
/// `SLURM_CPUS_PER_TASK` is set for any `--cpus-per-task`, also 1 (a job
/// stored before the record said whether it was given gets it when it is not
/// 1). Memory is in MiB, as Slurm prints it; `--mem=0` (all of each node's
/// memory) sets none.
pub(super) fn add(env: &mut Env, spec: &JobSpec) {
    if spec.cpus_per_task_given || spec.cpus_per_task != 1 {
        set(env, "SLURM_CPUS_PER_TASK", spec.cpus_per_task);
    }
    if let Some(cpus) = spec.cpus_per_gpu {
        set(env, "SLURM_CPUS_PER_GPU", cpus);
    }
    if let Some(tasks) = spec.ntasks_per_node {
        set(env, "SLURM_NTASKS_PER_NODE", tasks);
    }
    if let Some(gpus) = &spec.gpus_per_node {
        set(env, "SLURM_GPUS_PER_NODE", gpu_request(gpus));
    }
    if let Some(gpus) = &spec.gpus_total {
        set(env, "SLURM_GPUS", gpu_request(gpus));
    }
    if let Some(gpus) = &spec.gpus_per_task {
        set(env, "SLURM_GPUS_PER_TASK", gpu_request(gpus));
    }
    match spec.memory {
        MemoryRequest::PerNodeMb(mb) => set(env, "SLURM_MEM_PER_NODE", mb),
        MemoryRequest::PerCpuMb(mb) => set(env, "SLURM_MEM_PER_CPU", mb),
        MemoryRequest::PerGpuMb(mb) => set(env, "SLURM_MEM_PER_GPU", mb),
        MemoryRequest::Unspecified | MemoryRequest::WholeNode => {}
    }
}

/// A GPU request as the option was written: `h100:4`, or `4` without a type.
fn gpu_request(request: &GpuRequest) -> String {
    match &request.gpu_type {
        Some(gpu_type) => format!("{gpu_type}:{}", request.count),
        None => request.count.to_string(),
    }
}
