//! Classic fair-share over the account tree: `F = 2^(-U/S)`, where `S` is the
//! account's normalised share (its shares over its siblings', times its parent's
//! normalised share) and `U` is its subtree's decayed usage over the whole
//! cluster's. An account that used exactly its share gets 0.5; an idle one 1.

use std::collections::BTreeMap;

use corral_state::ClusterState;
use corral_state::account::ROOT_ACCOUNT;

/// Fair-share factors by account, in [0, 1], and what they come from.
#[derive(Debug, Clone, Default)]
pub struct FairShare {
    factors: BTreeMap<String, f64>,
    tree: Vec<AccountShare>,
}

/// One account's place in the fair-share tree (what sshare shows).
#[derive(Debug, Clone, PartialEq)]
pub struct AccountShare {
    /// The account.
    pub account: String,
    /// Its depth below the root (the root is 0).
    pub depth: u32,
    /// Its shares among its siblings (`Fairshare=`).
    pub raw_shares: u32,
    /// `S`: its shares over its siblings', times its parent's.
    pub norm_shares: f64,
    /// Its subtree's decayed usage, GPU-milliseconds.
    pub raw_usage_gpu_ms: f64,
    /// `U`: that usage over the whole cluster's.
    pub effective_usage: f64,
    /// `2^(-U/S)`.
    pub factor: f64,
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
        let mut tree = Vec::new();
        let mut stack = vec![(ROOT_ACCOUNT, 1.0f64, 0u32)];
        while let Some((name, share, depth)) = stack.pop() {
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
            tree.push(AccountShare {
                account: name.to_string(),
                depth,
                raw_shares: accounts.get(name).map_or(1, |a| a.shares),
                norm_shares: share,
                raw_usage_gpu_ms: subtree.get(name).copied().unwrap_or(0.0),
                effective_usage: usage,
                factor,
            });
            let mut kids: Vec<&str> = children.get(name).cloned().unwrap_or_default();
            // Preorder, siblings by name: pushed in reverse so the first pops first.
            kids.sort_unstable_by(|a, b| b.cmp(a));
            let sibling_shares: f64 = kids
                .iter()
                .filter_map(|k| accounts.get(*k))
                .map(|a| f64::from(a.shares))
                .sum();
            for kid in kids {
                let own = accounts.get(kid).map_or(0.0, |a| f64::from(a.shares));
                let normalised = if sibling_shares > 0.0 {
                    share * own / sibling_shares
                } else {
                    0.0
                };
                stack.push((kid, normalised, depth + 1));
            }
        }
        FairShare { factors, tree }
    }

    /// Every account, the root first, each followed by its subtree
    /// (siblings by name), as sshare lists them.
    pub fn tree(&self) -> &[AccountShare] {
        &self.tree
    }

    /// The factor of `account` (0 for unknown accounts).
    pub fn factor(&self, account: &str) -> f64 {
        self.factors.get(account).copied().unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::Command;
    use corral_state::account::Account;
    use corral_state::testkit::{admin, cluster, ok};

    fn account(state: &mut ClusterState, name: &str, parent: &str, shares: u32) {
        ok(
            state,
            Command::SetAccount {
                account: Account {
                    name: name.into(),
                    parent: Some(parent.into()),
                    shares,
                    default_qos: None,
                    description: String::new(),
                    limits: Default::default(),
                },
                by: admin(),
            },
        );
    }

    #[test]
    fn the_tree_lists_every_account_in_preorder_with_its_normalised_share() {
        let mut state = cluster(1, 8);
        account(&mut state, "vision", "root", 30);
        account(&mut state, "vision-a", "vision", 1);
        account(&mut state, "vision-b", "vision", 3);
        let fair = FairShare::compute(&state);
        let rows: Vec<(&str, u32, f64)> = fair
            .tree()
            .iter()
            .map(|r| (r.account.as_str(), r.depth, r.norm_shares))
            .collect();
        // ml has 10 shares, vision 30: a quarter and three quarters.
        assert_eq!(
            rows,
            [
                ("root", 0, 1.0),
                ("ml", 1, 0.25),
                ("vision", 1, 0.75),
                ("vision-a", 2, 0.1875),
                ("vision-b", 2, 0.5625),
            ]
        );
        // Nobody used anything: every factor is 1, as sshare shows an idle tree.
        assert!(
            fair.tree()
                .iter()
                .all(|r| r.factor == 1.0 && r.effective_usage == 0.0)
        );
        assert_eq!(fair.factor("vision-b"), 1.0);
    }
}
