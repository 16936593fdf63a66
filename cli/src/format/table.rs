//! Column alignment for every table the CLI prints: Slurm's fixed-width columns
//! (cut like squeue's `%.8j`, or marked `+` like sacct's), columns as wide as
//! their widest cell, one space between columns, no trailing blanks.

use super::terminal_safe::escape_controls;

/// Which side of its column a cell hugs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Padded on the right.
    Left,
    /// Padded on the left (Slurm's `%.Nx`).
    Right,
}

/// How wide a column is, and what happens to a longer cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// Exactly this many characters; longer cells are cut (squeue, sinfo).
    Cut(usize),
    /// Exactly this many characters; longer cells are cut and end in `+` (sacct).
    Plus(usize),
    /// As wide as the widest cell (and the header, when shown).
    Fit,
}

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The header text.
    pub header: &'static str,
    /// Alignment of header and cells.
    pub align: Align,
    /// Width rule.
    pub width: Width,
}

impl Column {
    /// A column with `header`, `align` and `width`.
    pub const fn new(header: &'static str, align: Align, width: Width) -> Self {
        Column {
            header,
            align,
            width,
        }
    }
}

/// What is printed above the rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    /// Print the header line.
    pub header: bool,
    /// Print a line of dashes under the header (sacct's look).
    pub rule: bool,
}

/// Renders `rows` under `columns`; each line ends in `\n`. A row shorter than
/// the column list leaves the remaining cells empty; extra cells are ignored.
/// Characters that would act on a terminal are shown escaped (cells hold
/// other users' text: see [`super::terminal_safe`]).
pub fn render(columns: &[Column], rows: &[Vec<String>], style: Style) -> String {
    let escaped: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|cell| escape_controls(cell).into_owned())
                .collect()
        })
        .collect();
    let rows = &escaped;
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, column)| match column.width {
            Width::Cut(n) | Width::Plus(n) => n,
            Width::Fit => {
                let header = if style.header {
                    column.header.chars().count()
                } else {
                    0
                };
                rows.iter()
                    .filter_map(|row| row.get(i))
                    .map(|cell| cell.chars().count())
                    .fold(header, usize::max)
            }
        })
        .collect();
    let mut out = String::new();
    if style.header {
        let headers: Vec<&str> = columns.iter().map(|c| c.header).collect();
        push_line(&mut out, columns, &widths, &headers);
        if style.rule {
            let dashes: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            let dashes: Vec<&str> = dashes.iter().map(String::as_str).collect();
            push_line(&mut out, columns, &widths, &dashes);
        }
    }
    for row in rows {
        let cells: Vec<&str> = (0..columns.len())
            .map(|i| row.get(i).map_or("", String::as_str))
            .collect();
        push_line(&mut out, columns, &widths, &cells);
    }
    out
}

fn push_line(out: &mut String, columns: &[Column], widths: &[usize], cells: &[&str]) {
    let mut line = String::new();
    for (i, ((column, width), cell)) in columns.iter().zip(widths).zip(cells).enumerate() {
        if i > 0 {
            line.push(' ');
        }
        let fitted = fit(cell, *width, column.width);
        let pad = width.saturating_sub(fitted.chars().count());
        match column.align {
            Align::Left => {
                line.push_str(&fitted);
                line.extend(std::iter::repeat_n(' ', pad));
            }
            Align::Right => {
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(&fitted);
            }
        }
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

/// The cell cut to `width` characters under `rule`.
fn fit(cell: &str, width: usize, rule: Width) -> String {
    if cell.chars().count() <= width {
        return cell.to_string();
    }
    match rule {
        Width::Fit => cell.to_string(),
        Width::Cut(_) => cell.chars().take(width).collect(),
        Width::Plus(_) => {
            let mut cut: String = cell.chars().take(width.saturating_sub(1)).collect();
            if width > 0 {
                cut.push('+');
            }
            cut
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn fixed_columns_cut_and_align() {
        let columns = [
            Column::new("ID", Align::Right, Width::Cut(4)),
            Column::new("NAME", Align::Right, Width::Cut(5)),
            Column::new("REST", Align::Left, Width::Fit),
        ];
        let out = render(
            &columns,
            &[row(&["1", "training", "x"]), row(&["12345", "ab", ""])],
            Style {
                header: true,
                rule: false,
            },
        );
        assert_eq!(out, "  ID  NAME REST\n   1 train x\n1234    ab\n");
    }

    #[test]
    fn plus_marks_a_cut_and_rule_draws_dashes() {
        let columns = [
            Column::new("JobID", Align::Left, Width::Plus(6)),
            Column::new("State", Align::Right, Width::Plus(5)),
        ];
        let out = render(
            &columns,
            &[row(&["1234567", "COMPLETED"])],
            Style {
                header: true,
                rule: true,
            },
        );
        assert_eq!(out, "JobID  State\n------ -----\n12345+ COMP+\n");
    }

    #[test]
    fn fit_ignores_header_when_hidden_and_missing_cells_are_blank() {
        let columns = [
            Column::new("LONGHEADER", Align::Left, Width::Fit),
            Column::new("B", Align::Right, Width::Fit),
        ];
        let rows = [row(&["a", "1"]), row(&["bb"])];
        assert_eq!(render(&columns, &rows, Style::default()), "a  1\nbb\n");
    }

    #[test]
    fn widths_count_characters_not_bytes() {
        let columns = [Column::new("N", Align::Left, Width::Cut(3))];
        let out = render(&columns, &[row(&["ééééé"])], Style::default());
        assert_eq!(out, "ééé\n");
    }
}
