//! Slurm's output format strings, shared by squeue and sinfo: the `-o` form
//! (`"%.18i %9P|%j"`: a field letter after `%`, an optional width, `.` to
//! right-align, literal text between) and the `-O` form (`"JobID:8,Name:.12"`:
//! field names separated by commas, each with an optional `:[.][width][suffix]`,
//! 20 characters wide without a `:`). A field with a width is cut or padded to
//! exactly that width; one without, or with width 0 (`Name:`, `Name:0`,
//! `%0j`), is printed whole. As in Slurm, a letter or
//! name it does not know is reported and left out (the letter as literal text),
//! and the rest still prints.

use super::terminal_safe::escape_controls;

/// One field of a format, with its width and alignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSpec<F> {
    /// Which field.
    pub field: F,
    /// Exactly this many characters (cut or padded); `None`: the whole value.
    pub width: Option<usize>,
    /// Padded on the left (`%.8j`, `Name:.8`).
    pub right: bool,
    /// Text printed right after the field (`-O`'s `Name:8|`).
    pub suffix: String,
}

/// A piece of a parsed format: literal text or a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece<F> {
    /// Printed as is.
    Text(String),
    /// A field's value (or its header).
    Field(FieldSpec<F>),
}

/// A parsed format, and what in it was not understood (Slurm's
/// `Invalid ... format specification: X`, printed and otherwise ignored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format<F> {
    /// The pieces in order.
    pub pieces: Vec<Piece<F>>,
    /// Unknown letters or names.
    pub unknown: Vec<String>,
}

impl<F> Format<F> {
    /// The fields, in order.
    pub fn fields(&self) -> impl Iterator<Item = &F> {
        self.pieces.iter().filter_map(|piece| match piece {
            Piece::Field(spec) => Some(&spec.field),
            Piece::Text(_) => None,
        })
    }
}

/// Parses the `-o` form; `letter` names the field of each letter it knows.
pub fn parse_letters<F>(format: &str, letter: impl Fn(char) -> Option<F>) -> Format<F> {
    let mut pieces = Vec::new();
    let mut unknown = Vec::new();
    let mut text = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            text.push(c);
            continue;
        }
        let mut spec = String::from("%");
        let right = chars.next_if_eq(&'.').is_some();
        if right {
            spec.push('.');
        }
        let mut digits = String::new();
        while let Some(d) = chars.next_if(char::is_ascii_digit) {
            digits.push(d);
        }
        spec.push_str(&digits);
        let Some(code) = chars.next() else {
            text.push_str(&spec);
            break;
        };
        if code == '%' && !right && digits.is_empty() {
            text.push('%');
            continue;
        }
        match letter(code) {
            Some(field) => {
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Field(FieldSpec {
                    field,
                    width: digits.parse().ok().filter(|w| *w > 0),
                    right,
                    suffix: String::new(),
                }));
            }
            None => {
                unknown.push(code.to_string());
                text.push_str(&spec);
                text.push(code);
            }
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Format { pieces, unknown }
}

/// Parses the `-O` form; `name` names the field of each (case-insensitive) name
/// it knows. Fields without a width are `default_width` wide.
pub fn parse_names<F>(
    format: &str,
    default_width: usize,
    name: impl Fn(&str) -> Option<F>,
) -> Format<F> {
    let mut pieces = Vec::new();
    let mut unknown = Vec::new();
    for token in format.split(',').filter(|t| !t.is_empty()) {
        let (field_name, modifiers) = match token.split_once(':') {
            Some((field_name, modifiers)) => (field_name, Some(modifiers)),
            None => (token, None),
        };
        let Some(field) = name(&field_name.trim().to_ascii_lowercase()) else {
            unknown.push(field_name.to_string());
            continue;
        };
        let Some(modifiers) = modifiers else {
            pieces.push(Piece::Field(FieldSpec {
                field,
                width: Some(default_width),
                right: false,
                suffix: String::new(),
            }));
            continue;
        };
        let right = modifiers.starts_with('.');
        let rest = modifiers.trim_start_matches('.');
        let digits_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (digits, suffix) = rest.split_at(digits_end);
        // `Name:` and `Name:0` print the whole value, as Slurm's strtol reads 0.
        pieces.push(Piece::Field(FieldSpec {
            field,
            width: digits.parse().ok().filter(|w| *w > 0),
            right,
            suffix: suffix.to_string(),
        }));
    }
    Format { pieces, unknown }
}

/// One line of `format`: each field's text from `cell` (its header or its
/// value), cut or padded to its width. Ends in `\n`. Characters that would act
/// on a terminal are shown escaped.
pub fn render_line<F>(format: &Format<F>, cell: impl Fn(&F) -> String) -> String {
    let mut line = String::new();
    for piece in &format.pieces {
        match piece {
            Piece::Text(text) => line.push_str(text),
            Piece::Field(spec) => {
                let value = cell(&spec.field);
                let value = escape_controls(&value);
                match spec.width {
                    None => line.push_str(&value),
                    Some(width) => {
                        let cut: String = value.chars().take(width).collect();
                        let pad = width.saturating_sub(cut.chars().count());
                        if spec.right {
                            line.extend(std::iter::repeat_n(' ', pad));
                            line.push_str(&cut);
                        } else {
                            line.push_str(&cut);
                            line.extend(std::iter::repeat_n(' ', pad));
                        }
                    }
                }
                line.push_str(&spec.suffix);
            }
        }
    }
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(c: char) -> Option<char> {
        "ijuR".contains(c).then_some(c)
    }

    fn name(n: &str) -> Option<char> {
        match n {
            "jobid" => Some('i'),
            "name" => Some('j'),
            _ => None,
        }
    }

    fn cell(f: &char) -> String {
        match f {
            'i' => "3_[1-3]".into(),
            'j' => "trainjob".into(),
            'u' => "alice".into(),
            _ => "(Resources)".into(),
        }
    }

    #[test]
    fn letters_with_widths_alignment_and_text() {
        let format = parse_letters("%.5i %10u|%j %%%R", letter);
        assert!(format.unknown.is_empty());
        assert_eq!(
            render_line(&format, cell),
            "3_[1- alice     |trainjob %(Resources)\n"
        );
    }

    #[test]
    fn an_unknown_letter_stays_as_text_and_is_reported() {
        // squeue prints `%-10j` as it is and complains about the `-`.
        let format = parse_letters("%.5i %-10j|%u", letter);
        assert_eq!(format.unknown, ["-"]);
        assert_eq!(render_line(&format, cell), "3_[1- %-10j|alice\n");
    }

    #[test]
    fn names_default_to_twenty_and_take_alignment_and_suffix() {
        let format = parse_names("JobID:.5x,Name:3,bogus,NAME", 20, name);
        assert_eq!(format.unknown, ["bogus"]);
        assert_eq!(
            render_line(&format, cell),
            "3_[1-xtratrainjob            \n"
        );
    }

    #[test]
    fn a_colon_without_width_or_a_zero_width_prints_the_whole_value() {
        let format = parse_names("JobID:,Name:0|", 20, name);
        assert_eq!(render_line(&format, cell), "3_[1-3]trainjob|\n");
        let format = parse_letters("%0j.", letter);
        assert_eq!(render_line(&format, cell), "trainjob.\n");
    }

    #[test]
    fn a_trailing_percent_is_text() {
        let format = parse_letters("%i %", letter);
        assert_eq!(render_line(&format, cell), "3_[1-3] %\n");
    }
}
