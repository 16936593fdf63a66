//! `corral-chaos soak --hours N`: a scenario (the mixed one by default) run
//! back to back on fresh clusters, seed after seed, for N hours; after each
//! hour, a table of every checker's verdicts over that hour's runs (runs it
//! held in, runs it broke in, and its measures' worst figures), so a problem
//! that needs hours of faults to show (a slow leak, a rare race) has hours to
//! show in.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use corral_jepsen::history::History;
use corral_jepsen::{Verdict, check_all};

/// One checker's record over an hour.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Tally {
    /// Runs it held in.
    pub held: u32,
    /// Runs it broke in.
    pub broke: u32,
    /// Each measure's largest figure.
    pub worst: BTreeMap<String, f64>,
}

/// Every checker's tally, by name.
pub type HourTable = BTreeMap<&'static str, Tally>;

/// Adds one run's verdicts to `table`.
pub fn add(table: &mut HourTable, verdicts: &[Verdict]) {
    for verdict in verdicts {
        let tally = table.entry(verdict.checker).or_default();
        if verdict.holds() {
            tally.held += 1;
        } else {
            tally.broke += 1;
        }
        for (name, value) in &verdict.measures {
            let worst = tally.worst.entry(name.clone()).or_insert(*value);
            if *value > *worst {
                *worst = *value;
            }
        }
    }
}

/// The table of one hour, as printed.
pub fn render(hour: u32, runs: u32, failed_runs: u32, table: &HourTable) -> String {
    let mut out = format!(
        "== hour {hour}: {runs} run(s), {failed_runs} could not complete\n{:<22} {:>5} {:>6}  worst measures\n",
        "checker", "held", "broke"
    );
    for (checker, tally) in table {
        let measures: Vec<String> = tally
            .worst
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        out.push_str(&format!(
            "{checker:<22} {:>5} {:>6}  {}\n",
            tally.held,
            tally.broke,
            measures.join(" ")
        ));
    }
    out
}

/// The verdicts of the run whose history is at `path`.
pub fn verdicts_of(path: &Path) -> anyhow::Result<Vec<Verdict>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let history = History::parse(&text).with_context(|| format!("reading {}", path.display()))?;
    Ok(check_all(&history))
}

/// Runs `one_run(seed, out_dir)` back to back for `hours`, printing each
/// hour's table; true when no checker broke and every run completed.
pub fn soak(
    hours: u32,
    first_seed: u64,
    out: &Path,
    mut one_run: impl FnMut(u64, &Path) -> anyhow::Result<bool>,
) -> anyhow::Result<bool> {
    let started = Instant::now();
    let mut seed = first_seed;
    let mut all_held = true;
    for hour in 1..=hours {
        let ends = Duration::from_secs(3600 * u64::from(hour));
        let (mut table, mut runs, mut failed_runs) = (HourTable::new(), 0u32, 0u32);
        while started.elapsed() < ends {
            let dir = out
                .join(format!("hour-{hour}"))
                .join(format!("seed-{seed}"));
            let completed = one_run(seed, &dir);
            runs += 1;
            match completed {
                Ok(_) => add(&mut table, &verdicts_of(&dir.join("history.jsonl"))?),
                Err(e) => {
                    eprintln!("corral-chaos soak: seed {seed}: {e:#}");
                    failed_runs += 1;
                    all_held = false;
                }
            }
            seed += 1;
        }
        all_held &= table.values().all(|t| t.broke == 0);
        println!("{}", render(hour, runs, failed_runs, &table));
    }
    Ok(all_held)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(checker: &'static str, broke: bool, measure: f64) -> Verdict {
        let mut v = Verdict::new(checker, "a promise");
        if broke {
            v.violation(None, None, "broken");
        }
        v.measures.push(("max_x".into(), measure));
        v
    }

    #[test]
    fn an_hour_counts_each_checkers_runs_and_keeps_the_worst_figure() {
        let mut table = HourTable::new();
        add(
            &mut table,
            &[verdict("gang", false, 3.0), verdict("reads", true, 1.0)],
        );
        add(
            &mut table,
            &[verdict("gang", false, 7.0), verdict("reads", false, 0.5)],
        );
        assert_eq!(table["gang"].held, 2);
        assert_eq!(table["reads"].broke, 1);
        assert_eq!(table["gang"].worst["max_x"], 7.0);
        let text = render(1, 2, 0, &table);
        assert!(text.contains("hour 1: 2 run(s)"), "{text}");
        assert!(text.contains("reads"), "{text}");
    }
}
