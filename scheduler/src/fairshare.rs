//! Classic fair-share over the account tree: `F = 2^(-U/S)`, where `S` is the
//! account's normalised share (its shares over its siblings', times its parent's
//! normalised share) and `U` is its subtree's decayed usage over the whole
//! cluster's. An account that used exactly its share gets 0.5; an idle one 1.

use std::collections::BTreeMap;

use corral_state::ClusterState;
use corral_state::account::ROOT_ACCOUNT;

/// Fair-share factors by account, in [0, 1].
#[derive(Debug, Clone, Default)]
pub struct FairShare {
    factors: BTreeMap<String, f64>,
}

impl FairShare {
    /// Computes every account's factor from the state's decayed usage.
    pub fn compute(state: &ClusterState) -> Self {
        let accounts = state.accounts();
        let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for account in accounts.values() {
            if let Some(parent) = &account.parent {
                children
                    .entry(parent.as_str())
                    .or_default()
                    .push(account.name.as_str());
            }
        }
        let direct = |name: &str| {
            state
                .accounting()
                .by_account
                .get(name)
                .map_or(0.0, |u| u.decayed_gpu_ms as f64)
        };
        // Subtree usage, children before parents (iterative post-order).
        let mut subtree: BTreeMap<&str, f64> = BTreeMap::new();
        let mut stack = vec![(ROOT_ACCOUNT, false)];
        while let Some((name, expanded)) = stack.pop() {
            let kids = children.get(name).map(Vec::as_slice).unwrap_or(&[]);
            if expanded {
                let total = direct(name)
                    + kids
                        .iter()
                        .map(|k| subtree.get(k).copied().unwrap_or(0.0))
                        .sum::<f64>();
                subtree.insert(name, total);
            } else {
                stack.push((name, true));
                stack.extend(kids.iter().map(|k| (*k, false)));
            }
        }
        let total_usage = subtree.get(ROOT_ACCOUNT).copied().unwrap_or(0.0);
        let mut factors = BTreeMap::new();
        let mut stack = vec![(ROOT_ACCOUNT, 1.0f64)];
        while let Some((name, share)) = stack.pop() {
            let usage = if total_usage > 0.0 {
                subtree.get(name).copied().unwrap_or(0.0) / total_usage
            } else {
                0.0
            };
            let factor = if share > 0.0 {
                (-usage / share).exp2()
            } else {
                0.0
            };
            factors.insert(name.to_string(), factor);
            let kids = children.get(name).map(Vec::as_slice).unwrap_or(&[]);
            let sibling_shares: f64 = kids
                .iter()
                .filter_map(|k| accounts.get(*k))
                .map(|a| f64::from(a.shares))
                .sum();
            for kid in kids {
                let own = accounts.get(*kid).map_or(0.0, |a| f64::from(a.shares));
                let normalised = if sibling_shares > 0.0 {
                    share * own / sibling_shares
                } else {
                    0.0
                };
                stack.push((kid, normalised));
            }
        }
        FairShare { factors }
    }

    /// The factor of `account` (0 for unknown accounts).
    pub fn factor(&self, account: &str) -> f64 {
        self.factors.get(account).copied().unwrap_or(0.0)
    }
}
