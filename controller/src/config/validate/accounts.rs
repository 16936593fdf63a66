//! `[[accounts]]` and `[[users]]`: the account tree under `root` (parents
//! defined, no cycles, ordered parents first as `SetAccount` requires, default
//! QOS defined) and users charging defined accounts.

use std::collections::{BTreeMap, BTreeSet};

use corral_state::Role;
use corral_state::account::{Account, ROOT_ACCOUNT, User};

use super::order::dependency_order;
use super::values::{Checked, name};
use crate::config::error::Refusal;
use crate::config::file::{AccountSection, RoleName, UserSection};

/// Builds the accounts, parents first; `qos` are the defined QOS names.
pub(crate) fn accounts(sections: &[AccountSection], qos: &BTreeSet<&str>) -> Checked<Vec<Account>> {
    let mut index_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, section) in sections.iter().enumerate() {
        let key = format!("accounts[{i}].name");
        name(&key, "account", &section.name)?;
        if let Some(first) = index_of.insert(&section.name, i) {
            return Err(Refusal::new(
                key,
                format!(
                    "account '{}' is defined twice (also accounts[{first}])",
                    section.name
                ),
            ));
        }
    }
    let mut deps = Vec::with_capacity(sections.len());
    let mut built = Vec::with_capacity(sections.len());
    for (i, section) in sections.iter().enumerate() {
        let key = |field: &str| format!("accounts[{i}].{field}");
        let is_root = section.name == ROOT_ACCOUNT;
        let parent = match (&section.parent, is_root) {
            (Some(_), true) => {
                return Err(Refusal::new(
                    key("parent"),
                    "the root account is the top of the tree and has no parent",
                ));
            }
            (None, true) => None,
            (None, false) => Some(ROOT_ACCOUNT.to_string()),
            (Some(parent), false) => Some(parent.clone()),
        };
        let mut needs = Vec::new();
        if let Some(parent) = &parent {
            match index_of.get(parent.as_str()) {
                Some(&j) => needs.push(j),
                None if parent == ROOT_ACCOUNT => {}
                None => {
                    return Err(Refusal::new(
                        key("parent"),
                        format!(
                            "account '{parent}' is not defined; define it under [[accounts]] or use {ROOT_ACCOUNT}"
                        ),
                    ));
                }
            }
        }
        deps.push(needs);
        let shares = section.shares.unwrap_or(1);
        if shares == 0 {
            return Err(Refusal::new(
                key("shares"),
                "must be at least 1; shares weigh an account against its siblings",
            ));
        }
        if let Some(unknown) = section
            .default_qos
            .as_ref()
            .filter(|q| !qos.contains(q.as_str()))
        {
            return Err(Refusal::new(
                key("default_qos"),
                format!("QOS '{unknown}' is not defined; define it under [[qos]]"),
            ));
        }
        built.push(Account {
            name: section.name.clone(),
            parent,
            shares,
            default_qos: section.default_qos.clone(),
            description: section.description.clone(),
            limits: Default::default(),
        });
    }
    let order = dependency_order(&deps).map_err(|i| {
        Refusal::new(
            format!("accounts[{i}].parent"),
            format!(
                "account '{}' is its own ancestor; accounts must form a tree under {ROOT_ACCOUNT}",
                sections[i].name
            ),
        )
    })?;
    let mut slots: Vec<Option<Account>> = built.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
}

/// Builds the users; `accounts` are the defined account names (`root` included).
pub(crate) fn users(sections: &[UserSection], accounts: &BTreeSet<&str>) -> Checked<Vec<User>> {
    let mut names = BTreeSet::new();
    let mut users = Vec::with_capacity(sections.len());
    for (i, section) in sections.iter().enumerate() {
        let key = |field: &str| format!("users[{i}].{field}");
        name(&key("name"), "user", &section.name)?;
        if !names.insert(section.name.as_str()) {
            return Err(Refusal::new(
                key("name"),
                format!("user '{}' is defined twice", section.name),
            ));
        }
        let Some(first) = section.accounts.first() else {
            return Err(Refusal::new(
                key("accounts"),
                "lists no account; a user needs at least one account to charge",
            ));
        };
        if let Some(unknown) = section
            .accounts
            .iter()
            .find(|a| !accounts.contains(a.as_str()))
        {
            return Err(Refusal::new(
                key("accounts"),
                format!("account '{unknown}' is not defined; define it under [[accounts]]"),
            ));
        }
        let default_account = section.default_account.as_ref().unwrap_or(first);
        if !section.accounts.contains(default_account) {
            return Err(Refusal::new(
                key("default_account"),
                format!(
                    "'{default_account}' is not one of the user's accounts; add it to accounts"
                ),
            ));
        }
        users.push(User {
            name: section.name.clone(),
            default_account: default_account.clone(),
            accounts: section.accounts.iter().cloned().collect(),
            role: match section.role {
                None | Some(RoleName::User) => Role::User,
                Some(RoleName::Operator) => Role::Operator,
                Some(RoleName::Admin) => Role::Admin,
            },
            limits: Default::default(),
        });
    }
    Ok(users)
}
