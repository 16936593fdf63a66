//! Text that came from other users (job names, comments, paths, drain
//! reasons), made safe to print to a terminal: control characters (C0, DEL,
//! C1: escape sequences, carriage returns, newlines that would forge lines) and
//! Unicode direction overrides are shown as `\xNN` / `\u{NNNN}` instead of
//! acting on the reader's terminal. JSON output needs none of this: it is
//! escaped by its encoder.

use std::borrow::Cow;

/// Whether `c` would act on a terminal instead of being shown.
fn acts(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every character that would act on a terminal escaped.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(acts) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !acts(c) {
            out.push(c);
        } else if (c as u32) <= 0xFF {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:04x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_act_on_no_terminal_and_plain_text_is_untouched() {
        assert!(matches!(escape_controls("train-7b ünï"), Cow::Borrowed(_)));
        assert_eq!(escape_controls("a\u{1b}[2Jb"), "a\\x1b[2Jb");
        assert_eq!(
            escape_controls("x\ny\rz\u{7f}\u{9b}"),
            "x\\x0ay\\x0dz\\x7f\\x9b"
        );
        assert_eq!(escape_controls("\u{202e}gnp.exe"), "\\u{202e}gnp.exe");
    }
}
