//! scontrol's `show reservation [NAME]`: every reservation, or the one named
//! (exact name), read with `ListReservations`; scontrol's messages when there
//! is none (`No reservations in the system`, exit 0) or the name is unknown
//! (`Reservation NAME not found`, exit 1), both on standard output as
//! scontrol prints them.

use std::process::ExitCode;

use corral_proto::api::{Empty, ListNodesRequest};
use corral_proto::records;
use corral_state::Timestamp;
use corral_state::node::Node;
use corral_state::reservation::Reservation;

use super::older_controller;
use crate::connection::{Cluster, Retry};
use crate::format::show_reservation::show_reservation;
use crate::format::terminal_safe::escape_controls;
use crate::when;

/// `show reservation [NAME]`.
pub async fn show_reservations(
    cluster: &Cluster,
    name: Option<&str>,
    oneliner: bool,
) -> anyhow::Result<ExitCode> {
    let reservations = fetch(cluster, "scontrol show reservation").await?;
    let wanted = select(&reservations, name);
    let nodes = if wanted.is_empty() {
        Vec::new()
    } else {
        super::super::nodes::fetch(cluster, ListNodesRequest::default())
            .await?
            .0
    };
    let (text, status) = render(&wanted, name, &nodes, oneliner, Timestamp(when::now_ms()));
    print!("{text}");
    Ok(ExitCode::from(status))
}

/// Every reservation (`what` names the command in the error an older
/// controller gives).
pub async fn fetch(cluster: &Cluster, what: &str) -> anyhow::Result<Vec<Reservation>> {
    let reply = cluster
        .call(Retry::Idempotent, |mut c| async move {
            c.list_reservations(Empty {}).await
        })
        .await
        .map_err(|e| older_controller(e, what))?;
    reply
        .reservations_json
        .iter()
        .map(|r| records::decode::<Reservation>("reservation", r).map_err(Into::into))
        .collect()
}

/// The reservations to print: all, or the one named exactly `name`.
fn select<'a>(reservations: &'a [Reservation], name: Option<&str>) -> Vec<&'a Reservation> {
    reservations
        .iter()
        .filter(|r| name.is_none_or(|n| n == r.name))
        .collect()
}

/// What scontrol prints for `wanted`, and its exit status.
fn render(
    wanted: &[&Reservation],
    name: Option<&str>,
    nodes: &[Node],
    oneliner: bool,
    now: Timestamp,
) -> (String, u8) {
    if wanted.is_empty() {
        return match name {
            Some(name) => (
                format!("Reservation {} not found\n", escape_controls(name)),
                1,
            ),
            None => ("No reservations in the system\n".to_string(), 0),
        };
    }
    let text = wanted
        .iter()
        .map(|r| {
            let record = show_reservation(r, nodes, now);
            if oneliner {
                format!("{}\n", super::one_line(&record))
            } else {
                record
            }
        })
        .collect();
    (text, 0)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn reservation(name: &str) -> Reservation {
        Reservation {
            name: name.into(),
            nodes: BTreeSet::from(["n1".to_string()]),
            start: Timestamp::from_secs(0),
            end: Timestamp::from_secs(60),
            users: BTreeSet::from(["alice".to_string()]),
            accounts: BTreeSet::new(),
            maintenance: false,
        }
    }

    fn shown(all: &[Reservation], name: Option<&str>, oneliner: bool) -> (String, u8) {
        render(&select(all, name), name, &[], oneliner, Timestamp(0))
    }

    #[test]
    fn none_in_the_system_and_an_unknown_name() {
        assert_eq!(
            shown(&[], None, false),
            ("No reservations in the system\n".to_string(), 0)
        );
        let all = [reservation("a")];
        assert_eq!(
            shown(&all, Some("b"), false),
            ("Reservation b not found\n".to_string(), 1)
        );
        // Names are compared exactly, as scontrol does.
        assert_eq!(shown(&all, Some("A"), false).1, 1);
    }

    #[test]
    fn every_reservation_or_the_one_named() {
        let all = [reservation("a"), reservation("b")];
        let (text, status) = shown(&all, None, false);
        assert_eq!(status, 0);
        assert_eq!(text.matches("ReservationName=").count(), 2, "{text}");
        assert!(text.ends_with("MaxStartDelay=(null)\n\n"), "{text}");
        let (text, _) = shown(&all, Some("b"), true);
        assert_eq!(
            text,
            "ReservationName=b StartTime=1970-01-01T00:00:00 EndTime=1970-01-01T00:01:00 \
             Duration=00:01:00 Nodes=n1 NodeCnt=1 CoreCnt=0 Features=(null) \
             PartitionName=(null) Flags=SPEC_NODES TRES=(null) Users=alice Groups=(null) \
             Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a \
             MaxStartDelay=(null)\n"
        );
    }
}
