//! One GPU's health sample through NVML, and the rule that decides whether the
//! readings make it unhealthy (pure, so it is tested without a GPU).

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError, TemperatureSensor};
use nvml_wrapper::error::NvmlError;

use crate::gpu::backend::GpuSample;

/// Bytes in a MiB.
const MIB: u64 = 1 << 20;

/// Reads GPU `index`. Readings the GPU does not support are `None`; `drained` is
/// the draining XID it raised earlier, if any.
pub fn sample_gpu(nvml: &Nvml, index: u32, drained: Option<&str>) -> GpuSample {
    let device = match nvml.device_by_index(index) {
        Ok(device) => device,
        Err(error) => {
            let problem = format!("NVML cannot open the GPU: {error}");
            return GpuSample {
                index,
                temperature_c: None,
                power_w: None,
                utilization_pct: None,
                memory_used_mb: None,
                ecc_uncorrected_volatile: None,
                retired_pages_pending: None,
                healthy: false,
                problem: Some(drained.map_or(problem, str::to_string)),
            };
        }
    };
    let mut lost = false;
    let temperature_c = reading(index, device.temperature(TemperatureSensor::Gpu), &mut lost);
    let power_w = reading(index, device.power_usage(), &mut lost).map(|mw| f64::from(mw) / 1000.0);
    let utilization_pct = reading(index, device.utilization_rates(), &mut lost).map(|u| u.gpu);
    let memory_used_mb = reading(index, device.memory_info(), &mut lost).map(|m| m.used / MIB);
    let ecc_uncorrected_volatile = reading(
        index,
        device.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile),
        &mut lost,
    );
    let retired_pages_pending = reading(index, device.are_pages_pending_retired(), &mut lost);
    let problem = health_problem(
        lost,
        drained,
        ecc_uncorrected_volatile,
        retired_pages_pending,
    );
    GpuSample {
        index,
        temperature_c,
        power_w,
        utilization_pct,
        memory_used_mb,
        ecc_uncorrected_volatile,
        retired_pages_pending,
        healthy: problem.is_none(),
        problem,
    }
}

/// A reading's value; an unsupported reading is `None`, and a lost GPU sets
/// `lost`.
fn reading<T>(index: u32, result: Result<T, NvmlError>, lost: &mut bool) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(NvmlError::GpuLost) => {
            *lost = true;
            None
        }
        Err(NvmlError::NotSupported) => None,
        Err(error) => {
            tracing::debug!(gpu = index, %error, "NVML reading failed");
            None
        }
    }
}

/// Why the readings make a GPU unhealthy, if they do: it fell off the bus, it
/// raised a draining XID, it had uncorrected ECC errors since the driver loaded,
/// or retired pages wait for a reset.
pub fn health_problem(
    lost: bool,
    drained: Option<&str>,
    ecc_uncorrected_volatile: Option<u64>,
    retired_pages_pending: Option<bool>,
) -> Option<String> {
    if lost {
        return Some(
            "GPU has fallen off the bus (NVML reports it lost): reboot the node".to_string(),
        );
    }
    if let Some(xid) = drained {
        return Some(xid.to_string());
    }
    if let Some(count) = ecc_uncorrected_volatile.filter(|&count| count > 0) {
        return Some(format!(
            "{count} uncorrected ECC errors since the driver loaded: reset the GPU"
        ));
    }
    if retired_pages_pending == Some(true) {
        return Some("retired memory pages are pending: reset the GPU to retire them".to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::health_problem;

    #[test]
    fn clean_or_unsupported_readings_are_healthy() {
        assert_eq!(health_problem(false, None, Some(0), Some(false)), None);
        assert_eq!(health_problem(false, None, None, None), None);
    }

    #[test]
    fn each_fault_is_named_with_what_to_do() {
        let lost = health_problem(true, None, None, None).unwrap();
        assert!(lost.contains("fallen off the bus"), "{lost}");
        let xid = health_problem(false, Some("XID 95: Uncontained ECC error"), Some(0), None);
        assert_eq!(xid.as_deref(), Some("XID 95: Uncontained ECC error"));
        let ecc = health_problem(false, None, Some(2), Some(false)).unwrap();
        assert!(ecc.starts_with("2 uncorrected ECC errors"), "{ecc}");
        let pending = health_problem(false, None, Some(0), Some(true)).unwrap();
        assert!(pending.contains("reset the GPU"), "{pending}");
    }
}
