//! `sinfo -T` (`--reservation`): one line per reservation, as sinfo's
//! `print_sinfo_reservation` prints it: RESV_NAME (as wide as the longest
//! name, at least 9), STATE, START_TIME, END_TIME, DURATION and NODELIST;
//! "No reservations in the system" when there is none.

use corral_state::Timestamp;
use corral_state::reservation::Reservation;
use corral_state::slurm::duration::{TimeLimit, format_time_limit};
use corral_state::slurm::hostlist;

use super::datetime::format_timestamp;
use super::terminal_safe::escape_controls;

/// sinfo's reservation lines at `now`, with the header unless `noheader`.
pub fn sinfo_reservations(reservations: &[Reservation], noheader: bool, now: Timestamp) -> String {
    if reservations.is_empty() {
        return "No reservations in the system\n".to_string();
    }
    let names: Vec<String> = reservations
        .iter()
        .map(|r| escape_controls(&r.name).into_owned())
        .collect();
    let width = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(9);
    let mut out = String::new();
    if !noheader {
        out.push_str(&line(
            width,
            [
                "RESV_NAME",
                "STATE",
                "START_TIME",
                "END_TIME",
                "DURATION",
                "NODELIST",
            ],
        ));
    }
    for (reservation, name) in reservations.iter().zip(&names) {
        let duration = reservation
            .end
            .as_ms()
            .saturating_sub(reservation.start.as_ms())
            / 1000;
        let state = if reservation.is_active(now) {
            "ACTIVE"
        } else {
            "INACTIVE"
        };
        let nodes: Vec<&str> = reservation.nodes.iter().map(String::as_str).collect();
        out.push_str(&line(
            width,
            [
                name,
                state,
                &format_timestamp(reservation.start),
                &format_timestamp(reservation.end),
                &format_time_limit(TimeLimit::Seconds(duration)),
                &escape_controls(&hostlist::compress(&nodes)),
            ],
        ));
    }
    out
}

/// `%-Ws  %8s  %19s  %19s  %11s  %s`.
fn line(width: usize, [name, state, start, end, duration, nodes]: [&str; 6]) -> String {
    format!("{name:<width$}  {state:>8}  {start:>19}  {end:>19}  {duration:>11}  {nodes}\n")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn reservation(name: &str, start: u64, end: u64) -> Reservation {
        Reservation {
            name: name.into(),
            nodes: ["gpu01", "gpu02", "gpu03"].map(String::from).into(),
            start: Timestamp::from_secs(start),
            end: Timestamp::from_secs(end),
            users: BTreeSet::from(["alice".to_string()]),
            accounts: BTreeSet::new(),
            maintenance: false,
        }
    }

    #[test]
    fn lines_as_sinfo_prints_them() {
        let day = 86_400;
        let all = [
            reservation("maint", 1_000, 1_000 + 2 * 3600),
            reservation("a-long-reservation", 2 * day, 3 * day + 90 * 60),
        ];
        let text = sinfo_reservations(&all, false, Timestamp::from_secs(2_000));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "RESV_NAME              STATE           START_TIME             END_TIME     DURATION  NODELIST"
        );
        assert_eq!(
            lines[1],
            format!(
                "maint                 ACTIVE  {}  {}     02:00:00  gpu[01-03]",
                format_timestamp(Timestamp::from_secs(1_000)),
                format_timestamp(Timestamp::from_secs(1_000 + 7200))
            )
        );
        assert!(
            lines[2].starts_with("a-long-reservation  INACTIVE  "),
            "{}",
            lines[2]
        );
        assert!(
            lines[2].ends_with("   1-01:30:00  gpu[01-03]"),
            "{}",
            lines[2]
        );
        let bare = sinfo_reservations(&all, true, Timestamp::from_secs(2_000));
        assert!(bare.starts_with("maint "), "{bare}");
    }

    #[test]
    fn none_is_said() {
        assert_eq!(
            sinfo_reservations(&[], false, Timestamp(0)),
            "No reservations in the system\n"
        );
    }
}
