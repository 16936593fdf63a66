//! One GPU's health sample through NVML (with what each reading cost, for
//! `corral-bench nvml`), and the rule that decides whether the readings make
//! it unhealthy (pure, so it is tested without a GPU).
//!
//! A reading the GPU does not support is asked once: NVML's answer does not
//! change while the driver runs, and an unsupported call is not free (page
//! retirement, which Ampere and newer GPUs replaced by row remapping, took
//! 80 µs of a 90 µs sample on an H200).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError, TemperatureSensor};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::FieldValueSample;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::{
    NVML_FI_DEV_REMAPPED_FAILURE, NVML_FI_DEV_REMAPPED_PENDING,
};

use crate::gpu::backend::GpuSample;

/// Bytes in a MiB.
const MIB: u64 = 1 << 20;

/// The readings of a sample, in the order they are taken.
pub const READINGS: [&str; 8] = [
    "open",
    "temperature",
    "power",
    "utilization",
    "memory",
    "ecc_uncorrected",
    "retired_pages_pending",
    "row_remapping",
];

/// What one NVML reading took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadingCost {
    /// The reading (one of [`READINGS`]).
    pub reading: &'static str,
    /// How long NVML took to answer.
    pub took: Duration,
}

/// A GPU's readings that are not supported, and so are no longer asked for.
pub type Unsupported = BTreeSet<&'static str>;

/// Reads GPU `index`, timing each reading and skipping those in `unsupported`
/// (to which it adds the readings NVML says the GPU does not support).
/// `drained` is the draining XID it raised earlier, if any.
pub fn sample_gpu_timed(
    nvml: &Nvml,
    index: u32,
    drained: Option<&str>,
    unsupported: &mut Unsupported,
) -> (GpuSample, Vec<ReadingCost>) {
    let mut readings = Readings {
        index,
        unsupported,
        costs: Vec::with_capacity(READINGS.len()),
        lost: false,
    };
    let started = Instant::now();
    let opened = nvml.device_by_index(index);
    readings.costs.push(ReadingCost {
        reading: "open",
        took: started.elapsed(),
    });
    let device = match opened {
        Ok(device) => device,
        Err(error) => {
            let problem = format!("NVML cannot open the GPU: {error}");
            let sample = GpuSample {
                index,
                temperature_c: None,
                power_w: None,
                utilization_pct: None,
                memory_used_mb: None,
                ecc_uncorrected_volatile: None,
                retired_pages_pending: None,
                row_remap_pending: None,
                row_remap_failed: None,
                healthy: false,
                problem: Some(drained.map_or(problem, str::to_string)),
            };
            return (sample, readings.costs);
        }
    };
    let temperature_c = readings.take("temperature", || device.temperature(TemperatureSensor::Gpu));
    let power_w = readings
        .take("power", || device.power_usage())
        .map(|mw| f64::from(mw) / 1000.0);
    let utilization_pct = readings
        .take("utilization", || device.utilization_rates())
        .map(|u| u.gpu);
    let memory_used_mb = readings
        .take("memory", || device.memory_info())
        .map(|m| m.used / MIB);
    let ecc_uncorrected_volatile = readings.take("ecc_uncorrected", || {
        device.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
    });
    let retired_pages_pending = readings.take("retired_pages_pending", || {
        device.are_pages_pending_retired()
    });
    let remapping = readings.take("row_remapping", || {
        row_remapping(device.field_values_for(&[
            FieldId(NVML_FI_DEV_REMAPPED_PENDING),
            FieldId(NVML_FI_DEV_REMAPPED_FAILURE),
        ]))
    });
    let health = MemoryHealth {
        ecc_uncorrected_volatile,
        retired_pages_pending,
        row_remap_pending: remapping.and_then(|(pending, _)| pending),
        row_remap_failed: remapping.and_then(|(_, failed)| failed),
    };
    let problem = health_problem(readings.lost, drained, &health);
    let sample = GpuSample {
        index,
        temperature_c,
        power_w,
        utilization_pct,
        memory_used_mb,
        ecc_uncorrected_volatile,
        retired_pages_pending,
        row_remap_pending: health.row_remap_pending,
        row_remap_failed: health.row_remap_failed,
        healthy: problem.is_none(),
        problem,
    };
    (sample, readings.costs)
}

