//! Slurm's `print_fields` layout, which sacct and sacctmgr share: every cell
//! printed `%*.*s ` (so each line ends in a blank), right-aligned unless its
//! width is negative, a longer value cut and ended in `+`, the header cut
//! without one and a rule of dashes under it; or, parsable (`-p`/`-P`), each
//! value followed by the delimiter (the last one too under `-p`), with no
//! padding and no rule.

use super::terminal_safe::escape_controls;

/// How lines are laid out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Layout {
    /// Fixed widths (the default).
    #[default]
    Columns,
    /// `-p` (`trailing`) or `-P`: values joined by `delimiter`.
    Parsable {
        /// `|` unless `--delimiter` says otherwise.
        delimiter: String,
        /// A delimiter after the last value too.
        trailing: bool,
    },
}

/// `-p` (`trailing`: a `|` after the last value too) or `-P`.
pub fn parsable(trailing: bool) -> Layout {
    Layout::Parsable {
        delimiter: "|".into(),
        trailing,
    }
}

/// The header line, and under [`Layout::Columns`] the rule, for columns
/// `(name, width)`.
pub fn header(columns: &[(&str, i32)], layout: &Layout) -> String {
    let names: Vec<(Option<String>, i32)> = columns
        .iter()
        .map(|(name, width)| (Some((*name).to_string()), *width))
        .collect();
    let mut out = line(&names, layout, false);
    if *layout == Layout::Columns {
        let rule: Vec<(Option<String>, i32)> = columns
            .iter()
            .map(|(_, width)| (Some("-".repeat(width.unsigned_abs() as usize)), *width))
            .collect();
        out.push_str(&line(&rule, layout, false));
    }
    out
}

/// One row: each cell's value (`None`: Slurm's blank) with its column's width.
pub fn row(cells: &[(Option<String>, i32)], layout: &Layout) -> String {
    line(cells, layout, true)
}

fn line(cells: &[(Option<String>, i32)], layout: &Layout, cut_with_plus: bool) -> String {
    let mut out = String::new();
    for (i, (cell, width)) in cells.iter().enumerate() {
        let text = escape_controls(cell.as_deref().unwrap_or(""));
        match layout {
            Layout::Parsable {
                delimiter,
                trailing,
            } => {
                out.push_str(&text);
                if *trailing || i + 1 < cells.len() {
                    out.push_str(delimiter);
                }
            }
            Layout::Columns => {
                let size = width.unsigned_abs() as usize;
                let mut shown: String = text.chars().take(size).collect();
                if cut_with_plus && size > 0 && text.chars().count() > size {
                    shown = text.chars().take(size - 1).collect();
                    shown.push('+');
                }
                let pad = " ".repeat(size.saturating_sub(shown.chars().count()));
                if *width < 0 {
                    out.push_str(&shown);
                    out.push_str(&pad);
                } else {
                    out.push_str(&pad);
                    out.push_str(&shown);
                }
                out.push(' ');
            }
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_cut_values_with_plus_and_headers_without() {
        let columns = [("JobID", -6), ("State", 5)];
        assert_eq!(
            header(&columns, &Layout::Columns),
            "JobID  State \n------ ----- \n"
        );
        let cells = [
            (Some("1234567".to_string()), -6),
            (Some("COMPLETED".into()), 5),
        ];
        assert_eq!(row(&cells, &Layout::Columns), "12345+ COMP+ \n");
        let blank = [(None, 3), (Some("x".to_string()), -2)];
        assert_eq!(row(&blank, &Layout::Columns), "    x  \n");
    }

    #[test]
    fn parsable_forms() {
        let cells = [(Some("a".to_string()), 5), (None, 5)];
        let p2 = Layout::Parsable {
            delimiter: "|".into(),
            trailing: false,
        };
        assert_eq!(row(&cells, &p2), "a|\n");
        let p = Layout::Parsable {
            delimiter: ",".into(),
            trailing: true,
        };
        assert_eq!(row(&cells, &p), "a,,\n");
        assert_eq!(header(&[("A", 3), ("B", 3)], &p2), "A|B\n");
    }
}
