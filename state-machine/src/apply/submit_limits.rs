//! Association limits at submission: `MaxSubmitJobs` and `GrpSubmitJobs`
//! bound a user's (in an account) and an account subtree's unfinished jobs
//! (pending, held, running, completing; each array task one job). A
//! submission that would pass one is refused with Slurm's words.

use crate::account::AssociationLimits;
use crate::rejection::Rejection;
use crate::state::ClusterState;

/// Slurm's refusal of a submission past a limit.
const VIOLATES_POLICY: &str =
    "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)";

/// Refuses adding `count` jobs of `user` charged to `account` when that passes
/// a submit limit.
pub(super) fn check(
    state: &ClusterState,
    user: &str,
    account: &str,
    count: usize,
) -> Result<(), Rejection> {
    let chain = state.account_lineage(account);
    let user_limits = state.users.get(user).map(|u| &u.limits);
    let accounts: Vec<(&str, &AssociationLimits)> = chain
        .iter()
        .filter_map(|name| state.accounts.get(*name).map(|a| (*name, &a.limits)))
        .collect();
    let max_submit = user_limits
        .and_then(|l| l.max_submit_jobs)
        .or_else(|| accounts.iter().find_map(|(_, l)| l.max_submit_jobs));
    let user_group = user_limits.and_then(|l| l.grp_submit_jobs);
    let account_groups: Vec<(&str, u32)> = accounts
        .iter()
        .filter_map(|(name, l)| l.grp_submit_jobs.map(|max| (*name, max)))
        .collect();
    if max_submit.is_none() && user_group.is_none() && account_groups.is_empty() {
        return Ok(());
    }
    let unfinished = || {
        state
            .queued
            .iter()
            .chain(state.active.iter())
            .filter_map(|id| state.jobs.get(id))
    };
    let own = unfinished()
        .filter(|j| j.spec.user == user && j.account == account)
        .count();
    for (limit, what) in [(max_submit, "MaxSubmitJobs"), (user_group, "GrpSubmitJobs")] {
        if let Some(max) = limit
            && own + count > max as usize
        {
            return Err(Rejection::LimitReached(format!(
                "{VIOLATES_POLICY}: user {user} has {own} unfinished jobs in account {account}, and {what}={max}"
            )));
        }
    }
    for (name, max) in account_groups {
        // The account and every account under it, found once per limit.
        let subtree: std::collections::BTreeSet<&str> = state
            .accounts
            .keys()
            .map(String::as_str)
            .filter(|a| state.account_lineage(a).contains(&name))
            .collect();
        let held = unfinished()
            .filter(|j| subtree.contains(j.account.as_str()))
            .count();
        if held + count > max as usize {
            return Err(Rejection::LimitReached(format!(
                "{VIOLATES_POLICY}: account {name} and the accounts under it have {held} unfinished jobs, and its GrpSubmitJobs={max}"
            )));
        }
    }
    Ok(())
}
