//! The simulated GPUs' state: plausible idle readings per model, and what fault
//! commands do to it. Pure: no socket, clock or randomness, so samples are the
//! same on every run.

use corral_state::mig::MigLayout;

use crate::gpu::backend::{GpuInfo, GpuProcess, GpuSample, MigInstance, XidEvent};
use crate::gpu::fault_command::FaultCommand;
use crate::gpu::xid::classify_xid;

/// At or above this temperature a simulated GPU reports itself unhealthy (real
/// data-center GPUs start slowing down near it).
pub const SIMULATED_THERMAL_LIMIT_C: u32 = 90;

/// The idle readings and full name of a simulated model.
struct Profile {
    name: String,
    idle_temperature_c: u32,
    idle_power_w: f64,
}

fn profile(model: &str) -> Profile {
    let (name, idle_temperature_c, idle_power_w) = match model {
        "h100" => ("NVIDIA H100 80GB HBM3", 33, 72.0),
        "h200" => ("NVIDIA H200", 32, 76.0),
        "a100" => ("NVIDIA A100-SXM4-80GB", 31, 61.0),
        "b200" => ("NVIDIA B200", 35, 140.0),
        "l40s" => ("NVIDIA L40S", 30, 36.0),
        other => return fallback_profile(other),
    };
    Profile {
        name: name.to_string(),
        idle_temperature_c,
        idle_power_w,
    }
}

fn fallback_profile(model: &str) -> Profile {
    Profile {
        name: format!("Simulated {}", model.to_ascii_uppercase()),
        idle_temperature_c: 32,
        idle_power_w: 50.0,
    }
}

/// One simulated GPU's changeable state.
#[derive(Debug, Clone)]
struct SimulatedGpu {
    temperature_c: u32,
    /// The XID that took the GPU out of service, until `heal`.
    xid_problem: Option<String>,
}

/// Every simulated GPU on the node.
#[derive(Debug)]
pub struct Fleet {
    infos: Vec<GpuInfo>,
    idle_temperature_c: Vec<u32>,
    idle_power_w: f64,
    gpus: Vec<SimulatedGpu>,
    /// (GPU index, pid) of the processes that opened a context on a GPU
    /// (`context GPU PID`), until they exit.
    contexts: Vec<(u32, u32)>,
}

impl Fleet {
    /// `count` idle, healthy GPUs of `model`; `seed` makes UUIDs differ between
    /// simulated nodes on one machine.
    /// The GPUs `mig` names are in MIG mode, split into its instances.
    pub fn new(count: u32, model: &str, mig: &MigLayout, seed: u64) -> Self {
        let profile = profile(model);
        let infos: Vec<GpuInfo> = (0..count)
            .map(|index| GpuInfo {
                index,
                model: model.to_string(),
                uuid: simulated_uuid(seed, index),
                name: profile.name.clone(),
                mig: mig
                    .profiles_of(index)
                    .unwrap_or_default()
                    .iter()
                    .enumerate()
                    .map(|(instance, profile)| MigInstance {
                        profile: profile.to_string(),
                        uuid: simulated_mig_uuid(seed, index, instance),
                    })
                    .collect(),
                mig_mode: mig.profiles_of(index).is_some(),
            })
            .collect();
        // Neighbouring GPUs idle a degree or two apart, as in a real chassis.
        let idle_temperature_c: Vec<u32> = (0..count)
            .map(|index| profile.idle_temperature_c + index % 3)
            .collect();
        let gpus = idle_temperature_c
            .iter()
            .map(|&temperature_c| SimulatedGpu {
                temperature_c,
                xid_problem: None,
            })
            .collect();
        Self {
            infos,
            idle_temperature_c,
            idle_power_w: profile.idle_power_w,
            gpus,
            contexts: Vec::new(),
        }
    }

    /// The processes that opened a context on a GPU and for which `alive`
    /// holds; the others are forgotten (they exited, and so did their
    /// contexts).
    pub fn contexts(&mut self, alive: impl Fn(u32) -> bool) -> Vec<GpuProcess> {
        self.contexts.retain(|(_, pid)| alive(*pid));
        self.contexts
            .iter()
            .filter_map(|(gpu, pid)| {
                let info = self.infos.iter().find(|i| i.index == *gpu)?;
                Some(GpuProcess {
                    uuid: info.uuid.clone(),
                    pid: *pid,
                })
            })
            .collect()
    }

