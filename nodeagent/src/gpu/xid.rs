//! What the agent does about an XID error: a table in code, from NVIDIA's "XID
//! Errors" catalog (<https://docs.nvidia.com/deploy/xid-errors/>, including
//! "Analyzing Xid Errors with the Xid Catalog" for Ampere and newer, whose
//! "Resolution Bucket" column says restart the application, reset the GPU or
//! reboot the node).
//!
//! Mapping: the catalog's RESTART_APP becomes [`XidAction::KillJob`],
//! RESET_GPU becomes [`XidAction::DrainGpu`] (the GPU stays out of service until
//! an operator resets and resumes it), a node reboot becomes
//! [`XidAction::DrainNode`], and errors that follow another error or that the
//! hardware corrected become [`XidAction::Ignore`].
//!
//! An XID not in the table is treated as [`XidAction::DrainGpu`]: NVML reports
//! only XIDs the driver calls critical, and a wrongly drained GPU costs one GPU
//! until an operator looks, while a faulty GPU left in service fails every job
//! placed on it.

use serde::{Deserialize, Serialize};

/// What the agent does when a GPU raises an XID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XidAction {
    /// Nothing: the XID follows another error or was corrected by the hardware.
    Ignore,
    /// An application error: kill the job on the GPU; the GPU stays in service.
    KillJob,
    /// Kill the job on the GPU and take the GPU out of service until an operator
    /// resumes it (it needs a reset).
    DrainGpu,
    /// Kill every job on the node and take the node out of service (it needs a
    /// reboot).
    DrainNode,
}

impl XidAction {
    /// Whether the job using the GPU is killed at once.
    pub fn kills_job(self) -> bool {
        !matches!(self, XidAction::Ignore)
    }

    /// Whether the GPU (or the whole node) leaves service.
    pub fn drains(self) -> bool {
        matches!(self, XidAction::DrainGpu | XidAction::DrainNode)
    }
}

/// An XID's action and what the catalog says it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XidClass {
    /// What the agent does.
    pub action: XidAction,
    /// The catalog's name for the error, for logs and operators.
    pub meaning: &'static str,
}

/// The meaning given to XIDs missing from the table.
pub const UNKNOWN_XID_MEANING: &str =
    "not in corral's XID table: treated as a GPU fault until an operator checks the kernel log";

/// Known XIDs, sorted by number. Meanings are the catalog's names.
const XID_TABLE: &[(u32, XidAction, &str)] = &[
    (
        8,
        XidAction::KillJob,
        "GPU stopped processing (channel idle timeout)",
    ),
    (
        13,
        XidAction::KillJob,
        "Graphics Engine Exception (application error)",
    ),
    (
        31,
        XidAction::KillJob,
        "GPU memory page fault (application error)",
    ),
    (
        43,
        XidAction::KillJob,
        "GPU stopped processing (application error)",
    ),
    (
        45,
        XidAction::Ignore,
        "Preemptive cleanup, due to previous errors (follows another XID or a killed process)",
    ),
    (48, XidAction::DrainGpu, "Double Bit ECC Error (DBE)"),
    (
        61,
        XidAction::DrainGpu,
        "Internal micro-controller breakpoint/warning",
    ),
    (62, XidAction::DrainGpu, "Internal micro-controller halt"),
    (
        63,
        XidAction::DrainGpu,
        "ECC page retirement or row remapping recording event (reset the GPU to apply)",
    ),
    (
        64,
        XidAction::DrainGpu,
        "ECC page retirement or row remapper recording failure",
    ),
    (68, XidAction::KillJob, "NVDEC0 Exception (video decoder)"),
    (69, XidAction::KillJob, "Graphics Engine class error"),
    (74, XidAction::DrainGpu, "NVLINK Error"),
    (79, XidAction::DrainNode, "GPU has fallen off the bus"),
    (
        92,
        XidAction::Ignore,
        "High single-bit ECC error rate (corrected by the hardware; the catalog marks it non-critical)",
    ),
    (
        94,
        XidAction::KillJob,
        "Contained ECC error (only the application that touched the memory is affected)",
    ),
    (
        95,
        XidAction::DrainGpu,
        "Uncontained ECC error (every application on the GPU is affected; reset the GPU)",
    ),
    (109, XidAction::KillJob, "Context Switch Timeout Error"),
    (119, XidAction::DrainGpu, "GSP RPC Timeout"),
    (120, XidAction::DrainGpu, "GSP Error"),
    (140, XidAction::DrainGpu, "Unrecovered ECC Error"),
    (
        154,
        XidAction::DrainGpu,
        "GPU Recovery Action Changed (the driver asks for a GPU reset or a reboot)",
    ),
];

/// What to do about `xid`, and what it means. Unknown XIDs get
/// [`XidAction::DrainGpu`] with [`UNKNOWN_XID_MEANING`].
pub fn classify_xid(xid: u32) -> XidClass {
    match XID_TABLE.binary_search_by_key(&xid, |(number, _, _)| *number) {
        Ok(found) => {
            let (_, action, meaning) = XID_TABLE[found];
            XidClass { action, meaning }
        }
        Err(_) => XidClass {
            action: XidAction::DrainGpu,
            meaning: UNKNOWN_XID_MEANING,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_without_duplicates() {
        assert!(XID_TABLE.windows(2).all(|pair| pair[0].0 < pair[1].0));
    }

    #[test]
    fn application_errors_kill_the_job_only() {
        for xid in [13, 31, 43, 94] {
            assert_eq!(classify_xid(xid).action, XidAction::KillJob, "XID {xid}");
        }
        assert!(
            classify_xid(13)
                .meaning
                .contains("Graphics Engine Exception")
        );
        assert!(classify_xid(31).meaning.contains("page fault"));
        assert!(classify_xid(94).meaning.starts_with("Contained ECC error"));
    }

    #[test]
    fn memory_and_firmware_faults_drain_the_gpu() {
        for xid in [48, 63, 64, 74, 95, 119, 120] {
            assert_eq!(classify_xid(xid).action, XidAction::DrainGpu, "XID {xid}");
        }
        assert!(classify_xid(48).meaning.contains("Double Bit ECC"));
        assert!(classify_xid(63).meaning.contains("row remapping"));
        assert!(classify_xid(74).meaning.contains("NVLINK"));
        assert!(
            classify_xid(95)
                .meaning
                .starts_with("Uncontained ECC error")
        );
    }

    #[test]
    fn falling_off_the_bus_drains_the_node() {
        let class = classify_xid(79);
        assert_eq!(class.action, XidAction::DrainNode);
        assert_eq!(class.meaning, "GPU has fallen off the bus");
    }

    #[test]
    fn corrected_and_follow_on_errors_are_ignored() {
        assert_eq!(classify_xid(45).action, XidAction::Ignore);
        assert_eq!(classify_xid(92).action, XidAction::Ignore);
        assert!(classify_xid(92).meaning.contains("single-bit"));
    }

    #[test]
    fn unknown_xids_drain_the_gpu() {
        for xid in [0, 1, 999, u32::MAX] {
            let class = classify_xid(xid);
            assert_eq!(class.action, XidAction::DrainGpu);
            assert_eq!(class.meaning, UNKNOWN_XID_MEANING);
        }
    }

    #[test]
    fn actions_say_whether_they_kill_and_drain() {
        assert!(!XidAction::Ignore.kills_job());
        assert!(XidAction::KillJob.kills_job() && !XidAction::KillJob.drains());
        assert!(XidAction::DrainGpu.kills_job() && XidAction::DrainGpu.drains());
        assert!(XidAction::DrainNode.drains());
    }
}
