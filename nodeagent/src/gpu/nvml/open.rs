//! Loading NVML and listing the GPUs, with errors that tell an operator what to
//! do (no driver, driver not loaded, no GPU).

use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;

use crate::gpu::backend::GpuInfo;
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
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
