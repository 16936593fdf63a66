//! `--mail-type`: the job events a user asks to be mailed about, as Slurm 22.05
//! reads them (a comma list, case-insensitive; repeated options are ORed; `ALL`
//! is every event but the time-limit warnings and `ARRAY_TASKS`; `NONE` adds
//! nothing) and prints them (`END,FAIL`, in Slurm's fixed order; `NONE` when
//! empty).

use serde::{Deserialize, Serialize};

use super::FormatError;

const FORMAT: &str = "mail type";

/// A set of mail events. Stored as bits; the bit values are corral's own and
/// never change (they are in the replicated state).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MailTypes(u16);

const BEGIN: u16 = 1;
const END: u16 = 1 << 1;
const FAIL: u16 = 1 << 2;
const REQUEUE: u16 = 1 << 3;
const INVALID_DEPEND: u16 = 1 << 4;
const STAGE_OUT: u16 = 1 << 5;
const TIME_LIMIT: u16 = 1 << 6;
const TIME_LIMIT_90: u16 = 1 << 7;
const TIME_LIMIT_80: u16 = 1 << 8;
const TIME_LIMIT_50: u16 = 1 << 9;
const ARRAY_TASKS: u16 = 1 << 10;

/// Names in the order Slurm prints them.
const NAMES: &[(u16, &str)] = &[
    (ARRAY_TASKS, "ARRAY_TASKS"),
    (INVALID_DEPEND, "INVALID_DEPEND"),
    (BEGIN, "BEGIN"),
    (END, "END"),
    (FAIL, "FAIL"),
    (REQUEUE, "REQUEUE"),
    (STAGE_OUT, "STAGE_OUT"),
    (TIME_LIMIT_50, "TIME_LIMIT_50"),
    (TIME_LIMIT_80, "TIME_LIMIT_80"),
    (TIME_LIMIT_90, "TIME_LIMIT_90"),
    (TIME_LIMIT, "TIME_LIMIT"),
];

const ALL: u16 = INVALID_DEPEND | BEGIN | END | FAIL | REQUEUE | STAGE_OUT;

impl MailTypes {
    /// No events.
    pub const NONE: MailTypes = MailTypes(0);
    /// `BEGIN`: the job started.
    pub const BEGIN: MailTypes = MailTypes(BEGIN);
    /// `END`: it completed or was cancelled.
    pub const END: MailTypes = MailTypes(END);
    /// `FAIL`: it failed (exit code, time limit, node failure).
    pub const FAIL: MailTypes = MailTypes(FAIL);
    /// `REQUEUE`: it was requeued.
    pub const REQUEUE: MailTypes = MailTypes(REQUEUE);
    /// `TIME_LIMIT`: it reached its time limit.
    pub const TIME_LIMIT: MailTypes = MailTypes(TIME_LIMIT);
    /// `TIME_LIMIT_90`.
    pub const TIME_LIMIT_90: MailTypes = MailTypes(TIME_LIMIT_90);
    /// `TIME_LIMIT_80`.
    pub const TIME_LIMIT_80: MailTypes = MailTypes(TIME_LIMIT_80);
    /// `TIME_LIMIT_50`.
    pub const TIME_LIMIT_50: MailTypes = MailTypes(TIME_LIMIT_50);
    /// `ARRAY_TASKS`: an array's tasks are mailed about one by one.
    pub const ARRAY_TASKS: MailTypes = MailTypes(ARRAY_TASKS);
    /// `INVALID_DEPEND`: the job's dependency can never be satisfied.
    pub const INVALID_DEPEND: MailTypes = MailTypes(INVALID_DEPEND);

    /// Whether every event of `other` is asked for.
    pub fn contains(self, other: MailTypes) -> bool {
        self.0 & other.0 == other.0
    }

    /// Parses one `--mail-type` value. Unknown names are ignored when at least
    /// one name is known (as Slurm does); a value of unknown names only is an
    /// error. `NONE` makes the whole value add nothing (`BEGIN,NONE,END` is
    /// `NONE`), as Slurm's parser does; earlier `--mail-type` options stay.
    pub fn parse(text: &str) -> Result<MailTypes, FormatError> {
        let mut bits = 0;
        for token in text.split(',').filter(|t| !t.is_empty()) {
            if token.eq_ignore_ascii_case("NONE") {
                return Ok(MailTypes::NONE);
            }
            if token.eq_ignore_ascii_case("ALL") {
                bits |= ALL;
                continue;
            }
            if let Some((bit, _)) = NAMES
                .iter()
                .find(|(_, name)| name.eq_ignore_ascii_case(token))
            {
                bits |= bit;
            }
        }
        if bits == 0 {
            return Err(FormatError::new(
                FORMAT,
                text,
                "give NONE, BEGIN, END, FAIL, REQUEUE, ALL, INVALID_DEPEND, STAGE_OUT, \
                 TIME_LIMIT, TIME_LIMIT_90, TIME_LIMIT_80, TIME_LIMIT_50 or ARRAY_TASKS",
            ));
        }
        Ok(MailTypes(bits))
    }

    /// Both sets (a repeated `--mail-type`).
    pub fn union(self, other: MailTypes) -> MailTypes {
        MailTypes(self.0 | other.0)
    }

    /// True when no event is asked for.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl std::fmt::Display for MailTypes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 == 0 {
            return f.write_str("NONE");
        }
        let mut first = true;
        for (bit, name) in NAMES {
            if self.0 & bit != 0 {
                if !first {
                    f.write_str(",")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> String {
        MailTypes::parse(text)
            .map(|m| m.to_string())
            .unwrap_or_else(|e| e.to_string())
    }

    #[test]
    fn slurm_names_print_in_slurms_order() {
        assert_eq!(shown("FAIL,END"), "END,FAIL");
        assert_eq!(
            shown("all"),
            "INVALID_DEPEND,BEGIN,END,FAIL,REQUEUE,STAGE_OUT"
        );
        assert_eq!(
            shown("TIME_LIMIT,TIME_LIMIT_90,ARRAY_TASKS"),
            "ARRAY_TASKS,TIME_LIMIT_90,TIME_LIMIT"
        );
        assert_eq!(shown("NONE"), "NONE");
        assert_eq!(shown("END,bogus"), "END");
        assert_eq!(shown("BEGIN,NONE,END"), "NONE");
    }

    #[test]
    fn only_unknown_names_are_refused() {
        assert!(MailTypes::parse("bogus").is_err());
        assert!(MailTypes::parse("").is_err());
    }

    #[test]
    fn repeated_options_accumulate() {
        let end = MailTypes::parse("END").unwrap_or_default();
        let fail = MailTypes::parse("FAIL").unwrap_or_default();
        assert_eq!(end.union(fail).to_string(), "END,FAIL");
        assert_eq!(MailTypes::NONE.union(end), end);
    }
}
