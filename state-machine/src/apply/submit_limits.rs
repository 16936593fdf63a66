//! Association limits at submission: `MaxSubmitJobs` and `GrpSubmitJobs`
//! bound a user's (in an account) and an account subtree's unfinished jobs
//! (pending, held, running, completing; each array task one job). A
//! submission that would pass one is refused with Slurm's words. The counts
//! come from the derived [`crate::unfinished_index`], so a check costs the
//! number of associations, not of jobs.

use std::collections::BTreeSet;

use crate::account::AssociationLimits;
use crate::rejection::Rejection;
use crate::state::ClusterState;

/// Slurm's refusal of a submission past a limit.
const VIOLATES_POLICY: &str =
    "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)";

/// Refuses adding `count` jobs of `user` charged to `account` when that passes
/// a submit limit.
pub(super) fn check(
    state: &mut ClusterState,
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
    let max_submit = state.inherited_limit(user, account, |l| l.max_submit_jobs);
    let user_group = user_limits.and_then(|l| l.grp_submit_jobs);
    // Each limited account, its limit, and the accounts under it (itself too).
    let groups: Vec<(String, u32, BTreeSet<String>)> = accounts
        .iter()
        .filter_map(|(name, l)| l.grp_submit_jobs.map(|max| (*name, max)))
        .map(|(name, max)| {
            let subtree = state
                .accounts
                .keys()
                .filter(|a| state.account_lineage(a).contains(&name))
                .cloned()
                .collect();
            (name.to_string(), max, subtree)
        })
        .collect();
    if max_submit.is_none() && user_group.is_none() && groups.is_empty() {
        return Ok(());
    }
    let ClusterState {
        unfinished_index,
        queued,
        active,
        jobs,
        ..
    } = state;
    let unfinished = queued
        .iter()
        .chain(active.iter())
        .filter_map(|id| jobs.get(id));
    let counts = unfinished_index.counts(unfinished);
    let own = counts
        .get(&(user.to_string(), account.to_string()))
        .copied()
        .unwrap_or(0);
    for (limit, what) in [(max_submit, "MaxSubmitJobs"), (user_group, "GrpSubmitJobs")] {
        if let Some(max) = limit
            && own + count > max as usize
        {
            return Err(Rejection::LimitReached(format!(
                "{VIOLATES_POLICY}: user {user} has {own} unfinished jobs in account {account}, and {what}={max}"
            )));
        }
    }
    for (name, max, subtree) in groups {
        let held: usize = counts
            .iter()
            .filter(|((_, account), _)| subtree.contains(account))
            .map(|(_, n)| n)
            .sum();
        if held + count > max as usize {
            return Err(Rejection::LimitReached(format!(
                "{VIOLATES_POLICY}: account {name} and the accounts under it have {held} unfinished jobs, and its GrpSubmitJobs={max}"
            )));
        }
    }
    Ok(())
}
