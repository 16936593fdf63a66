//! `corral status`: the controller cluster as one replica sees it: leader, term,
//! log positions, state digest, job and node counts, and one line per member
//! with its role and, when the leader answered, how far it lags.

use corral_proto::api::ClusterStatusReply;
use corral_state::Timestamp;

use super::datetime::format_timestamp;
use super::table::{Align, Column, Style, render};

/// A summary block, then the members table (`*` marks the leader, `(this)` the
/// replica that answered). MATCHED and LAG are known only when the leader
/// answered (`-` otherwise); LAG counts log entries behind the leader's last.
/// Clock offsets beyond this are flagged (the controllers log them too).
const CLOCK_WARN_MS: u64 = 1_000;

pub fn cluster_status(reply: &ClusterStatusReply) -> String {
    let leader = match reply.leader_id {
        Some(id) => {
            let addr = if reply.leader_api_addr.is_empty() {
                String::new()
            } else {
                format!(" at {}", reply.leader_api_addr)
            };
            format!("{id}{addr}")
        }
        None if reply.leadership_unconfirmed => format!(
            "none known: replica {} led, but no quorum has answered it lately, so it stepped \
             down (it may be cut off from the others; ask another controller)",
            reply.this_id
        ),
        None => "none (an election is under way; retry in a moment)".to_string(),
    };
    let optional = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let mut out = String::new();
    let summary = [
        ("Cluster", reply.cluster_name.clone()),
        ("Leader", leader),
        ("Term", reply.term.to_string()),
        (
            "Log",
            format!(
                "last {}, applied {} (on replica {})",
                optional(reply.last_log_index),
                optional(reply.last_applied),
                reply.this_id
            ),
        ),
        ("Digest", reply.state_digest.clone()),
        (
            "Jobs",
            format!(
                "{} pending, {} running",
                reply.jobs_pending, reply.jobs_running
            ),
        ),
        ("Nodes", reply.nodes.to_string()),
        (
            "Clock",
            format!("{} UTC", format_timestamp(Timestamp(reply.clock_ms))),
        ),
    ];
    for (key, value) in summary {
        out.push_str(&format!("{:<8} {value}\n", format!("{key}:")));
    }
    out.push('\n');
    let rows: Vec<Vec<String>> = reply
        .members
        .iter()
        .map(|m| {
            let mut id = m.id.to_string();
            if reply.leader_id == Some(m.id) {
                id.push('*');
            }
            let mut notes = Vec::new();
            if m.id == reply.this_id {
                notes.push("(this)".to_string());
            }
            if let Some(offset) = m
                .clock_offset_ms
                .filter(|o| o.unsigned_abs() > CLOCK_WARN_MS)
            {
                notes.push(format!(
                    "clock {:.1} s {} the leader's: check its time synchronisation",
                    offset.unsigned_abs() as f64 / 1000.0,
                    if offset > 0 { "ahead of" } else { "behind" }
                ));
            }
            vec![
                id,
                if m.voter { "voter" } else { "learner" }.to_string(),
                m.peer_addr.clone(),
                m.api_addr.clone(),
                optional(m.lag),
                m.clock_offset_ms
                    .map_or_else(|| "-".to_string(), |o| format!("{o:+}")),
                notes.join(" "),
            ]
        })
        .collect();
    let columns = [
        Column::new("ID", Align::Right),
        Column::new("ROLE", Align::Left),
        Column::new("PEER", Align::Left),
        Column::new("API", Align::Left),
        Column::new("LAG", Align::Right),
        Column::new("CLOCK_MS", Align::Right),
        Column::new("", Align::Left),
    ];
    out.push_str(&render(
        &columns,
        &rows,
        Style {
            header: true,
            rule: false,
        },
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_proto::api::Member;

    fn member(id: u64, voter: bool, lag: Option<u64>) -> Member {
        Member {
            id,
            peer_addr: format!("10.0.0.{id}:7001"),
            api_addr: format!("10.0.0.{id}:7000"),
            voter,
            lag,
            clock_offset_ms: lag.map(|_| if id == 4 { 3_600_250 } else { 0 }),
        }
    }

    fn reply() -> ClusterStatusReply {
        ClusterStatusReply {
            cluster_name: "demo".into(),
            this_id: 1,
            leader_id: Some(1),
            leader_api_addr: "10.0.0.1:7000".into(),
            term: 4,
            last_log_index: Some(1200),
            last_applied: Some(1199),
            members: vec![
                member(1, true, Some(0)),
                member(2, true, Some(5)),
                member(4, false, Some(1190)),
            ],
            state_digest: "9f2c".into(),
            jobs_pending: 3,
            jobs_running: 2,
            nodes: 16,
            clock_ms: 1_795_248_000_000,
            leadership_unconfirmed: false,
        }
    }

    #[test]
    fn leader_view_with_lag() {
        let expected = "\
Cluster: demo
Leader:  1 at 10.0.0.1:7000
Term:    4
Log:     last 1200, applied 1199 (on replica 1)
Digest:  9f2c
Jobs:    3 pending, 2 running
Nodes:   16
Clock:   2026-11-21T08:00:00 UTC

ID ROLE    PEER          API            LAG CLOCK_MS
1* voter   10.0.0.1:7001 10.0.0.1:7000    0       +0 (this)
 2 voter   10.0.0.2:7001 10.0.0.2:7000    5       +0
 4 learner 10.0.0.4:7001 10.0.0.4:7000 1190 +3600250 clock 3600.2 s ahead of the leader's: check its time synchronisation
";
        assert_eq!(cluster_status(&reply()), expected);
    }

    #[test]
    fn follower_without_leader() {
        let mut reply = reply();
        reply.this_id = 2;
        reply.leader_id = None;
        reply.leader_api_addr.clear();
        for m in &mut reply.members {
            m.lag = None;
            m.clock_offset_ms = None;
        }
        let out = cluster_status(&reply);
        assert!(out.contains("Leader:  none (an election is under way; retry in a moment)\n"));
        assert!(
            out.contains(" 2 voter   10.0.0.2:7001 10.0.0.2:7000   -        - (this)\n"),
            "{out}"
        );
    }

    #[test]
    fn a_leader_no_quorum_answers_names_no_leader_and_says_why() {
        let mut reply = reply();
        reply.leader_id = None;
        reply.leader_api_addr.clear();
        reply.leadership_unconfirmed = true;
        let out = cluster_status(&reply);
        assert!(
            out.contains("Leader:  none known: replica 1 led, but no quorum has answered it"),
            "{out}"
        );
    }
}
