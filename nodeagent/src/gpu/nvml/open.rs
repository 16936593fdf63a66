//! Loading NVML and listing the GPUs, with errors that tell an operator what to
//! do (no driver, driver not loaded, no GPU).

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use crate::gpu::backend::{GpuInfo, MigInstance};
use crate::gpu::error::GpuError;
use crate::gpu::model_type::model_type;

/// Loads `libnvidia-ml.so.1` and initializes NVML.
pub fn init() -> Result<Nvml, GpuError> {
    Nvml::init().map_err(init_error)
}

/// What a failed `nvmlInit` means for the operator.
fn init_error(source: NvmlError) -> GpuError {
    match source {
        NvmlError::LibloadingError(_) | NvmlError::LibraryNotFound => {
            GpuError::NvmlLibraryMissing { source }
        }
        NvmlError::DriverNotLoaded => GpuError::NvmlDriverNotLoaded,
        source => GpuError::Nvml {
            action: "initialize".to_string(),
            source,
        },
    }
}

/// Every GPU's index, type, UUID and name.
pub fn inventory(nvml: &Nvml) -> Result<Vec<GpuInfo>, GpuError> {
    let failed = |action: String| move |source| GpuError::Nvml { action, source };
    let count = nvml
        .device_count()
        .map_err(failed("count the GPUs".to_string()))?;
    if count == 0 {
        return Err(GpuError::NvmlNoGpus);
    }
    (0..count)
        .map(|index| {
            let device = nvml
                .device_by_index(index)
                .map_err(failed(format!("open GPU {index}")))?;
            let name = device
                .name()
                .map_err(failed(format!("read GPU {index}'s name")))?;
            let uuid = device
                .uuid()
                .map_err(failed(format!("read GPU {index}'s UUID")))?;
            Ok(GpuInfo {
                index,
                model: model_type(&name),
                uuid,
                name,
                mig: mig_instances(&device, index),
                mig_mode: device.mig_mode().is_ok_and(|mode| mode.current == 1),
            })
        })
        .collect()
}

/// The MIG instances of a GPU in MIG mode, named as Slurm's NVML plugin names
/// them: `{slices}g.{memory GiB, rounded}gb` and the instance's UUID. Empty when
/// MIG is off or not supported. An instance NVML cannot describe is left out
/// and logged: the node then registers with fewer GPUs than configured, and is
/// drained until that is looked at (a GPU in MIG mode with no instances offers
/// none, see [`crate::gpu::GpuSlots`]).
fn mig_instances(device: &Device<'_>, index: u32) -> Vec<MigInstance> {
    let in_mig_mode = device.mig_mode().is_ok_and(|mode| mode.current == 1);
    if !in_mig_mode {
        return Vec::new();
    }
    let slots = match device.mig_device_count() {
        Ok(count) => count,
        Err(e) => {
            tracing::error!(
                gpu = index,
                "GPU {index} is in MIG mode, but NVML cannot count its instances ({e}); it offers none"
            );
            return Vec::new();
        }
    };
    let mut instances = Vec::new();
    for slot in 0..slots {
        let instance = match device.mig_device_by_index(slot) {
            Ok(instance) => instance,
            // Slots without an instance.
            Err(NvmlError::NotFound | NvmlError::InvalidArg) => continue,
            Err(e) => {
                tracing::error!(gpu = index, slot, "cannot open a MIG instance: {e}");
                continue;
            }
        };
        match (instance.attributes(), instance.uuid()) {
            (Ok(attributes), Ok(uuid)) => instances.push(MigInstance {
                profile: mig_profile(
                    attributes.gpu_instance_slice_count,
                    attributes.memory_size_mb,
                ),
                uuid,
            }),
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!(gpu = index, slot, "cannot describe a MIG instance: {e}");
            }
        }
    }
    instances
}

/// Slurm's profile name: compute slices, then memory in GiB rounded to the
/// nearest (`3g.20gb` for 3 slices and 19968 MiB).
fn mig_profile(slices: u32, memory_mb: u64) -> String {
    format!("{slices}g.{}gb", (memory_mb + 512) / 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_profiles_are_named_as_slurm_names_them() {
        // MiB / 1024, rounded half away from zero as Slurm's roundl.
        assert_eq!(mig_profile(3, 20480), "3g.20gb");
        assert_eq!(mig_profile(1, 4864), "1g.5gb");
        assert_eq!(mig_profile(2, 10751), "2g.10gb");
        assert_eq!(mig_profile(2, 10752), "2g.11gb");
    }

    #[test]
    fn a_missing_library_or_driver_gets_its_own_error() {
        assert!(matches!(
            init_error(NvmlError::LibraryNotFound),
            GpuError::NvmlLibraryMissing { .. }
        ));
        assert!(matches!(
            init_error(NvmlError::DriverNotLoaded),
            GpuError::NvmlDriverNotLoaded
        ));
        assert!(matches!(
            init_error(NvmlError::NoPermission),
            GpuError::Nvml { .. }
        ));
    }
}
