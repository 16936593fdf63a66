//! Promise 14: elections only when a leader is really gone. Every new term
//! the history shows (a controller naming itself leader in it, or
//! dispatching in it) should follow a fault that can take the leader away,
//! within [`ELECTION_WINDOW`] of the moment it could: the start of a kill,
//! pause, isolation, partition, removal or restart of controllers; the
//! restart of every controller at the heal of `kill-all-controllers`; any
//! time during a leader's disk stall; and a leader's word that its Raft core
//! had not answered past the core-hold limit (`CoreHeld`: its disk held it,
//! whatever fault or none the run injected). Violations: a new term with no
//! such cause at the heal of a partition or a removal (a replica that
//! campaigned while cut off, deposing a healthy leader), while a removed
//! replica is out (it campaigning on) or while the leader's disk is only
//! slow (`slow-leader-disk`: its syncs outlast the followers' lease, never
//! the hold limit), and a term that grows by more than
//! [`MAX_TERM_STEP`] at once (a replica standing again and again). Any other
//! election without a fault (a leader whose heartbeats stalled on a loaded
//! machine) is measured, `elections_without_fault`, not judged. The first
//! term seen is the cluster's start. Also measured: `elections` (new terms)
//! and `largest_term_step`.

use crate::faults::Fault;
use crate::history::{EventKind, History};
use crate::verdict::Verdict;

/// The checker's name.
pub const NAME: &str = "elections";
const PROMISE: &str = "a new term only when a fault took the leader away: none at a heal, none from a removed replica";

/// How long after its cause an election may first be seen: the followers'
/// timeout (under a second), a split vote or two, and the observer's
/// polling (every 250 ms, each poll a CLI call that may take a second on a
/// loaded machine).
pub const ELECTION_WINDOW: u64 = 5_000;

/// The most a term may grow between two observations: one election, plus
/// one split vote.
pub const MAX_TERM_STEP: u64 = 2;

/// When `fault` may rightly cause an election, as `(from, until)` windows.
fn causes(fault: &Fault) -> Vec<(u64, u64)> {
    let at = |t: u64| (t, t + ELECTION_WINDOW);
    let kind = fault.kind.as_str();
    if kind.starts_with("kill-all-controllers") {
        // Every controller down, then every one started: the election is
        // at the restart.
        vec![at(fault.healed)]
    } else if kind.starts_with("stall-leader-disk") || kind.starts_with("skew-leader") {
        // A skewed leader: the leaders killed until the skewed controller
        // wins, and its restart on the true clock at the heal.
        vec![(fault.began, fault.healed + ELECTION_WINDOW)]
    } else if [
        "kill-leader",
        "kill-controller",
        "restart-controller",
        "pause-leader",
        "isolate-leader",
        "halves",
        "bridge",
        "ring",
        "membership",
    ]
    .iter()
    .any(|k| kind.starts_with(k))
    {
        vec![at(fault.began)]
    } else {
        // Agents, GPUs, a follower's clock: no controller loses its leader.
        Vec::new()
    }
}

/// True when an election at `t` would be one `fault` provoked without
/// taking the leader away: at the heal of a partition or of a removal,
/// while a removed replica is out, while the leader's disk is slow, or
/// while no controller runs at all.
fn disturbs_at(fault: &Fault, t: u64) -> bool {
    let kind = fault.kind.as_str();
    if kind.starts_with("slow-leader-disk") {
        return (fault.began..=fault.healed + ELECTION_WINDOW).contains(&t);
    }
    let partition = [
        "isolate-leader",
        "halves",
        "bridge",
        "ring",
        "isolate-agent",
    ]
    .iter()
    .any(|k| kind.starts_with(k));
    let at_heal = (fault.healed..=fault.healed + ELECTION_WINDOW).contains(&t);
    if kind.starts_with("membership") {
        (fault.began..=fault.healed + ELECTION_WINDOW).contains(&t)
    } else if kind.starts_with("kill-all-controllers") {
        // No controller runs to elect anyone.
        (fault.began..fault.healed).contains(&t)
    } else {
        partition && at_heal
    }
}

