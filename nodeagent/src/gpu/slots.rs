//! GPU slots: the GPUs as the scheduler is given them. A whole GPU is one slot;
//! a GPU in MIG mode is one slot per MIG instance, typed as Slurm's NVML plugin
//! names it (`a100_3g.20gb`). Slots are numbered in enumeration order (GPUs by
//! index, each one's instances in turn), as Slurm numbers a node's `gpu`
//! devices, so `SLURM_JOB_GPUS` lists slot numbers while `CUDA_VISIBLE_DEVICES`
//! names each slot as CUDA knows it ([`GpuSlots::devices`]): an instance by its
//! `MIG-...` UUID, and on such a node a whole GPU by its `GPU-...` UUID (CUDA's
//! ordinals need not be NVML's indices once MIG is on); elsewhere by index.
//! A GPU in MIG mode without instances offers no slot (the node then registers
//! with fewer GPUs than configured, and is drained), never itself whole.
//!
//! [`GpuSlots`] wraps a backend that speaks of physical GPUs and speaks of
//! slots: its inventory, its samples (an instance reports its GPU's readings)
//! and its XID events. An XID that takes the GPU out of service is raised for
//! every slot on it, so the jobs on all its instances end and every instance
//! is drained. An application XID (one that only kills the job) cannot be
//! pinned to an instance (the event as NVML's wrapper gives it names no
//! instance), so on a split GPU it kills nothing: killing every instance's
//! jobs would break MIG's isolation, and the faulting program gets the CUDA
//! error itself. On a node without MIG nothing changes.

use std::collections::BTreeMap;

use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use super::backend::{GpuBackend, GpuInfo, GpuProcess, GpuSample, XidEvent};
use super::details::NodeGpuDetails;
use super::error::GpuError;
use super::xid::classify_xid;

/// One slot: where it lives and how CUDA names it.
#[derive(Debug, Clone)]
struct Slot {
    /// The slot as the scheduler sees it (index = slot number).
    info: GpuInfo,
    /// The GPU it is on.
    physical: u32,
    /// What `CUDA_VISIBLE_DEVICES` names it by.
    device: String,
}

/// A backend seen as GPU slots.
pub struct GpuSlots {
    backend: Box<dyn GpuBackend>,
    slots: Vec<Slot>,
    /// Some GPU is split into MIG instances.
    split: bool,
}

impl std::fmt::Debug for GpuSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuSlots")
            .field("backend", &self.backend.kind())
            .field("slots", &self.slots)
            .field("split", &self.split)
            .finish()
    }
}

impl GpuSlots {
    /// The slots of `backend`'s GPUs, as they are now.
    pub fn new(backend: Box<dyn GpuBackend>) -> Self {
        let mut slots: Vec<Slot> = Vec::new();
        let gpus = backend.gpus();
        let split = gpus.iter().any(|gpu| gpu.mig_mode);
        for gpu in gpus {
            if gpu.mig_mode && gpu.mig.is_empty() {
                tracing::error!(
                    gpu = gpu.index,
                    "GPU {} is in MIG mode but has no MIG instances: it offers no GPU to jobs; create instances (nvidia-smi mig -cgi ... -C) or turn MIG off, then restart the agent",
                    gpu.index
                );
                continue;
            }
            if !gpu.mig_mode {
                let index = slot_number(slots.len());
                slots.push(Slot {
                    physical: gpu.index,
                    device: if split {
                        gpu.uuid.clone()
                    } else {
                        gpu.index.to_string()
                    },
                    info: GpuInfo { index, ..gpu },
                });
                continue;
            }
            for instance in &gpu.mig {
                slots.push(Slot {
                    physical: gpu.index,
                    device: instance.uuid.clone(),
                    info: GpuInfo {
                        index: slot_number(slots.len()),
                        model: format!("{}_{}", gpu.model, instance.profile),
                        uuid: instance.uuid.clone(),
                        name: format!("{} MIG {}", gpu.name, instance.profile),
                        mig: Vec::new(),
                        mig_mode: false,
                    },
                });
            }
        }
        Self {
            backend,
            slots,
            split,
        }
    }

    /// By slot number, what `CUDA_VISIBLE_DEVICES` names each slot by: the
    /// GPU's index for a whole GPU, the instance's UUID for a MIG instance.
    pub fn devices(&self) -> Vec<String> {
        self.slots.iter().map(|slot| slot.device.clone()).collect()
    }

    /// The GPUs' own samples, by GPU index (not slot).
    pub fn gpu_samples(&self) -> Vec<GpuSample> {
        self.backend.sample()
    }

