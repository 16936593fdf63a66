//! The verdict table: one row per checker, then its figures, then every
//! violation with its time and job.

use std::fmt::Write;

use crate::verdict::Verdict;

/// The table as text.
pub fn verdict_table(verdicts: &[Verdict]) -> String {
    let mut out = String::new();
    let width = verdicts
        .iter()
        .map(|v| v.checker.len())
        .max()
        .unwrap_or(0)
        .max(7);
    let _ = writeln!(
        out,
        "{:<width$}  {:<6}  {:>10}  PROMISE",
        "CHECKER", "RESULT", "VIOLATIONS"
    );
    for verdict in verdicts {
        let result = if verdict.holds() { "ok" } else { "FAILED" };
        let _ = writeln!(
            out,
            "{:<width$}  {:<6}  {:>10}  {}",
            verdict.checker,
            result,
            verdict.violations.len(),
            verdict.promise
        );
        if !verdict.measures.is_empty() {
            let figures: Vec<String> = verdict
                .measures
                .iter()
                .map(|(name, value)| format!("{name}={}", figure(*value)))
                .collect();
            let _ = writeln!(out, "{:<width$}  {}", "", figures.join(" "));
        }
    }
    for verdict in verdicts.iter().filter(|v| !v.holds()) {
        let _ = writeln!(out, "\n{} violations:", verdict.checker);
        for violation in &verdict.violations {
            let at = violation.t.map_or("-".to_string(), |t| format!("{t} ms"));
            let _ = writeln!(out, "  [{at}] {}", violation.message);
        }
    }
    out
}

/// The recovery figures per kind of fault, one line each.
pub fn recovery_table(figures: &[crate::recovery::Recovery]) -> String {
    let mut out = String::new();
    if figures.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "{:<22}  {:>6}  {:>22}  {:>22}",
        "FAULT", "COUNT", "ELECTED ms (med / max)", "SERVED ms (med / max)"
    );
    let pair = |samples: &[u64]| {
        crate::recovery::median_and_max(samples)
            .map_or("-".to_string(), |(median, max)| format!("{median} / {max}"))
    };
    for figure in figures {
        let _ = writeln!(
            out,
            "{:<22}  {:>6}  {:>22}  {:>22}",
            figure.kind,
            figure.faults,
            pair(&figure.elected_ms),
            pair(&figure.served_ms)
        );
    }
    out
}

/// A figure without a useless fraction.
fn figure(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_every_checker_its_figures_and_each_violation() {
        let mut ok = Verdict::new("submissions", "none lost");
        ok.measure("acknowledged", 12);
        ok.measure("ratio", 0.5);
        let mut bad = Verdict::new("gpu-exclusivity", "no GPU twice");
        bad.violation(Some(1500), Some(3), "gpu01 GPU 5: two jobs");
        let table = verdict_table(&[ok, bad]);
        assert!(table.contains("submissions      ok"), "{table}");
        assert!(table.contains("acknowledged=12 ratio=0.500"), "{table}");
        assert!(
            table.contains("gpu-exclusivity  FAILED           1  no GPU twice"),
            "{table}"
        );
        assert!(
            table.contains("  [1500 ms] gpu01 GPU 5: two jobs"),
            "{table}"
        );
    }
}