    /// The GPUs' descriptions.
    pub fn infos(&self) -> &[GpuInfo] {
        &self.infos
    }

    /// Applies a fault command; returns the XID event it raises, if any, or why
    /// it was refused.
    pub fn apply(&mut self, command: &FaultCommand) -> Result<Option<XidEvent>, String> {
        let count = self.gpus.len();
        let index = command.gpu();
        let idle = usize::try_from(index)
            .ok()
            .and_then(|i| self.idle_temperature_c.get(i).copied());
        let gpu = usize::try_from(index)
            .ok()
            .and_then(|i| self.gpus.get_mut(i));
        let (Some(gpu), Some(idle)) = (gpu, idle) else {
            return Err(match count {
                0 => format!("GPU {index} is out of range: this node has no GPUs"),
                _ => format!(
                    "GPU {index} is out of range: this node has {count} simulated GPUs (0-{})",
                    count - 1
                ),
            });
        };
        match *command {
            FaultCommand::Xid { gpu: index, xid } => {
                let class = classify_xid(xid);
                if class.action.drains() {
                    gpu.xid_problem = Some(format!("XID {xid}: {}", class.meaning));
                }
                Ok(Some(XidEvent {
                    gpu: index,
                    xid,
                    detail: format!("injected through the control socket: {}", class.meaning),
                }))
            }
            FaultCommand::Heal { .. } => {
                gpu.xid_problem = None;
                gpu.temperature_c = idle;
                Ok(None)
            }
            FaultCommand::Temperature { celsius, .. } => {
                gpu.temperature_c = celsius;
                Ok(None)
            }
            FaultCommand::Context { gpu: index, pid } => {
                if self
                    .infos
                    .iter()
                    .any(|info| info.index == index && info.mig_mode)
                {
                    return Err(format!(
                        "GPU {index} is in MIG mode: its contexts run on its instances, which the simulator does not place processes on"
                    ));
                }
                if !self.contexts.contains(&(index, pid)) {
                    self.contexts.push((index, pid));
                }
                Ok(None)
            }
        }
    }

    /// Every GPU's current readings.
    pub fn sample(&self) -> Vec<GpuSample> {
        self.infos
            .iter()
            .zip(&self.gpus)
            .map(|(info, gpu)| {
                let problem = gpu.xid_problem.clone().or_else(|| {
                    (gpu.temperature_c >= SIMULATED_THERMAL_LIMIT_C).then(|| {
                        format!(
                            "temperature {} °C is at or above the limit of {} °C",
                            gpu.temperature_c, SIMULATED_THERMAL_LIMIT_C
                        )
                    })
                });
                GpuSample {
                    index: info.index,
                    temperature_c: Some(gpu.temperature_c),
                    power_w: Some(self.idle_power_w),
                    utilization_pct: Some(0),
                    memory_used_mb: Some(0),
                    ecc_uncorrected_volatile: Some(0),
                    retired_pages_pending: Some(false),
                    row_remap_pending: Some(false),
                    row_remap_failed: Some(false),
                    healthy: problem.is_none(),
                    problem,
                }
            })
            .collect()
    }
}

/// A UUID in NVIDIA's `GPU-8-4-4-4-12` hex form, fixed for (seed, index).
fn simulated_uuid(seed: u64, index: u32) -> String {
    uuid_text("GPU", fnv1a(seed, &index.to_le_bytes()))
}

/// A stable UUID for instance `instance` of simulated GPU `index`, in the
/// `MIG-...` form drivers since R470 give MIG instances.
fn simulated_mig_uuid(seed: u64, index: u32, instance: usize) -> String {
    let gpu = fnv1a(seed, &index.to_le_bytes());
    uuid_text("MIG", fnv1a(gpu, &(instance as u64).to_le_bytes()))
}

/// `PREFIX-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` from a hash.
fn uuid_text(prefix: &str, high: u64) -> String {
    let low = fnv1a(high, b"corral-simulated-gpu");
    format!(
        "{prefix}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        high >> 32,
        (high >> 16) & 0xffff,
        high & 0xffff,
        low >> 48,
        low & 0xffff_ffff_ffff
    )
}

