//! Output and error filename patterns: `%j %A %a %x %u %N %n %t %%`, with optional
//! zero-padding widths (`%4a`) and `\\` disabling substitution, as sbatch does.
//!
//! Also accepted: `%s`, the step (`batch` for the batch script, the step's
//! number for an `srun` step), and `%J` (`<job id>.<step>`).
//! A width of at most [`MAX_WIDTH`] digits may stand between `%` and the letter;
//! it zero-pads the numeric fields and is ignored on the others.

use super::FormatError;

/// The format name used in errors.
const FORMAT: &str = "filename pattern";

/// The widest zero-padding a pattern may ask for, as in `%10j`.
pub const MAX_WIDTH: usize = 10;

/// What Slurm prints for `%a` when the job is not part of an array.
pub const NO_ARRAY_TASK_ID: u32 = 4_294_967_294;

/// What Slurm prints for the batch step's step id.
const BATCH_STEP: &str = "batch";

/// The values a pattern may refer to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternValues<'a> {
    /// `%j`: the job id.
    pub job_id: u64,
    /// `%A`: the array's job id; for a job outside an array, its own id.
    pub array_job_id: Option<u64>,
    /// `%a`: the array task id; outside an array Slurm prints 4294967294.
    pub array_task_id: Option<u32>,
    /// `%x`: the job name.
    pub job_name: &'a str,
    /// `%u`: the user name.
    pub user: &'a str,
    /// `%N`: the short host name of the node that opens the file.
    pub node: &'a str,
    /// `%n`: the node's index within the allocation.
    pub node_id: u32,
    /// `%t`: the task's rank.
    pub task_id: u32,
    /// `%s`: the `srun` step's number; `None` for the batch script.
    pub step: Option<u32>,
}

/// Substitutes `values` into `pattern`.
///
/// If the pattern holds a backslash anywhere, nothing is substituted and the
/// backslashes are dropped (`job\%j.out` gives `job%j.out`), as sbatch does.
/// Errors name the offending directive: a `%` at the end (`%`, `%4`), an unknown
/// letter (`%q`), or a width over [`MAX_WIDTH`] (`%11j`).
pub fn expand_pattern(pattern: &str, values: &PatternValues<'_>) -> Result<String, FormatError> {
    if pattern.contains('\\') {
        return Ok(pattern.replace('\\', ""));
    }
    let mut out = String::with_capacity(pattern.len());
    let mut rest = pattern;
    while let Some(percent) = rest.find('%') {
        out.push_str(&rest[..percent]);
        let (directive, after) = parse_directive(&rest[percent..])?;
        directive.write(values, &mut out);
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

/// What a `%` directive stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// `%%`
    Percent,
    /// `%j`
    JobId,
    /// `%A`
    ArrayJobId,
    /// `%a`
    ArrayTaskId,
    /// `%J`
    JobStep,
    /// `%s`
    StepId,
    /// `%x`
    JobName,
    /// `%u`
    User,
    /// `%N`
    Node,
    /// `%n`
    NodeId,
    /// `%t`
    TaskId,
}

impl Field {
    /// The field a directive letter names, if any.
    fn from_letter(letter: char) -> Option<Self> {
        Some(match letter {
            '%' => Field::Percent,
            'j' => Field::JobId,
            'A' => Field::ArrayJobId,
            'a' => Field::ArrayTaskId,
            'J' => Field::JobStep,
            's' => Field::StepId,
            'x' => Field::JobName,
            'u' => Field::User,
            'N' => Field::Node,
            'n' => Field::NodeId,
            't' => Field::TaskId,
            _ => return None,
        })
    }
}

/// A parsed directive: a field and the zero-padding width before its letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Directive {
    field: Field,
    width: usize,
}

impl Directive {
    /// Appends the directive's value to `out`.
    fn write(self, values: &PatternValues<'_>, out: &mut String) {
        let width = self.width;
        match self.field {
            Field::Percent => out.push('%'),
            Field::JobId => push_padded(out, values.job_id, width),
            Field::ArrayJobId => {
                push_padded(out, values.array_job_id.unwrap_or(values.job_id), width);
            }
            Field::ArrayTaskId => {
                let task = values.array_task_id.unwrap_or(NO_ARRAY_TASK_ID);
                push_padded(out, u64::from(task), width);
            }
            Field::JobStep => {
                push_padded(out, values.job_id, width);
                out.push('.');
                push_step(out, values.step, width);
            }
            Field::StepId => push_step(out, values.step, width),
            Field::JobName => out.push_str(values.job_name),
            Field::User => out.push_str(values.user),
            Field::Node => out.push_str(values.node),
            Field::NodeId => push_padded(out, u64::from(values.node_id), width),
            Field::TaskId => push_padded(out, u64::from(values.task_id), width),
        }
    }
}

/// Appends the step: its number, zero-padded, or `batch`.
fn push_step(out: &mut String, step: Option<u32>, width: usize) {
    match step {
        Some(step) => push_padded(out, u64::from(step), width),
        None => out.push_str(BATCH_STEP),
    }
}

/// Appends `number` zero-padded to `width` digits.
fn push_padded(out: &mut String, number: u64, width: usize) {
    out.push_str(&format!("{number:0width$}"));
}

