//! Promise 11: a preemption keeps its grace and hands over only what is
//! free. Each rank of a preempted attempt that ran on past its notice heard
//! it (the SIGTERM reaches the steps' tasks); a rank that ignored the notice
//! runs on, unkilled, until its deadline, and none runs well past
//! deadline + kill wait (the SIGKILL); and the job the resources went to
//! starts a rank on a GPU only once the victim's processes that held it are
//! gone (its rank there and, on its batch host, its batch script), with the
//! tolerance of `gpu-exclusivity`'s lease left out. A preemptor that found
//! room elsewhere during the grace is measured (`preemptions_unused`), not
//! a violation: a job that ended meanwhile may rightly have made room. A fault during the grace
//! (a leader or an agent down) may delay the kill by as long as it lasted
//! plus a lease; a node cut off then may miss the notice; a cancel asked
//! for in the grace ends the attempt early, rightly.

use crate::attempts::{Attempts, Preemption};
use crate::faults::Fault;
use crate::history::History;
use crate::verdict::Verdict;

/// The checker's name.
pub const NAME: &str = "preempt-grace";
const PROMISE: &str = "a preemption's notice is heard, its grace kept, its kill on time, and the preemptor waits for the victim";

/// What the cluster may add to a deadline or kill: the leader's tick that
/// notices the deadline, the agent's SIGKILL, a step's sleep.
const SLACK_MS: u64 = 2_000;

/// A rank still running this long after its notice must have heard it.
const HEARING_MS: u64 = 1_000;

/// Checks the promise.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::new(NAME, PROMISE);
    let view = Attempts::of(history);
    let faults = crate::faults::of(history);
    let tolerance = history.header.clock_tolerance_ms;
    let lease = history.header.lease_ms;
    let (grace, kill_wait) = history
        .header
        .preemption
        .map_or((0, 0), |p| (p.grace_ms, p.kill_wait_ms));
    let cancels = super::preempt_requeue::cancel_times(history);
    let (mut heard, mut waited_max, mut unused) = (0u32, 0u64, 0u64);
    for (&(job, number), preemption) in &view.preemptions {
        let Some(attempt) = view.observed.get(&(job, number)) else {
            continue;
        };
        let deadline = preemption.deadline;
        let notice = deadline.saturating_sub(grace);
        let during = |from: u64, to: u64| -> Vec<&Fault> {
            faults
                .iter()
                .filter(|f| f.began <= to + tolerance && f.healed + tolerance >= from)
                .collect()
        };
        let mut kill_by = deadline + kill_wait + SLACK_MS + tolerance;
        if let Some(healed) = during(notice, kill_by).iter().map(|f| f.healed).max() {
            kill_by = kill_by.max(healed + lease + kill_wait + SLACK_MS);
        }
        // A node of the gang lost during the grace ends every rank early,
        // rightly (a failed rank ends all).
        let gang_cut = during(notice, deadline)
            .iter()
            .any(|f| attempt.ranks.values().any(|r| f.cut_off.contains(&r.node)));
        for (rank, r) in &attempt.ranks {
            let end = view.rank_end(r);
            let cancelled = cancels
                .iter()
                .any(|(j, t)| *j == job && *t <= end + tolerance);
            let node_cut = during(notice, notice + HEARING_MS)
                .iter()
                .any(|f| f.cut_off.contains(&r.node));
            match r.notice {
                Some((_, ignored)) => {
                    heard += 1;
                    // Ran on and was killed (recorded no exit): not before
                    // the deadline.
                    if ignored
                        && r.exited.is_none()
                        && end + tolerance < deadline
                        && !gang_cut
                        && !cancelled
                    {
                        verdict.violation(
                            Some(end),
                            Some(job),
                            format!(
                                "job {job}.{number} rank {rank} on {} ignored its notice and was last seen at {end} ms, before its deadline {deadline} ms",
                                r.node
                            ),
                        );
                    }
                }
                None if r.started < notice
                    && end > notice + HEARING_MS + tolerance
                    && !node_cut =>
                {
                    verdict.violation(
                        Some(notice),
                        Some(job),
                        format!(
                            "job {job}.{number} rank {rank} on {} ran until {end} ms and never heard its notice of {notice} ms",
                            r.node
                        ),
                    );
                }
                None => {}
            }
            if end > kill_by {
                verdict.violation(
                    Some(end),
                    Some(job),
                    format!(
                        "job {job}.{number} rank {rank} on {} ran until {end} ms, past its deadline {deadline} ms + kill wait {kill_wait} ms",
                        r.node
                    ),
                );
            }
        }
        if let Some(waited) = handover(
            &view,
            (job, number),
            (preemption, notice),
            tolerance,
            (&mut verdict, &mut unused),
        ) {
            waited_max = waited_max.max(waited);
        }
    }
    verdict.measure("notices_heard", f64::from(heard));
    verdict.measure("max_handover_ms", waited_max as f64);
    verdict.measure("preemptions_unused", unused as f64);
    verdict
}