/// Checks the promise.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::new(NAME, PROMISE);
    let faults = crate::faults::of(history);
    let held = history.events.iter().filter_map(|e| match &e.kind {
        EventKind::CoreHeld { process } => Some((
            (e.t, e.t + ELECTION_WINDOW),
            format!("{process}'s held Raft core"),
        )),
        _ => None,
    });
    let windows: Vec<((u64, u64), String)> = faults
        .iter()
        .flat_map(|f| causes(f).into_iter().map(|w| (w, f.kind.clone())))
        .chain(held)
        .collect();
    let mut highest: Option<u64> = None;
    let (mut elections, mut largest_step, mut without_fault) = (0u32, 0u64, 0u32);
    for event in &history.events {
        let (replica, term) = match &event.kind {
            EventKind::Leader { replica, term } | EventKind::Dispatch { replica, term, .. } => {
                (*replica, *term)
            }
            _ => continue,
        };
        let Some(before) = highest else {
            highest = Some(term);
            continue;
        };
        if term <= before {
            continue;
        }
        highest = Some(term);
        elections += 1;
        let step = term - before;
        largest_step = largest_step.max(step);
        if step > MAX_TERM_STEP {
            verdict.violation(
                Some(event.t),
                None,
                format!(
                    "the term grew from {before} to {term} at once (controller {replica} leads): more than {MAX_TERM_STEP} elections for one loss"
                ),
            );
        }
        let excused = windows
            .iter()
            .any(|((from, until), _)| (*from..=*until).contains(&event.t));
        if !excused && !faults.iter().any(|f| disturbs_at(f, event.t)) {
            without_fault += 1;
        } else if !excused {
            let nearest = windows
                .iter()
                .min_by_key(|((from, _), _)| from.abs_diff(event.t))
                .map(|((from, _), kind)| format!("; the nearest cause, {kind}, was at {from} ms"))
                .unwrap_or_default();
            verdict.violation(
                Some(event.t),
                None,
                format!(
                    "term {term} (controller {replica}) began with no fault that took the leader away within {ELECTION_WINDOW} ms before it{nearest}"
                ),
            );
        }
    }
    verdict.measure("elections", f64::from(elections));
    verdict.measure("largest_term_step", largest_step as f64);
    verdict.measure("elections_without_fault", f64::from(without_fault));
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Builder;

    fn leader(replica: u64, term: u64) -> EventKind {
        EventKind::Leader { replica, term }
    }

    fn fault(b: &mut Builder, id: u64, kind: &str, began: u64, healed: u64) {
        b.fault(id, kind, (began, healed));
    }

    #[test]
    fn an_election_after_the_leader_was_killed_holds() {
        let mut b = Builder::new();
        b.event(100, leader(1, 1));
        fault(&mut b, 1, "kill-leader", 1_000, 3_000);
        b.event(1_900, leader(2, 2));
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("elections"), Some(1.0));
    }

    #[test]
    fn an_election_at_a_partitions_heal_is_caught() {
        let mut b = Builder::new();
        b.event(100, leader(1, 1));
        fault(&mut b, 1, "bridge-12s", 1_000, 13_000);
        b.event(13_400, leader(2, 9));
        let verdict = check(&b.history());
        assert!(!verdict.holds());
        assert_eq!(verdict.violations.len(), 2, "unexcused, and a jump of 8");
    }

    #[test]
    fn the_elections_a_skewed_leader_takes_hold_and_a_skewed_follower_takes_none() {
        let mut b = Builder::new();
        b.event(100, leader(1, 1));
        fault(&mut b, 1, "skew-leader+3600s", 1_000, 20_000);
        // Two leaders killed until the skewed one won, and its restart.
        b.event(4_000, leader(2, 2))
            .event(8_000, leader(3, 3))
            .event(21_000, leader(1, 4));
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("elections_without_fault"), Some(0.0));
        // A follower's skew takes no leader away: measured, not excused.
        let mut follower = Builder::new();
        follower.event(100, leader(1, 1));
        fault(&mut follower, 1, "skew-follower+3600s", 1_000, 9_000);
        follower.event(4_000, leader(2, 2));
        let verdict = check(&follower.history());
        assert_eq!(verdict.measured("elections_without_fault"), Some(1.0));
    }

    #[test]
    fn a_removed_replica_raising_the_term_is_caught() {
        let mut b = Builder::new();
        b.event(100, leader(1, 4));
        fault(&mut b, 1, "membership-8s", 1_000, 9_000);
        // The leader stayed; the term moved 7 s into the removal.
        b.event(8_000, leader(1, 5));
        assert!(!check(&b.history()).holds());
    }

    #[test]
    fn every_controller_restarted_elects_at_the_heal() {
        let mut b = Builder::new();
        b.event(100, leader(1, 1));
        fault(&mut b, 1, "kill-all-controllers-30s", 1_000, 31_000);
        b.event(31_800, leader(3, 2));
        assert!(check(&b.history()).holds());
        let mut early = Builder::new();
        early.event(100, leader(1, 1));
        fault(&mut early, 1, "kill-all-controllers-30s", 1_000, 31_000);
        early.event(20_000, leader(3, 2));
        assert!(
            !check(&early.history()).holds(),
            "no controller ran at 20 s"
        );
    }

    #[test]
    fn agent_faults_excuse_no_election_and_the_start_is_no_election() {
        let mut b = Builder::new();
        b.event(100, leader(1, 3));
        fault(&mut b, 1, "isolate-agent-20s", 1_000, 21_000);
        let quiet = check(&b.history());
        assert!(quiet.holds());
        assert_eq!(quiet.measured("elections"), Some(0.0));
        // At the heal of an agent's partition: the partition provoked it.
        b.event(21_500, leader(2, 4));
        assert!(!check(&b.history()).holds());
    }

    #[test]
    fn an_election_while_the_leaders_disk_is_only_slow_is_caught() {
        let mut b = Builder::new();
        b.event(100, leader(1, 1));
        fault(&mut b, 1, "slow-leader-disk-20s", 1_000, 21_000);
        b.event(1_700, leader(2, 2));
        let verdict = check(&b.history());
        assert!(
            !verdict.holds(),
            "a slow disk deposed its leader: {verdict:?}"
        );
        assert!(
            verdict.violations[0]
                .message
                .contains("no fault that took the leader away"),
            "{verdict:?}"
        );
    }

    #[test]
    fn a_leader_whose_core_was_held_past_the_limit_may_be_replaced() {
        let core_held = |t| {
            let mut b = Builder::new();
            b.event(100, leader(1, 1));
            fault(&mut b, 1, "membership-8s", 1_000, 9_000);
            b.event(
                t,
                EventKind::CoreHeld {
                    process: "controller-1".into(),
                },
            );
            b.event(13_000, leader(2, 2));
            check(&b.history())
        };
        // The CI run that found it: an election 4 s after a membership heal.
        assert!(core_held(12_200).holds(), "{:?}", core_held(12_200));
        // Said too long before the election to be its cause.
        assert!(!core_held(2_000).holds());
    }

    #[test]
    fn an_election_far_from_any_fault_is_measured_not_judged() {
        let mut b = Builder::new();
        b.event(100, leader(1, 3));
        fault(&mut b, 1, "kill-agent", 1_000, 4_000);
        b.event(30_000, leader(2, 4));
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("elections_without_fault"), Some(1.0));
    }
}
