//! The processes NVML lists on each GPU (compute and graphics contexts): on a
//! whole GPU through its index, on a GPU in MIG mode through each instance's
//! handle (by its `MIG-...` UUID), so a process is named by the instance it
//! runs on and a job's end never touches a sibling instance's processes.

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use crate::gpu::backend::{GpuInfo, GpuProcess};
use crate::gpu::error::GpuError;

/// Every process on every GPU (or MIG instance) of `infos`.
pub fn read(nvml: &Nvml, infos: &[GpuInfo]) -> Result<Vec<GpuProcess>, GpuError> {
    let failed = |action: String| move |source| GpuError::Nvml { action, source };
    let mut found = Vec::new();
    for info in infos {
        if info.mig.is_empty() {
            let device = nvml
                .device_by_index(info.index)
                .map_err(failed(format!("open GPU {}", info.index)))?;
            found.extend(
                on(&device, &info.uuid)
                    .map_err(failed(format!("list the processes on GPU {}", info.index)))?,
            );
            continue;
        }
        for instance in &info.mig {
            let device = nvml
                .device_by_uuid(instance.uuid.as_str())
                .map_err(failed(format!("open MIG instance {}", instance.uuid)))?;
            found.extend(on(&device, &instance.uuid).map_err(failed(format!(
                "list the processes on MIG instance {}",
                instance.uuid
            )))?);
        }
    }
    found.sort_by(|a, b| (&a.uuid, a.pid).cmp(&(&b.uuid, b.pid)));
    found.dedup();
    Ok(found)
}

/// The processes on `device`, named by `uuid`: compute contexts, and
/// graphics ones where the GPU lists them (a data-centre GPU in compute mode
/// answers "not supported").
fn on(device: &Device<'_>, uuid: &str) -> Result<Vec<GpuProcess>, NvmlError> {
    let mut pids: Vec<u32> = device
        .running_compute_processes()?
        .into_iter()
        .map(|p| p.pid)
        .collect();
    match device.running_graphics_processes() {
        Ok(graphics) => pids.extend(graphics.into_iter().map(|p| p.pid)),
        Err(NvmlError::NotSupported) => {}
        Err(e) => return Err(e),
    }
    Ok(pids
        .into_iter()
        .map(|pid| GpuProcess {
            uuid: uuid.to_string(),
            pid,
        })
        .collect())
}
