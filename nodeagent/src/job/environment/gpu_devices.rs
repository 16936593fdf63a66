//! Naming a job's GPUs as CUDA knows them. The rest of this module lists GPU
//! slots by number (`SLURM_JOB_GPUS`, `SLURM_STEP_GPUS` keep those numbers,
//! as Slurm's global list); on a node with GPUs split into MIG instances,
//! `CUDA_VISIBLE_DEVICES` and `GPU_DEVICE_ORDINAL` name each instance by its
//! `MIG-...` UUID instead, as Slurm's local list does, and a whole GPU by its
//! own index.

use super::Env;

/// The variables that name devices as CUDA does.
const DEVICE_VARIABLES: [&str; 2] = ["CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"];

/// Replaces each slot number in `CUDA_VISIBLE_DEVICES` and `GPU_DEVICE_ORDINAL`
/// by `devices[number]`. Leaves them alone when `devices` is empty or names
/// every slot by its own number (a node without MIG), and keeps a value that is
/// not a slot number (`NoDevFiles`).
pub fn name_gpu_devices(env: &mut Env, devices: &[String]) {
    let identity = devices
        .iter()
        .enumerate()
        .all(|(slot, device)| *device == slot.to_string());
    if identity {
        return;
    }
    for variable in DEVICE_VARIABLES {
        let Some(value) = env.get_mut(variable) else {
            continue;
        };
        let named: Vec<&str> = value
            .split(',')
            .map(|slot| {
                slot.parse::<usize>()
                    .ok()
                    .and_then(|n| devices.get(n))
                    .map_or(slot, String::as_str)
            })
            .collect();
        *value = named.join(",");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn instances_are_named_by_uuid_and_slot_numbers_stay_in_slurm_job_gpus() {
        let devices: Vec<String> = ["0", "MIG-aaa", "MIG-bbb", "2"].map(String::from).to_vec();
        let mut vars = env(&[
            ("CUDA_VISIBLE_DEVICES", "1,3"),
            ("GPU_DEVICE_ORDINAL", "1,3"),
            ("SLURM_JOB_GPUS", "1,3"),
        ]);
        name_gpu_devices(&mut vars, &devices);
        assert_eq!(vars["CUDA_VISIBLE_DEVICES"], "MIG-aaa,2");
        assert_eq!(vars["GPU_DEVICE_ORDINAL"], "MIG-aaa,2");
        assert_eq!(vars["SLURM_JOB_GPUS"], "1,3");
    }

    #[test]
    fn whole_gpus_and_no_gpus_are_left_as_they_are() {
        let mut vars = env(&[("CUDA_VISIBLE_DEVICES", "0,1")]);
        name_gpu_devices(&mut vars, &["0".into(), "1".into()]);
        name_gpu_devices(&mut vars, &[]);
        assert_eq!(vars["CUDA_VISIBLE_DEVICES"], "0,1");
        let mut none = env(&[("CUDA_VISIBLE_DEVICES", "NoDevFiles")]);
        name_gpu_devices(&mut none, &["MIG-a".into()]);
        assert_eq!(none["CUDA_VISIBLE_DEVICES"], "NoDevFiles");
    }
}