/// The readings of one sample as they are taken.
struct Readings<'a> {
    index: u32,
    unsupported: &'a mut Unsupported,
    costs: Vec<ReadingCost>,
    /// Some reading said the GPU fell off the bus.
    lost: bool,
}

impl Readings<'_> {
    /// Takes reading `name` unless the GPU does not support it, recording
    /// what it cost. An unsupported reading is `None` and is not asked again;
    /// a lost GPU sets `lost`.
    fn take<T>(
        &mut self,
        name: &'static str,
        call: impl FnOnce() -> Result<T, NvmlError>,
    ) -> Option<T> {
        if self.unsupported.contains(name) {
            return None;
        }
        let started = Instant::now();
        let result = call();
        self.costs.push(ReadingCost {
            reading: name,
            took: started.elapsed(),
        });
        match result {
            Ok(value) => Some(value),
            Err(NvmlError::GpuLost) => {
                self.lost = true;
                None
            }
            Err(NvmlError::NotSupported) => {
                self.unsupported.insert(name);
                None
            }
            Err(error) => {
                tracing::debug!(gpu = self.index, reading = name, %error, "NVML reading failed");
                None
            }
        }
    }
}

/// Row remapping's (pending, failed) from NVML's field values: each is `None`
/// where that field has no value. Both unsupported is `NotSupported` (GPUs
/// before Ampere, which retire pages instead).
fn row_remapping(
    fields: Result<Vec<Result<FieldValueSample, NvmlError>>, NvmlError>,
) -> Result<(Option<bool>, Option<bool>), NvmlError> {
    let fields = fields?;
    let flag = |position: usize| -> Result<bool, NvmlError> {
        let field = fields.get(position).ok_or(NvmlError::NotSupported)?;
        match field.as_ref().map_err(clone_error)?.value.as_ref() {
            Ok(SampleValue::U32(v)) => Ok(*v != 0),
            Ok(SampleValue::U64(v)) => Ok(*v != 0),
            Ok(SampleValue::I64(v)) => Ok(*v != 0),
            Ok(SampleValue::F64(v)) => Ok(*v != 0.0),
            Err(error) => Err(clone_error(error)),
        }
    };
    match (flag(0), flag(1)) {
        (Err(NvmlError::NotSupported), Err(NvmlError::NotSupported)) => {
            Err(NvmlError::NotSupported)
        }
        (Err(NvmlError::GpuLost), _) | (_, Err(NvmlError::GpuLost)) => Err(NvmlError::GpuLost),
        (pending, failed) => Ok((pending.ok(), failed.ok())),
    }
}

/// The errors a field value can carry that the sample tells apart.
fn clone_error(error: &NvmlError) -> NvmlError {
    match error {
        NvmlError::NotSupported => NvmlError::NotSupported,
        NvmlError::GpuLost => NvmlError::GpuLost,
        _ => NvmlError::Unknown,
    }
}

/// The readings that say whether a GPU's memory is sound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryHealth {
    /// Uncorrected ECC errors since the driver loaded.
    pub ecc_uncorrected_volatile: Option<u64>,
    /// Retired pages wait for a reset (GPUs before Ampere).
    pub retired_pages_pending: Option<bool>,
    /// Memory rows wait for a reset to be remapped (Ampere and newer).
    pub row_remap_pending: Option<bool>,
    /// A row could not be remapped (Ampere and newer).
    pub row_remap_failed: Option<bool>,
}

