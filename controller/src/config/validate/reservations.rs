//! `[[reservations]]` into reservations: names unique, nodes and accounts
//! defined, a window that ends after it starts, no two overlapping on a node.

use std::collections::BTreeSet;

use corral_state::reservation::Reservation;

use super::datetime::timestamp;
use super::nodes::all_defined;
use super::values::{Checked, hostlist, name};
use crate::config::error::Refusal;
use crate::config::file::ReservationSection;

/// Builds the reservations.
pub(crate) fn check(
    sections: &[ReservationSection],
    nodes: &BTreeSet<&str>,
    accounts: &BTreeSet<&str>,
) -> Checked<Vec<Reservation>> {
    let mut built: Vec<Reservation> = Vec::with_capacity(sections.len());
    for (i, section) in sections.iter().enumerate() {
        let key = |field: &str| format!("reservations[{i}].{field}");
        name(&key("name"), "reservation", &section.name)?;
        if built.iter().any(|r| r.name == section.name) {
            return Err(Refusal::new(
                key("name"),
                format!("reservation '{}' is defined twice", section.name),
            ));
        }
        let members = hostlist(&key("nodes"), &section.nodes)?;
        all_defined(&key("nodes"), &members, nodes)?;
        let start = timestamp(&key("start"), &section.start)?;
        let end = timestamp(&key("end"), &section.end)?;
        if end <= start {
            return Err(Refusal::new(key("end"), "must be after start"));
        }
        for (u, user) in section.users.iter().enumerate() {
            name(&format!("reservations[{i}].users[{u}]"), "user", user)?;
        }
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
        let reservation = Reservation {
            name: section.name.clone(),
            nodes: members.into_iter().collect(),
            start,
            end,
            users: section.users.iter().cloned().collect(),
            accounts: section.accounts.iter().cloned().collect(),
            maintenance: section.maintenance,
        };
        if let Some(other) = built.iter().find(|other| {
            other.overlaps_window(start, end) && !other.nodes.is_disjoint(&reservation.nodes)
        }) {
            return Err(Refusal::new(
                key("nodes"),
                format!(
                    "overlaps reservation '{}' on shared nodes in time; a node is in one reservation at a time",
                    other.name
                ),
            ));
        }
        built.push(reservation);
    }
    Ok(built)
}