/// The preemptor's first attempt begun after the `notice` must start each
/// rank only after the victim's processes that held any of its GPUs are gone
/// (a victim rank on that node with a GPU in common; on the victim's batch
/// host, its batch script too, which sees every GPU there); how long after,
/// at the least, when it did. A preemptor that shares no GPU with its victim
/// (it found room elsewhere during the grace) is counted in `unused`.
fn handover(
    view: &Attempts,
    (job, number): (u64, u32),
    (preemption, notice): (&Preemption, u64),
    tolerance: u64,
    (verdict, unused): (&mut Verdict, &mut u64),
) -> Option<u64> {
    let victim = view.observed.get(&(job, number))?;
    let preemptor = preemption.for_job;
    let (&(_, attempt), _) = view
        .observed
        .range((preemptor, 0)..=(preemptor, u32::MAX))
        .filter_map(|(key, a)| Some((key, a.first_start()?)))
        .filter(|(_, start)| start + tolerance >= notice)
        .min_by_key(|(_, start)| *start)?;
    let taker = view.observed.get(&(preemptor, attempt))?;
    let batch_host = victim.ranks.get(&0).map(|r| r.node.as_str());
    let mut waited: Option<u64> = None;
    for rank in taker.ranks.values() {
        for held in victim
            .ranks
            .values()
            .filter(|v| v.node == rank.node && v.gpus.iter().any(|g| rank.gpus.contains(g)))
        {
            let batch = victim
                .batch_exit
                .filter(|_| batch_host == Some(held.node.as_str()))
                .map(|(t, _)| t);
            let gone = view.rank_end(held).max(batch.unwrap_or(0));
            if rank.started + tolerance < gone {
                verdict.violation(
                    Some(rank.started),
                    Some(preemptor),
                    format!(
                        "job {preemptor}.{attempt} started on {} at {} ms while job {job}.{number}, preempted for it, held GPUs there until {gone} ms",
                        rank.node, rank.started
                    ),
                );
                return None;
            }
            let after = rank.started.saturating_sub(gone);
            waited = Some(waited.map_or(after, |w| w.min(after)));
        }
    }
    if waited.is_none() {
        *unused += 1;
    }
    waited
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Builder;

    /// Victim job 1.1 on gpu01 from 1,000 ms, preempted for job 2 with its
    /// deadline at 9,000 ms (notice at 5,000 ms).
    fn victim(b: &mut Builder) -> &mut Builder {
        b.preempting("preempt")
            .start(1_000, (1, 1), "gpu01", (0, 1), &[0], None)
            .step(4_900, (1, 1), 0, 39)
            .preempted((1, 1), 2, 9_000)
    }

    #[test]
    fn a_trapped_and_an_ignored_notice_kept_and_handed_over_pass() {
        // Trapped: heard at 5,050 ms, exited at 5,300; job 2 at 5,800.
        let mut b = Builder::new();
        victim(&mut b)
            .notice(5_050, (1, 1), 0, false)
            .exit(5_300, (1, 1), "gpu01", 0, 0)
            .batch_exit(5_350, (1, 1), "gpu01", 0)
            .start(5_800, (2, 1), "gpu01", (0, 1), &[0], None);
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("notices_heard"), Some(1.0));
        // Ignored: ran on to 10,900 ms (killed 2 s after the deadline).
        let mut b = Builder::new();
        victim(&mut b)
            .notice(5_050, (1, 1), 0, true)
            .step(10_900, (1, 1), 0, 99)
            .start(11_500, (2, 1), "gpu01", (0, 1), &[0], None);
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
    }

    #[test]
    fn a_preemptor_started_on_a_gpu_before_the_victim_left_it_is_caught() {
        // The victim's batch script on gpu01 lived until 6,000 ms; job 2
        // started on gpu01's GPU 0 at 5,300 ms.
        let mut b = Builder::new();
        victim(&mut b)
            .notice(5_050, (1, 1), 0, false)
            .exit(5_300, (1, 1), "gpu01", 0, 0)
            .batch_exit(6_000, (1, 1), "gpu01", 0)
            .start(5_300, (2, 1), "gpu01", (0, 1), &[0], None);
        let verdict = check(&b.history());
        assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
        assert!(
            verdict.violations[0].message.contains(
                "job 2.1 started on gpu01 at 5300 ms while job 1.1, preempted for it, held GPUs there until 6000 ms"
            ),
            "{verdict:?}"
        );
        // The same start on another node (no GPU in common) is no violation:
        // counted as a preemption the preemptor did not use.
        let mut b = Builder::new();
        victim(&mut b)
            .notice(5_050, (1, 1), 0, false)
            .exit(5_300, (1, 1), "gpu01", 0, 0)
            .batch_exit(6_000, (1, 1), "gpu01", 0)
            .start(5_300, (2, 1), "gpu02", (0, 1), &[0], None);
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
        assert_eq!(verdict.measured("preemptions_unused"), Some(1.0));
    }

    /// A gang whose other node's agent was lost during the grace ends every
    /// rank early (a failed rank ends all): a rank that ignored its notice
    /// and died before its deadline then broke no promise.
    #[test]
    fn a_rank_ended_early_by_its_gangs_lost_node_is_excused() {
        let mut b = Builder::new();
        b.preempting("preempt-faults")
            .start(1_000, (1, 1), "gpu01", (0, 2), &[0], None)
            .start(1_000, (1, 1), "gpu02", (1, 2), &[0], None)
            .step(4_900, (1, 1), 0, 39)
            .step(4_900, (1, 1), 1, 39)
            .preempted((1, 1), 2, 9_000)
            .notice(5_050, (1, 1), 0, true)
            .notice(5_050, (1, 1), 1, true)
            .event(
                5_500,
                crate::history::EventKind::FaultBegin {
                    fault: 1,
                    kind: "kill-victim-agent-at-preemption".into(),
                    target: "agent-gpu02".into(),
                    cut_off: vec!["gpu02".into()],
                },
            )
            .event(6_500, crate::history::EventKind::FaultHealed { fault: 1 })
            .step(6_600, (1, 1), 0, 55);
        let verdict = check(&b.history());
        assert!(verdict.holds(), "{verdict:?}");
    }

    #[test]
    fn a_grace_cut_short_a_kill_too_late_and_an_unheard_notice_are_caught() {
        // Ignored, but dead at 6,000 ms, before the 9,000 ms deadline.
        let mut b = Builder::new();
        victim(&mut b)
            .notice(5_050, (1, 1), 0, true)
            .step(6_000, (1, 1), 0, 50);
        assert!(format!("{:?}", check(&b.history())).contains("before its deadline 9000 ms"));
        // The same, cancelled at 5,900 ms: rightly cut short.
        b.event(
            5_900,
            crate::history::EventKind::Invoke {
                process: 0,
                op: 9,
                call: crate::history::Call::Cancel { job: 1 },
            },
        );
        assert!(check(&b.history()).holds());
        // Ignored, and alive at 20,000 ms: past 9,000 + 2,000 + slack.
        let mut b = Builder::new();
        victim(&mut b)
            .notice(5_050, (1, 1), 0, true)
            .step(20_000, (1, 1), 0, 150);
        assert!(format!("{:?}", check(&b.history())).contains("past its deadline 9000 ms"));
        // Never heard: steps on to 10,500 ms without a notice.
        let mut b = Builder::new();
        victim(&mut b).step(10_500, (1, 1), 0, 95);
        assert!(format!("{:?}", check(&b.history())).contains("never heard its notice of 5000 ms"));
    }
}