/// Why the readings make a GPU unhealthy, if they do: it fell off the bus, it
/// raised a draining XID, a memory row could not be remapped, it had
/// uncorrected ECC errors since the driver loaded, or retired pages or
/// remapped rows wait for a reset.
pub fn health_problem(lost: bool, drained: Option<&str>, memory: &MemoryHealth) -> Option<String> {
    if lost {
        return Some(
            "GPU has fallen off the bus (NVML reports it lost): reboot the node".to_string(),
        );
    }
    if let Some(xid) = drained {
        return Some(xid.to_string());
    }
    if memory.row_remap_failed == Some(true) {
        return Some(
            "a memory row could not be remapped: the GPU's memory cannot be repaired in the \
             field; take the GPU out of service"
                .to_string(),
        );
    }
    if let Some(count) = memory.ecc_uncorrected_volatile.filter(|&count| count > 0) {
        return Some(format!(
            "{count} uncorrected ECC errors since the driver loaded: reset the GPU"
        ));
    }
    if memory.retired_pages_pending == Some(true) {
        return Some("retired memory pages are pending: reset the GPU to retire them".to_string());
    }
    if memory.row_remap_pending == Some(true) {
        return Some("memory rows wait to be remapped: reset the GPU to remap them".to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean() -> MemoryHealth {
        MemoryHealth {
            ecc_uncorrected_volatile: Some(0),
            retired_pages_pending: Some(false),
            row_remap_pending: Some(false),
            row_remap_failed: Some(false),
        }
    }

    #[test]
    fn clean_or_unsupported_readings_are_healthy() {
        assert_eq!(health_problem(false, None, &clean()), None);
        assert_eq!(health_problem(false, None, &MemoryHealth::default()), None);
    }

    #[test]
    fn each_fault_is_named_with_what_to_do() {
        let lost = health_problem(true, None, &MemoryHealth::default()).unwrap();
        assert!(lost.contains("fallen off the bus"), "{lost}");
        let xid = health_problem(false, Some("XID 95: Uncontained ECC error"), &clean());
        assert_eq!(xid.as_deref(), Some("XID 95: Uncontained ECC error"));
        let ecc = MemoryHealth {
            ecc_uncorrected_volatile: Some(2),
            ..clean()
        };
        let ecc = health_problem(false, None, &ecc).unwrap();
        assert!(ecc.starts_with("2 uncorrected ECC errors"), "{ecc}");
        for memory in [
            MemoryHealth {
                retired_pages_pending: Some(true),
                ..clean()
            },
            MemoryHealth {
                row_remap_pending: Some(true),
                ..clean()
            },
        ] {
            let pending = health_problem(false, None, &memory).unwrap();
            assert!(pending.contains("reset the GPU"), "{pending}");
        }
        let failed = MemoryHealth {
            row_remap_failed: Some(true),
            row_remap_pending: Some(true),
            ..clean()
        };
        let failed = health_problem(false, None, &failed).unwrap();
        assert!(failed.contains("out of service"), "{failed}");
    }

    #[test]
    fn row_remapping_reads_both_flags_and_tells_unsupported_apart() {
        use nvml_wrapper::structs::device::FieldId;
        let field = |id: u32, value: Result<SampleValue, NvmlError>| {
            Ok(FieldValueSample {
                field: FieldId(id),
                timestamp: 0,
                latency: 0,
                value,
            })
        };
        let both = row_remapping(Ok(vec![
            field(NVML_FI_DEV_REMAPPED_PENDING, Ok(SampleValue::U32(1))),
            field(NVML_FI_DEV_REMAPPED_FAILURE, Ok(SampleValue::U32(0))),
        ]));
        assert_eq!(both.ok(), Some((Some(true), Some(false))));
        let unsupported = row_remapping(Ok(vec![
            field(NVML_FI_DEV_REMAPPED_PENDING, Err(NvmlError::NotSupported)),
            field(NVML_FI_DEV_REMAPPED_FAILURE, Err(NvmlError::NotSupported)),
        ]));
        assert!(matches!(unsupported, Err(NvmlError::NotSupported)));
        let lost = row_remapping(Ok(vec![
            field(NVML_FI_DEV_REMAPPED_PENDING, Err(NvmlError::GpuLost)),
            field(NVML_FI_DEV_REMAPPED_FAILURE, Ok(SampleValue::U32(0))),
        ]));
        assert!(matches!(lost, Err(NvmlError::GpuLost)));
        let half = row_remapping(Ok(vec![
            field(NVML_FI_DEV_REMAPPED_PENDING, Ok(SampleValue::U64(0))),
            field(NVML_FI_DEV_REMAPPED_FAILURE, Err(NvmlError::Unknown)),
        ]));
        assert_eq!(half.ok(), Some((Some(false), None)));
    }
}