    /// True when some GPU is split into MIG instances.
    pub fn has_mig(&self) -> bool {
        self.split
    }

    /// The slot numbers on each GPU.
    fn slots_by_gpu(&self) -> BTreeMap<u32, Vec<u32>> {
        let mut by_gpu: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for slot in &self.slots {
            by_gpu
                .entry(slot.physical)
                .or_default()
                .push(slot.info.index);
        }
        by_gpu
    }
}

/// Slot numbers fit in `u32`: a node has at most a few hundred.
fn slot_number(position: usize) -> u32 {
    u32::try_from(position).unwrap_or(u32::MAX)
}

impl GpuBackend for GpuSlots {
    fn kind(&self) -> &'static str {
        self.backend.kind()
    }

    fn gpus(&self) -> Vec<GpuInfo> {
        self.slots.iter().map(|slot| slot.info.clone()).collect()
    }

    fn sample(&self) -> Vec<GpuSample> {
        let samples = self.backend.sample();
        if !self.has_mig() {
            return samples;
        }
        self.slots
            .iter()
            .filter_map(|slot| {
                let sample = samples.iter().find(|s| s.index == slot.physical)?;
                Some(GpuSample {
                    index: slot.info.index,
                    ..sample.clone()
                })
            })
            .collect()
    }

    /// The physical GPUs, with their MIG instances.
    fn details(&self) -> NodeGpuDetails {
        self.backend.details()
    }

    /// Named by UUID: a slot's [`GpuInfo::uuid`] is its GPU's or instance's.
    fn processes(&self) -> Result<Vec<GpuProcess>, GpuError> {
        self.backend.processes()
    }

    fn xid_events(&self) -> UnboundedReceiver<XidEvent> {
        let mut physical = self.backend.xid_events();
        if !self.has_mig() {
            return physical;
        }
        let by_gpu = self.slots_by_gpu();
        let (send, events) = unbounded_channel();
        // The backend's receiver is read on a thread of its own: this is called
        // outside the runtime as well (tests, `corral-agent gpus`).
        let spawned = std::thread::Builder::new()
            .name("gpu-slot-xids".to_string())
            .spawn(move || {
                while let Some(event) = physical.blocking_recv() {
                    if !classify_xid(event.xid).action.drains() {
                        tracing::warn!(
                            gpu = event.gpu,
                            xid = event.xid,
                            "application XID {} on a GPU split into MIG instances: it names no instance, so no job is killed for it",
                            event.xid
                        );
                        continue;
                    }
                    let Some(slots) = by_gpu.get(&event.gpu) else {
                        tracing::warn!(
                            gpu = event.gpu,
                            xid = event.xid,
                            "XID on a GPU this node did not list"
                        );
                        continue;
                    };
                    for &slot in slots {
                        let sent = send.send(XidEvent {
                            gpu: slot,
                            ..event.clone()
                        });
                        if sent.is_err() {
                            return;
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!(
                "cannot start the thread that passes XID events to MIG instances ({e}): XID fail-fast is off"
            );
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use corral_state::mig::MigLayout;

    use super::*;
    use crate::gpu::{FaultCommand, SimulatedGpus};

    fn simulated(dir: &tempfile::TempDir, layout: &str) -> (GpuSlots, PathBuf) {
        let socket = dir.path().join("control.sock");
        let layout: MigLayout = layout.parse().expect("layout");
        let gpus = SimulatedGpus::new(3, "a100", &layout, socket.clone()).expect("GPUs");
        (GpuSlots::new(Box::new(gpus)), socket)
    }

    #[test]
    fn instances_become_slots_named_by_their_uuids() {
        let dir = tempfile::tempdir().expect("dir");
        let (slots, _) = simulated(&dir, "1:3g.20gb*2");
        let seen: Vec<(u32, String)> = slots
            .gpus()
            .into_iter()
            .map(|g| (g.index, g.model))
            .collect();
        assert_eq!(
            seen,
            [
                (0, "a100".to_string()),
                (1, "a100_3g.20gb".to_string()),
                (2, "a100_3g.20gb".to_string()),
                (3, "a100".to_string()),
            ]
        );
        let devices = slots.devices();
        assert!(devices[0].starts_with("GPU-"), "{}", devices[0]);
        assert!(devices[1].starts_with("MIG-") && devices[2].starts_with("MIG-"));
        assert_ne!(devices[1], devices[2]);
        assert!(
            devices[3].starts_with("GPU-"),
            "a whole GPU beside instances by its UUID: {}",
            devices[3]
        );
        let samples: Vec<u32> = slots.sample().iter().map(|s| s.index).collect();
        assert_eq!(samples, [0, 1, 2, 3]);
    }

    #[test]
    fn a_gpu_in_mig_mode_without_instances_offers_nothing() {
        let gpus = vec![
            GpuInfo {
                index: 0,
                model: "a100".into(),
                uuid: "GPU-0".into(),
                name: "NVIDIA A100".into(),
                mig: Vec::new(),
                mig_mode: true,
            },
            GpuInfo {
                index: 1,
                model: "a100".into(),
                uuid: "GPU-1".into(),
                name: "NVIDIA A100".into(),
                mig: Vec::new(),
                mig_mode: false,
            },
        ];
        let slots = GpuSlots::new(Box::new(Fixed(gpus)));
        let offered: Vec<(u32, String)> = slots
            .gpus()
            .into_iter()
            .map(|g| (g.index, g.uuid))
            .collect();
        assert_eq!(offered, [(0, "GPU-1".to_string())]);
        assert_eq!(slots.devices(), ["GPU-1"]);
    }

    /// A backend with a fixed inventory and no events.
    struct Fixed(Vec<GpuInfo>);

    impl GpuBackend for Fixed {
        fn kind(&self) -> &'static str {
            "fixed"
        }
        fn gpus(&self) -> Vec<GpuInfo> {
            self.0.clone()
        }
        fn sample(&self) -> Vec<GpuSample> {
            Vec::new()
        }
        fn details(&self) -> NodeGpuDetails {
            NodeGpuDetails::from_inventory(
                "fixed",
                self.0.clone(),
                crate::gpu::XidWatch::empty(crate::gpu::XidWatchState::Simulated),
            )
        }
        fn xid_events(&self) -> UnboundedReceiver<XidEvent> {
            unbounded_channel().1
        }

        fn processes(&self) -> Result<Vec<GpuProcess>, GpuError> {
            Ok(Vec::new())
        }
    }

    #[test]
    fn without_mig_slots_are_the_gpus() {
        let dir = tempfile::tempdir().expect("dir");
        let (slots, _) = simulated(&dir, "");
        assert!(!slots.has_mig());
        assert_eq!(slots.devices(), ["0", "1", "2"]);
    }

    #[test]
    fn an_xid_on_a_split_gpu_is_raised_for_each_of_its_instances() {
        let dir = tempfile::tempdir().expect("dir");
        let socket = dir.path().join("control.sock");
        let layout: MigLayout = "0:3g.20gb*2".parse().expect("layout");
        let gpus = SimulatedGpus::new(2, "a100", &layout, socket).expect("GPUs");
        let backend = std::sync::Arc::new(gpus);
        // The slots own a second handle on the same fleet through apply().
        let slots = GpuSlots::new(Box::new(SharedBackend(std::sync::Arc::clone(&backend))));
        let mut events = slots.xid_events();
        backend
            .apply(&FaultCommand::Xid { gpu: 0, xid: 79 })
            .expect("injected");
        // An application XID names no instance: nothing is raised for it.
        backend
            .apply(&FaultCommand::Xid { gpu: 0, xid: 13 })
            .expect("injected");
        backend
            .apply(&FaultCommand::Xid { gpu: 1, xid: 48 })
            .expect("injected");
        let mut seen = Vec::new();
        for _ in 0..3 {
            let event = events.blocking_recv().expect("an event");
            seen.push((event.gpu, event.xid));
        }
        assert_eq!(seen, [(0, 79), (1, 79), (2, 48)]);
        let unhealthy: Vec<u32> = slots
            .sample()
            .iter()
            .filter(|s| !s.healthy)
            .map(|s| s.index)
            .collect();
        assert_eq!(
            unhealthy,
            [0, 1, 2],
            "every instance reports its GPU's fault"
        );
    }

    /// A backend shared with the test, which injects faults through it.
    struct SharedBackend(std::sync::Arc<SimulatedGpus>);

    impl GpuBackend for SharedBackend {
        fn kind(&self) -> &'static str {
            self.0.kind()
        }
        fn gpus(&self) -> Vec<GpuInfo> {
            self.0.gpus()
        }
        fn sample(&self) -> Vec<GpuSample> {
            self.0.sample()
        }
        fn details(&self) -> NodeGpuDetails {
            self.0.details()
        }
        fn xid_events(&self) -> UnboundedReceiver<XidEvent> {
            self.0.xid_events()
        }

        fn processes(&self) -> Result<Vec<GpuProcess>, GpuError> {
            self.0.processes()
        }
    }
}
