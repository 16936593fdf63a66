//! The processes NVML lists on each GPU (compute and graphics contexts): on a
//! whole GPU through its handle by UUID, on a GPU in MIG mode through each
//! instance's handle (by its `MIG-...` UUID), so a process is named by the instance it
//! runs on and a job's end never touches a sibling instance's processes.

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use crate::gpu::backend::{GpuInfo, GpuProcess};
use crate::gpu::error::GpuError;

/// Every process on every GPU (or MIG instance) of `infos`. A GPU that
/// cannot be listed (fallen off the bus, say) is left out, so the others
/// are still seen; only when none can be listed is it an error.
pub fn read(nvml: &Nvml, infos: &[GpuInfo]) -> Result<Vec<GpuProcess>, GpuError> {
    let failed = |action: String| move |source| GpuError::Nvml { action, source };
    let mut handles: Vec<(String, String)> = Vec::new();
    for info in infos {
        if info.mig.is_empty() {
            handles.push((info.uuid.clone(), format!("GPU {}", info.index)));
        } else {
            handles.extend(
                info.mig
                    .iter()
                    .map(|m| (m.uuid.clone(), format!("MIG instance {}", m.uuid))),
            );
        }
    }
    let mut found = Vec::new();
    let mut first_error = None;
    let mut listed = 0;
    for (uuid, what) in &handles {
        let listing = nvml
            .device_by_uuid(uuid.as_str())
            .map_err(failed(format!("open {what}")))
            .and_then(|device| {
                on(&device, uuid).map_err(failed(format!("list the processes on {what}")))
            });
        match listing {
            Ok(processes) => {
                listed += 1;
                found.extend(processes);
            }
            Err(e) => {
                tracing::debug!("{e}");
                first_error.get_or_insert(e);
            }
        }
    }
    if listed == 0
        && let Some(e) = first_error
    {
        return Err(e);
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