/// Parses the directive at the start of `text` (which starts with `%`), returning
/// it and the text after it.
fn parse_directive(text: &str) -> Result<(Directive, &str), FormatError> {
    let body = &text[1..];
    let digits_len = body.bytes().take_while(u8::is_ascii_digit).count();
    let (digits, after_digits) = body.split_at(digits_len);
    let Some(letter) = after_digits.chars().next() else {
        return Err(FormatError::new(
            FORMAT,
            text,
            "a '%' at the end of the pattern; write '%%' for a literal '%'",
        ));
    };
    let end = 1 + digits_len + letter.len_utf8();
    let token = &text[..end];
    let field = Field::from_letter(letter).ok_or_else(|| {
        FormatError::new(
            FORMAT,
            token,
            "unknown replacement; use %j %J %A %a %s %x %u %N %n %t or %%",
        )
    })?;
    let width = parse_width(digits, token)?;
    Ok((Directive { field, width }, &text[end..]))
}

/// Parses the optional width digits of a directive; `token` is what an error quotes.
fn parse_width(digits: &str, token: &str) -> Result<usize, FormatError> {
    if digits.is_empty() {
        return Ok(0);
    }
    match digits.parse::<usize>() {
        Ok(width) if width <= MAX_WIDTH => Ok(width),
        _ => Err(FormatError::new(
            FORMAT,
            token,
            format!("zero-padding width over {MAX_WIDTH} digits"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> PatternValues<'static> {
        PatternValues {
            job_id: 123,
            array_job_id: None,
            array_task_id: None,
            job_name: "train",
            user: "alice",
            node: "gpu-node001",
            node_id: 2,
            task_id: 5,
            step: None,
        }
    }

    fn array_values() -> PatternValues<'static> {
        PatternValues {
            job_id: 130,
            array_job_id: Some(123),
            array_task_id: Some(7),
            ..values()
        }
    }

    fn expand(pattern: &str) -> String {
        expand_pattern(pattern, &values()).unwrap()
    }

    fn err_token(pattern: &str) -> String {
        let err = expand_pattern(pattern, &values()).unwrap_err();
        assert_eq!(err.format, "filename pattern");
        err.token
    }

    #[test]
    fn substitutes_every_field() {
        assert_eq!(expand("slurm-%j.out"), "slurm-123.out");
        assert_eq!(expand("%x-%u-%N-%n-%t-%%"), "train-alice-gpu-node001-2-5-%");
        assert_eq!(expand("plain.txt"), "plain.txt");
        assert_eq!(expand(""), "");
    }

    #[test]
    fn array_fields_inside_an_array() {
        let out = expand_pattern("%A_%a-%j.out", &array_values()).unwrap();
        assert_eq!(out, "123_7-130.out");
    }

    #[test]
    fn array_fields_outside_an_array() {
        assert_eq!(expand("%A_%a"), "123_4294967294");
        assert_eq!(expand("%4a"), "4294967294");
    }

    #[test]
    fn widths_zero_pad_numbers() {
        let out = expand_pattern("%4a|%3j|%5A|%2n|%3t", &array_values()).unwrap();
        assert_eq!(out, "0007|130|00123|02|005");
        assert_eq!(expand("%10j"), "0000000123");
        assert_eq!(expand("%0j"), "123");
        assert_eq!(expand("%2j"), "123");
    }

    #[test]
    fn widths_on_text_fields_are_ignored() {
        assert_eq!(
            expand("%8x.%3u.%9N.%4s.%5%"),
            "train.alice.gpu-node001.batch.%"
        );
    }

    #[test]
    fn batch_step_fields() {
        assert_eq!(expand("%J.out"), "123.batch.out");
        assert_eq!(expand("%5J"), "00123.batch");
        assert_eq!(expand("%s"), "batch");
    }

    #[test]
    fn backslash_disables_substitution() {
        assert_eq!(expand("job\\%j.out"), "job%j.out");
        assert_eq!(expand("a\\\\b%q%"), "ab%q%");
    }

    #[test]
    fn percent_percent_is_literal() {
        assert_eq!(expand("%%j"), "%j");
        assert_eq!(expand("100%%"), "100%");
    }

    #[test]
    fn trailing_percent_is_refused() {
        assert_eq!(err_token("out%"), "%");
        assert_eq!(err_token("out%12"), "%12");
    }

    #[test]
    fn unknown_letters_are_refused() {
        assert_eq!(err_token("slurm-%q.out"), "%q");
        assert_eq!(err_token("%3q"), "%3q");
        assert_eq!(err_token("%-j"), "%-");
        assert_eq!(err_token("%é"), "%é");
        let err = expand_pattern("%q", &values()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid filename pattern '%q': ")
        );
    }

    #[test]
    fn wide_widths_are_refused() {
        assert_eq!(err_token("x%11j"), "%11j");
        assert_eq!(
            err_token("%99999999999999999999999j"),
            "%99999999999999999999999j"
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(pattern in "\\PC{0,30}") {
            let _ = expand_pattern(&pattern, &values());
        }

        #[test]
        fn text_without_percent_or_backslash_is_unchanged(pattern in "[^%\\\\]{0,30}") {
            proptest::prop_assert_eq!(expand_pattern(&pattern, &values()).unwrap(), pattern);
        }
    }
}
