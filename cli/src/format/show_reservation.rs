//! `scontrol show reservation`: Slurm 22.05's record for one reservation
//! (`slurm_sprint_reservation_info`), five `Key=Value` lines and a blank one,
//! filled with what corral keeps: name, window, nodes, users, accounts and
//! the maintenance flag. What corral's reservations do not have (features,
//! partition, groups, licenses, burst buffers, power, a start delay) prints as
//! Slurm prints it unset: `(null)`, `n/a`.

use corral_state::Timestamp;
use corral_state::node::Node;
use corral_state::reservation::Reservation;
use corral_state::slurm::duration::{TimeLimit, format_time_limit};
use corral_state::slurm::hostlist;

use super::datetime::format_timestamp;
use super::terminal_safe::escape_controls;

/// Slurm's text for a string it holds no value for.
const NULL: &str = "(null)";

/// One reservation's record; `nodes` are the cluster's nodes (for the core
/// count), `now` decides ACTIVE or INACTIVE.
pub fn show_reservation(reservation: &Reservation, nodes: &[Node], now: Timestamp) -> String {
    let duration = reservation
        .end
        .as_ms()
        .checked_sub(reservation.start.as_ms())
        .map_or_else(
            || "N/A".to_string(),
            |ms| format_time_limit(TimeLimit::Seconds(ms / 1000)),
        );
    let names: Vec<&str> = reservation.nodes.iter().map(String::as_str).collect();
    // A corral node's CPUs are its cores (`show node`: one socket, one thread per core).
    let cores: u64 = nodes
        .iter()
        .filter(|n| reservation.nodes.contains(&n.name))
        .map(|n| u64::from(n.cpus))
        .sum();
    let tres = if cores == 0 {
        NULL.to_string()
    } else {
        format!("cpu={cores}")
    };
    let mut flags = Vec::new();
    if reservation.maintenance {
        flags.push("MAINT");
    }
    // Slurm sets SPEC_NODES on a reservation created with Nodes=; every
    // corral reservation names its nodes.
    flags.push("SPEC_NODES");
    let state = if reservation.is_active(now) {
        "ACTIVE"
    } else {
        "INACTIVE"
    };
    let mut out = format!(
        "ReservationName={} StartTime={} EndTime={} Duration={duration}\n",
        escape_controls(&reservation.name),
        format_timestamp(reservation.start),
        format_timestamp(reservation.end),
    );
    out.push_str(&format!(
        "   Nodes={} NodeCnt={} CoreCnt={cores} Features={NULL} PartitionName={NULL} Flags={}\n",
        escape_controls(&hostlist::compress(&names)),
        names.len(),
        flags.join(","),
    ));
    out.push_str(&format!("   TRES={tres}\n"));
    out.push_str(&format!(
        "   Users={} Groups={NULL} Accounts={} Licenses={NULL} State={state} BurstBuffer={NULL} Watts=n/a\n",
        list(reservation.users.iter()),
        list(reservation.accounts.iter()),
    ));
    out.push_str(&format!("   MaxStartDelay={NULL}\n\n"));
    out
}

/// A comma-separated list, or `(null)` when empty.
fn list<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let joined = names
        .map(|n| escape_controls(n).into_owned())
        .collect::<Vec<_>>()
        .join(",");
    if joined.is_empty() {
        NULL.to_string()
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::format::test_jobs::{nodes, scenario, t};

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn maintenance() -> Reservation {
        Reservation {
            name: "maint".into(),
            nodes: set(&["n1", "n2"]),
            start: t(0),
            end: t(2 * 3600),
            users: BTreeSet::new(),
            accounts: BTreeSet::new(),
            maintenance: true,
        }
    }

    #[test]
    fn an_active_maintenance_window() {
        let text = show_reservation(&maintenance(), &nodes(&scenario()), t(60));
        assert_eq!(
            text,
            "ReservationName=maint StartTime=2026-11-21T08:00:00 EndTime=2026-11-21T10:00:00 Duration=02:00:00\n\
             \x20  Nodes=n[1-2] NodeCnt=2 CoreCnt=128 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES\n\
             \x20  TRES=cpu=128\n\
             \x20  Users=(null) Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a\n\
             \x20  MaxStartDelay=(null)\n\n"
        );
    }

    #[test]
    fn a_future_reservation_for_users_and_accounts() {
        let reservation = Reservation {
            name: "demo".into(),
            nodes: set(&["n3"]),
            start: t(86_400),
            end: t(86_400 * 2 + 9_000),
            users: set(&["alice", "bob"]),
            accounts: set(&["nlp"]),
            maintenance: false,
        };
        let text = show_reservation(&reservation, &nodes(&scenario()), t(60));
        assert_eq!(
            text,
            "ReservationName=demo StartTime=2026-11-22T08:00:00 EndTime=2026-11-23T10:30:00 Duration=1-02:30:00\n\
             \x20  Nodes=n3 NodeCnt=1 CoreCnt=64 Features=(null) PartitionName=(null) Flags=SPEC_NODES\n\
             \x20  TRES=cpu=64\n\
             \x20  Users=alice,bob Groups=(null) Accounts=nlp Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a\n\
             \x20  MaxStartDelay=(null)\n\n"
        );
    }

    #[test]
    fn ended_windows_and_unknown_nodes() {
        let mut reservation = maintenance();
        reservation.nodes = set(&["gone"]);
        let text = show_reservation(&reservation, &nodes(&scenario()), t(2 * 3600));
        assert!(text.contains(" CoreCnt=0 "), "{text}");
        assert!(text.contains("\n   TRES=(null)\n"), "{text}");
        assert!(text.contains(" State=INACTIVE "), "{text}");
    }

    #[test]
    fn names_cannot_act_on_the_terminal() {
        let mut reservation = maintenance();
        reservation.name = "x\x1b[2J".into();
        reservation.users = set(&["a\rb"]);
        let text = show_reservation(&reservation, &[], t(0));
        assert!(text.starts_with("ReservationName=x\\x1b[2J "), "{text}");
        assert!(text.contains("Users=a\\x0db "), "{text}");
    }
}