/// FNV-1a over `bytes`, starting from `state` (use [`FNV_OFFSET`] to start fresh).
pub fn fnv1a(state: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(state, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// FNV-1a's initial state.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::model_type;

    #[test]
    fn known_models_have_names_that_map_back_to_them() {
        for model in ["h100", "h200", "a100", "b200", "l40s"] {
            let fleet = Fleet::new(1, model, &MigLayout::default(), FNV_OFFSET);
            assert_eq!(model_type(&fleet.infos()[0].name), model);
        }
    }

    #[test]
    fn uuids_differ_between_gpus_and_seeds_and_look_like_nvidia_ones() {
        let a = Fleet::new(2, "h100", &MigLayout::default(), 1);
        let b = Fleet::new(2, "h100", &MigLayout::default(), 2);
        let uuids = [&a.infos()[0].uuid, &a.infos()[1].uuid, &b.infos()[0].uuid];
        assert_ne!(uuids[0], uuids[1]);
        assert_ne!(uuids[0], uuids[2]);
        assert_eq!(uuids[0].len(), "GPU-".len() + 36);
        assert_eq!(
            Fleet::new(2, "h100", &MigLayout::default(), 1).infos()[1].uuid,
            *uuids[1]
        );
    }

    #[test]
    fn gpus_in_the_layout_list_their_instances_with_mig_uuids() {
        let layout: MigLayout = "1:3g.40gb*2".parse().unwrap();
        let fleet = Fleet::new(2, "h100", &layout, 7);
        assert!(fleet.infos()[0].mig.is_empty());
        let instances = &fleet.infos()[1].mig;
        let profiles: Vec<&str> = instances.iter().map(|i| i.profile.as_str()).collect();
        assert_eq!(profiles, ["3g.40gb", "3g.40gb"]);
        assert!(
            instances[0].uuid.starts_with("MIG-"),
            "{}",
            instances[0].uuid
        );
        assert_eq!(instances[0].uuid.len(), "MIG-".len() + 36);
        assert_ne!(instances[0].uuid, instances[1].uuid);
    }

    #[test]
    fn a_draining_xid_makes_the_gpu_unhealthy_until_healed() {
        let mut fleet = Fleet::new(2, "h100", &MigLayout::default(), 0);
        let event = fleet
            .apply(&FaultCommand::Xid { gpu: 1, xid: 79 })
            .unwrap()
            .unwrap();
        assert_eq!((event.gpu, event.xid), (1, 79));
        let samples = fleet.sample();
        assert!(samples[0].healthy);
        assert!(!samples[1].healthy);
        assert_eq!(
            samples[1].problem.as_deref(),
            Some("XID 79: GPU has fallen off the bus")
        );
        fleet.apply(&FaultCommand::Heal { gpu: 1 }).unwrap();
        assert!(fleet.sample()[1].healthy);
    }

    #[test]
    fn an_application_xid_raises_an_event_but_leaves_the_gpu_healthy() {
        let mut fleet = Fleet::new(1, "a100", &MigLayout::default(), 0);
        let event = fleet.apply(&FaultCommand::Xid { gpu: 0, xid: 13 }).unwrap();
        assert_eq!(event.map(|e| e.xid), Some(13));
        assert!(fleet.sample()[0].healthy);
    }

    #[test]
    fn heat_makes_a_gpu_unhealthy_and_heal_cools_it() {
        let mut fleet = Fleet::new(1, "h100", &MigLayout::default(), 0);
        let idle = fleet.sample()[0].temperature_c;
        fleet
            .apply(&FaultCommand::Temperature {
                gpu: 0,
                celsius: 89,
            })
            .unwrap();
        assert!(fleet.sample()[0].healthy);
        fleet
            .apply(&FaultCommand::Temperature {
                gpu: 0,
                celsius: 95,
            })
            .unwrap();
        let sample = &fleet.sample()[0];
        assert_eq!(sample.temperature_c, Some(95));
        assert!(!sample.healthy);
        assert!(sample.problem.as_deref().unwrap().contains("95 °C"));
        fleet.apply(&FaultCommand::Heal { gpu: 0 }).unwrap();
        assert_eq!(fleet.sample()[0].temperature_c, idle);
        assert!(fleet.sample()[0].healthy);
    }

    #[test]
    fn out_of_range_gpus_are_refused_with_the_range() {
        let mut fleet = Fleet::new(8, "h100", &MigLayout::default(), 0);
        let reason = fleet.apply(&FaultCommand::Heal { gpu: 8 }).unwrap_err();
        assert_eq!(
            reason,
            "GPU 8 is out of range: this node has 8 simulated GPUs (0-7)"
        );
    }
}
