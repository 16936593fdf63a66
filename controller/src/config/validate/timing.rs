//! Raft timing, leader loop intervals, the kill wait and node liveness timeouts:
//! positive (or bounded), and ordered where one must exceed another.

use super::values::{Checked, Zero, duration_seconds, positive};
use corral_state::node_liveness::NodeLiveness;

use crate::config::controller::{LeaderSettings, RaftSettings};
use crate::config::error::Refusal;
use crate::config::file::{LeaderSection, LivenessSection, RaftSection};

/// Raft timing: heartbeat < election min < election max, as openraft requires.
pub(crate) fn raft(section: &RaftSection) -> Checked<RaftSettings> {
    let heartbeat_ms = positive("raft.heartbeat_ms", section.heartbeat_ms)?;
    if section.election_min_ms <= heartbeat_ms {
        return Err(Refusal::new(
            "raft.election_min_ms",
            format!(
                "{} ms must be above raft.heartbeat_ms ({heartbeat_ms} ms), or followers stand for election while the leader is healthy",
                section.election_min_ms
            ),
        ));
    }
    if section.election_max_ms <= section.election_min_ms {
        return Err(Refusal::new(
            "raft.election_max_ms",
            format!(
                "{} ms must be above raft.election_min_ms ({} ms), so election timeouts are spread",
                section.election_max_ms, section.election_min_ms
            ),
        ));
    }
    Ok(RaftSettings {
        heartbeat_ms,
        election_min_ms: section.election_min_ms,
        election_max_ms: section.election_max_ms,
        snapshot_every_entries: positive(
            "raft.snapshot_every_entries",
            section.snapshot_every_entries,
        )?,
        propose_timeout_ms: positive("raft.propose_timeout_ms", section.propose_timeout_ms)?,
    })
}

/// The longest kill wait accepted: longer, a hung job holds its GPUs for hours.
const MAX_KILL_WAIT_SECONDS: u64 = 3_600;

/// The leader loop's intervals, both positive, and the kill wait (zero allowed:
/// SIGKILL right after SIGTERM; at most an hour).
pub(crate) fn leader(section: &LeaderSection) -> Checked<LeaderSettings> {
    const KEY: &str = "leader.kill_wait";
    let kill_wait = duration_seconds(KEY, &section.kill_wait, Zero::Allowed)?;
    if kill_wait > MAX_KILL_WAIT_SECONDS {
        return Err(Refusal::new(
            KEY,
            format!(
                "{:?} is {kill_wait} s, longer than the {MAX_KILL_WAIT_SECONDS} s accepted; \
                 write seconds as 00:00:30 (a bare number is minutes, as in Slurm's time format)",
                section.kill_wait
            ),
        ));
    }
    Ok(LeaderSettings {
        schedule_interval_ms: positive(
            "leader.schedule_interval_ms",
            section.schedule_interval_ms,
        )?,
        tick_interval_ms: positive("leader.tick_interval_ms", section.tick_interval_ms)?,
        kill_wait_ms: kill_wait * 1_000,
        mail_program: mail_program(section.mail_program.as_deref())?,
        preempt_send_user_signal: section.preempt_send_user_signal,
    })
}

/// `leader.mail_program`: an absolute path (the leader runs it with a clean
/// environment, so a bare name would depend on nothing it can see).
fn mail_program(text: Option<&str>) -> Checked<Option<std::path::PathBuf>> {
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    if !text.starts_with('/') {
        return Err(Refusal::new(
            "leader.mail_program",
            format!(
                "{text:?} is not an absolute path; give the program's full path, such as /usr/bin/mail"
            ),
        ));
    }
    Ok(Some(std::path::PathBuf::from(text)))
}

/// Liveness: the settings checked against each other as the cluster checks
/// them when they are set ([`NodeLiveness::check`]: a lease spans at least
/// four heartbeats, the down margin is at least
/// [`corral_state::node_liveness::MIN_DOWN_MARGIN_MS`]), named by the file's keys.
pub(crate) fn liveness(section: &LivenessSection) -> Checked<NodeLiveness> {
    let liveness = NodeLiveness {
        heartbeat_ms: section.agent_heartbeat_ms,
        lease_ms: section.agent_lease_ms,
        down_margin_ms: section.down_margin_ms,
    };
    liveness.check().map_err(|refusal| {
        let key = match refusal.setting {
            "heartbeat_ms" => "liveness.agent_heartbeat_ms",
            "lease_ms" => "liveness.agent_lease_ms",
            _ => "liveness.down_margin_ms",
        };
        Refusal::new(key, refusal.reason)
    })?;
    Ok(liveness)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        let raft = raft(&RaftSection::default()).unwrap();
        assert_eq!(
            (
                raft.heartbeat_ms,
                raft.election_min_ms,
                raft.election_max_ms
            ),
            (30, 100, 200)
        );
        assert!(leader(&LeaderSection::default()).is_ok());
        assert!(liveness(&LivenessSection::default()).is_ok());
    }

    #[test]
    fn a_down_margin_under_two_seconds_is_refused() {
        let margin = |ms| {
            liveness(&LivenessSection {
                down_margin_ms: ms,
                ..LivenessSection::default()
            })
        };
        for short in [0, 1, 999, 1_999] {
            let refusal = margin(short).unwrap_err();
            assert_eq!(refusal.key, "liveness.down_margin_ms");
            assert!(refusal.reason.contains("two places"), "{}", refusal.reason);
        }
        assert!(margin(corral_state::node_liveness::MIN_DOWN_MARGIN_MS).is_ok());
    }

    #[test]
    fn the_kill_wait_is_a_slurm_duration_of_at_most_an_hour() {
        let wait = |text: &str| {
            leader(&LeaderSection {
                kill_wait: text.into(),
                ..LeaderSection::default()
            })
        };
        assert_eq!(
            leader(&LeaderSection::default()).unwrap().kill_wait_ms,
            10_000
        );
        assert_eq!(wait("00:00:30").unwrap().kill_wait_ms, 30_000);
        assert_eq!(wait("2:00").unwrap().kill_wait_ms, 120_000);
        assert_eq!(wait("0").unwrap().kill_wait_ms, 0);
        assert_eq!(wait("60").unwrap().kill_wait_ms, 3_600_000);
        for bad in ["61", "1-00:00:00", "UNLIMITED", "30s", ""] {
            let refusal = wait(bad).unwrap_err();
            assert_eq!(refusal.key, "leader.kill_wait", "{bad:?}");
        }
        assert!(
            wait("90")
                .unwrap_err()
                .reason
                .contains("a bare number is minutes")
        );
    }

    #[test]
    fn elections_must_outlast_heartbeats() {
        let section = RaftSection {
            election_min_ms: 30,
            ..RaftSection::default()
        };
        assert_eq!(raft(&section).unwrap_err().key, "raft.election_min_ms");
        let section = RaftSection {
            election_max_ms: 100,
            ..RaftSection::default()
        };
        assert_eq!(raft(&section).unwrap_err().key, "raft.election_max_ms");
    }
}
