//! Pending reasons under Slurm's names, as squeue's `(Reason)` and scontrol's
//! `Reason=` print them.

use corral_state::job::PendingReason;

/// Slurm's name for `reason` (`Priority`, `JobHeldUser`, `QOSGrpGRES`). Reasons
/// corral adds beyond Slurm's keep their own name (`Topology`).
pub fn reason_name(reason: PendingReason) -> &'static str {
    match reason {
        PendingReason::None => "None",
        PendingReason::Priority => "Priority",
        PendingReason::Resources => "Resources",
        PendingReason::Dependency => "Dependency",
        PendingReason::DependencyNeverSatisfied => "DependencyNeverSatisfied",
        PendingReason::JobHeldUser => "JobHeldUser",
        PendingReason::JobHeldAdmin => "JobHeldAdmin",
        PendingReason::JobHoldMaxRequeue => "JobHoldMaxRequeue",
        PendingReason::BeginTime => "BeginTime",
        PendingReason::PartitionTimeLimit => "PartitionTimeLimit",
        PendingReason::PartitionDown => "PartitionDown",
        PendingReason::QosGrpGpuLimit => "QOSGrpGRES",
        PendingReason::QosGrpGpuRunMinutes => "QOSGrpGRESMinutes",
        PendingReason::QosMaxGpuPerUser => "QOSMaxGRESPerUser",
        PendingReason::QosMaxJobsPerUser => "QOSMaxJobsPerUserLimit",
        PendingReason::ReqNodeNotAvail => "ReqNodeNotAvail",
        PendingReason::Reservation => "Reservation",
        PendingReason::Topology => "Topology",
        PendingReason::JobArrayTaskLimit => "JobArrayTaskLimit",
        PendingReason::ReservationDeleted => "ReservationDeleted",
        PendingReason::AssocGrpJobsLimit => "AssocGrpJobsLimit",
        PendingReason::AssocMaxJobsLimit => "AssocMaxJobsLimit",
        PendingReason::AssocGrpGpuLimit => "AssocGrpGRES",
        PendingReason::AssocMaxWallDurationPerJobLimit => "AssocMaxWallDurationPerJobLimit",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_names() {
        assert_eq!(reason_name(PendingReason::Priority), "Priority");
        assert_eq!(reason_name(PendingReason::JobHeldUser), "JobHeldUser");
        assert_eq!(reason_name(PendingReason::QosGrpGpuLimit), "QOSGrpGRES");
        assert_eq!(reason_name(PendingReason::None), "None");
    }
}
