//! Column alignment for corral's own tables (`corral cluster`, `acct
//! --usage`): columns as wide as their widest cell, one space between columns,
//! no trailing blanks. Slurm's fixed-width looks are `format_spec` (squeue,
//! sinfo) and `acct` (sacct).

use super::terminal_safe::escape_controls;

/// Which side of its column a cell hugs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Padded on the right.
    Left,
    /// Padded on the left (Slurm's `%.Nx`).
    Right,
}

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The header text.
    pub header: &'static str,
    /// Alignment of header and cells.
    pub align: Align,
}

impl Column {
    /// A column with `header` and `align`.
    pub const fn new(header: &'static str, align: Align) -> Self {
        Column { header, align }
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
        .map(|(i, column)| {
            let header = if style.header {
                column.header.chars().count()
            } else {
                0
            };
            rows.iter()
                .filter_map(|row| row.get(i))
                .map(|cell| cell.chars().count())
                .fold(header, usize::max)
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
        let pad = width.saturating_sub(cell.chars().count());
        match column.align {
            Align::Left => {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', pad));
            }
            Align::Right => {
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(cell);
            }
        }
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn columns_fit_their_widest_cell_and_rule_draws_dashes() {
        let columns = [
            Column::new("ID", Align::Right),
            Column::new("NAME", Align::Left),
        ];
        let out = render(
            &columns,
            &[row(&["1", "training"]), row(&["12345", "ab"])],
            Style {
                header: true,
                rule: true,
            },
        );
        assert_eq!(
            out,
            "   ID NAME\n----- --------\n    1 training\n12345 ab\n"
        );
    }

    #[test]
    fn fit_ignores_header_when_hidden_and_missing_cells_are_blank() {
        let columns = [
            Column::new("LONGHEADER", Align::Left),
            Column::new("B", Align::Right),
        ];
        let rows = [row(&["a", "1"]), row(&["bb"])];
        assert_eq!(render(&columns, &rows, Style::default()), "a  1\nbb\n");
    }

    #[test]
    fn widths_count_characters_not_bytes() {
        let columns = [Column::new("N", Align::Right)];
        let out = render(&columns, &[row(&["ééé"]), row(&["a"])], Style::default());
        assert_eq!(out, "ééé\n  a\n");
    }
}
