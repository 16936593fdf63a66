//! `corral acct --usage`: GPU-hours per user and account over a window, most
//! used first, with a TOTAL line.

use corral_proto::api::UsageRow;

use super::table::{Align, Column, Style, render};

/// The rows sorted by GPU-hours (most first; ties by user, then account), GPU-hours
/// to two decimals, then a `TOTAL` line summing jobs and GPU-hours.
pub fn usage_table(rows: &[UsageRow]) -> String {
    let mut sorted: Vec<&UsageRow> = rows.iter().collect();
    sorted.sort_by(|a, b| {
        b.gpu_hours
            .total_cmp(&a.gpu_hours)
            .then_with(|| a.user.cmp(&b.user))
            .then_with(|| a.account.cmp(&b.account))
    });
    let mut lines: Vec<Vec<String>> = sorted
        .iter()
        .map(|row| {
            vec![
                row.user.clone(),
                row.account.clone(),
                row.jobs.to_string(),
                format!("{:.2}", row.gpu_hours),
            ]
        })
        .collect();
    let jobs: u64 = rows.iter().map(|r| u64::from(r.jobs)).sum();
    // A fold from +0.0: `sum` of no floats is -0.0, which prints as "-0.00".
    let hours = rows.iter().fold(0.0_f64, |total, r| total + r.gpu_hours);
    lines.push(vec![
        "TOTAL".to_string(),
        String::new(),
        jobs.to_string(),
        format!("{hours:.2}"),
    ]);
    let columns = [
        Column::new("USER", Align::Left),
        Column::new("ACCOUNT", Align::Left),
        Column::new("JOBS", Align::Right),
        Column::new("GPU-HOURS", Align::Right),
    ];
    render(
        &columns,
        &lines,
        Style {
            header: true,
            rule: true,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(user: &str, account: &str, gpu_hours: f64, jobs: u32) -> UsageRow {
        UsageRow {
            user: user.into(),
            account: account.into(),
            gpu_hours,
            jobs,
        }
    }

    #[test]
    fn most_used_first_with_total() {
        let out = usage_table(&[
            row("bob", "ml", 1.5, 2),
            row("alice", "nlp", 120.25, 10),
            row("alice", "ml", 1.5, 1),
        ]);
        let expected = "\
USER  ACCOUNT JOBS GPU-HOURS
----- ------- ---- ---------
alice nlp       10    120.25
alice ml         1      1.50
bob   ml         2      1.50
TOTAL           13    123.25
";
        assert_eq!(out, expected);
    }

    #[test]
    fn no_usage_is_a_zero_total() {
        let expected = "\
USER  ACCOUNT JOBS GPU-HOURS
----- ------- ---- ---------
TOTAL            0      0.00
";
        assert_eq!(usage_table(&[]), expected);
    }
}
