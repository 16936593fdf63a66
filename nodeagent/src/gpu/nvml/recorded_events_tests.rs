//! The XID path from NVML's event record to the agent's action, checked on
//! events as the driver delivers them: `nvmlEventData_t`'s `eventType` bits and
//! `eventData`, each beside the kernel-log line the driver writes with it (the
//! forms of NVIDIA's XID catalog and of operators' reports). No XID can be
//! raised on purpose on real hardware, so this is where the event-to-action
//! mapping is proven; the GPU tests prove registration, the wait loop and
//! shutdown.

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enums::event::XidError;

use super::xid_of;
use crate::gpu::xid::{XidAction, classify_xid};

/// `nvmlEventTypeSingleBitEccError`.
const SINGLE_BIT_ECC: u64 = 0x1;
/// `nvmlEventTypeDoubleBitEccError`.
const DOUBLE_BIT_ECC: u64 = 0x2;
/// `nvmlEventTypePState`.
const PSTATE: u64 = 0x4;
/// `nvmlEventTypeXidCriticalError`.
const XID_CRITICAL: u64 = 0x8;

/// One record: (kernel log line, eventType, eventData, the XID the agent acts
/// on, its action).
type Recorded = (&'static str, u64, u64, Option<u32>, Option<XidAction>);

const RECORDED: &[Recorded] = &[
    (
        "NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.",
        XID_CRITICAL,
        79,
        Some(79),
        Some(XidAction::DrainNode),
    ),
    (
        "NVRM: Xid (PCI:0000:3b:00): 13, pid=2481, name=python, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address",
        XID_CRITICAL,
        13,
        Some(13),
        Some(XidAction::KillJob),
    ),
    (
        "NVRM: Xid (PCI:0000:86:00): 31, pid=11423, name=python3, Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f3c_1a000000. Fault is of type FAULT_PDE ACCESS_TYPE_READ",
        XID_CRITICAL,
        31,
        Some(31),
        Some(XidAction::KillJob),
    ),
    (
        "NVRM: Xid (PCI:0000:b7:00): 48, pid=0, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 2, subpartition 0.",
        DOUBLE_BIT_ECC,
        0,
        Some(48),
        Some(XidAction::DrainGpu),
    ),
    (
        "NVRM: Xid (PCI:0000:41:00): 94, pid=7310, name=torchrun, Contained: SM (0x1). RST: No, D-RST: No",
        XID_CRITICAL,
        94,
        Some(94),
        Some(XidAction::KillJob),
    ),
    (
        "NVRM: Xid (PCI:0000:41:00): 95, pid=7310, name=torchrun, Uncontained: FBHUB. RST: Yes, D-RST: No",
        XID_CRITICAL,
        95,
        Some(95),
        Some(XidAction::DrainGpu),
    ),
    (
        "NVRM: Xid (PCI:0000:c1:00): 63, pid=0, Row Remapper: New row (0x00000000000a01f3) marked for remapping, reset gpu to activate.",
        XID_CRITICAL,
        63,
        Some(63),
        Some(XidAction::DrainGpu),
    ),
    (
        "NVRM: Xid (PCI:0000:c1:00): 45, pid=7310, name=python, Ch 00000010",
        XID_CRITICAL,
        45,
        Some(45),
        Some(XidAction::Ignore),
    ),
    (
        "NVRM: Xid (PCI:0000:9a:00): 119, pid=0, Timeout after 6s of waiting for RPC response from GPU0 GSP!",
        XID_CRITICAL,
        119,
        Some(119),
        Some(XidAction::DrainGpu),
    ),
    (
        "(a critical XID whose number the driver did not pass: NVML's 999)",
        XID_CRITICAL,
        999,
        Some(999),
        Some(XidAction::DrainGpu),
    ),
    (
        "(a critical XID and a power-state change delivered in one record)",
        XID_CRITICAL | PSTATE,
        79,
        Some(79),
        Some(XidAction::DrainNode),
    ),
    (
        "(a power-state change: not an error)",
        PSTATE,
        0,
        None,
        None,
    ),
    (
        "(a corrected single-bit ECC error: not an XID)",
        SINGLE_BIT_ECC,
        0,
        None,
        None,
    ),
];

/// What nvml-wrapper hands over for a raw record (its `EventData::new`).
fn as_delivered(event_type: u64, event_data: u64) -> (EventTypes, Option<XidError>) {
    let types = EventTypes::from_bits_truncate(event_type);
    let data = types
        .contains(EventTypes::CRITICAL_XID_ERROR)
        .then_some(if event_data == 999 {
            XidError::Unknown
        } else {
            XidError::Value(event_data)
        });
    (types, data)
}

#[test]
fn recorded_events_become_the_xid_and_action_the_catalog_gives() {
    for &(line, event_type, event_data, xid, action) in RECORDED {
        let (types, data) = as_delivered(event_type, event_data);
        let found = xid_of(types, data.as_ref());
        assert_eq!(found.as_ref().map(|(xid, _)| *xid), xid, "{line}");
        assert_eq!(
            found.map(|(xid, _)| classify_xid(xid).action),
            action,
            "{line}"
        );
    }
}

#[test]
fn an_xid_number_nvml_cannot_name_points_at_the_kernel_log() {
    let (xid, detail) =
        xid_of(EventTypes::CRITICAL_XID_ERROR, Some(&XidError::Unknown)).expect("an XID");
    assert_eq!(xid, 999);
    assert!(detail.contains("kernel log"), "{detail}");
    let (xid, detail) = xid_of(
        EventTypes::CRITICAL_XID_ERROR,
        Some(&XidError::Value(u64::from(u32::MAX) + 7)),
    )
    .expect("an XID");
    assert_eq!(xid, 999, "a number past u32 is not taken for another XID");
    assert!(detail.contains("kernel log"), "{detail}");
}

#[test]
fn event_types_are_named_as_nvml_names_them() {
    assert_eq!(
        super::event_names(EventTypes::CRITICAL_XID_ERROR | EventTypes::DOUBLE_BIT_ECC_ERROR),
        vec!["DOUBLE_BIT_ECC_ERROR", "CRITICAL_XID_ERROR"]
    );
}
