//! Slurm time specs (`MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`,
//! `UNLIMITED`) and the elapsed-time form squeue prints.
//!
//! The leading field of a form may be as large as it likes (`-t 90` is 90 minutes,
//! `-t 48:00:00` is two days); every later field is bounded: minutes and seconds
//! below 60, and hours below 24 when a day field precedes them (`1-25` is refused).
//! A limit that adds up to zero (`0`, `0:00`, `0-0`) means "no limit", as Slurm
//! reads `-t 0`.

use serde::{Deserialize, Serialize};

use super::FormatError;

/// The format name used in errors.
const FORMAT: &str = "time limit";

const SECS_PER_MINUTE: u64 = 60;
const SECS_PER_HOUR: u64 = 60 * SECS_PER_MINUTE;
const SECS_PER_DAY: u64 = 24 * SECS_PER_HOUR;

/// A job or partition time limit.
///
/// Ordered so that every finite limit is below `Unlimited` (variant order matters
/// for the derived `Ord`): `limit > partition.max_time` means "too long".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TimeLimit {
    /// A limit in whole seconds, always greater than zero.
    Seconds(u64),
    /// No limit (`UNLIMITED`, `INFINITE`, or `0` as Slurm reads it).
    Unlimited,
}

/// Parses a time limit as `sbatch --time` stores it: whole minutes, a
/// remainder of seconds rounded up (`45:30` is 46 minutes), and `0`, `-1`,
/// `UNLIMITED` or `INFINITE` for no limit.
pub fn parse_time_limit(spec: &str) -> Result<TimeLimit, FormatError> {
    if spec.trim() == "-1" {
        return Ok(TimeLimit::Unlimited);
    }
    Ok(match parse_duration(spec)? {
        TimeLimit::Seconds(seconds) => TimeLimit::Seconds(
            seconds
                .checked_next_multiple_of(60)
                .ok_or_else(|| too_large(spec))?,
        ),
        TimeLimit::Unlimited => TimeLimit::Unlimited,
    })
}

/// Parses a time in `--time`'s forms to the second (`--switches=N@TIME`).
pub fn parse_duration(spec: &str) -> Result<TimeLimit, FormatError> {
    if spec.is_empty() {
        return Err(FormatError::new(
            FORMAT,
            spec,
            "empty; expected e.g. 30, 1:30:00, 2-00:00:00 or UNLIMITED",
        ));
    }
    if spec.eq_ignore_ascii_case("UNLIMITED") || spec.eq_ignore_ascii_case("INFINITE") {
        return Ok(TimeLimit::Unlimited);
    }
    if spec.starts_with('-') {
        return Err(FormatError::new(
            FORMAT,
            spec,
            "negative; a time limit is zero or more",
        ));
    }
    let seconds = match spec.split_once('-') {
        Some((days, clock)) => parse_days_form(spec, days, clock)?,
        None => parse_clock_form(spec)?,
    };
    Ok(if seconds == 0 {
        TimeLimit::Unlimited
    } else {
        TimeLimit::Seconds(seconds)
    })
}

/// `D-HH`, `D-HH:MM`, `D-HH:MM:SS`.
fn parse_days_form(spec: &str, days: &str, clock: &str) -> Result<u64, FormatError> {
    let days = parse_field(days, "days")?;
    let fields = split_fields(
        spec,
        clock,
        "after the day field expected HH, HH:MM or HH:MM:SS",
    )?;
    let (hours, minutes, seconds) = match fields.as_slice() {
        [h] => (*h, "0", "0"),
        [h, m] => (*h, *m, "0"),
        [h, m, s] => (*h, *m, *s),
        _ => {
            return Err(FormatError::new(
                FORMAT,
                spec,
                "after the day field expected HH, HH:MM or HH:MM:SS",
            ));
        }
    };
    let hours = parse_bounded(hours, "hours after a day field", 24)?;
    let minutes = parse_bounded(minutes, "minutes", 60)?;
    let seconds = parse_bounded(seconds, "seconds", 60)?;
    days.checked_mul(SECS_PER_DAY)
        .and_then(|d| d.checked_add(hours * SECS_PER_HOUR + minutes * SECS_PER_MINUTE + seconds))
        .ok_or_else(|| too_large(spec))
}

/// `MM`, `MM:SS`, `HH:MM:SS`; the leading field is unbounded.
fn parse_clock_form(spec: &str) -> Result<u64, FormatError> {
    let fields = split_fields(spec, spec, "expected MM, MM:SS or HH:MM:SS")?;
    let total = match fields.as_slice() {
        [m] => parse_field(m, "minutes")?.checked_mul(SECS_PER_MINUTE),
        [m, s] => {
            let seconds = parse_bounded(s, "seconds", 60)?;
            parse_field(m, "minutes")?
                .checked_mul(SECS_PER_MINUTE)
                .and_then(|m| m.checked_add(seconds))
        }
        [h, m, s] => {
            let minutes = parse_bounded(m, "minutes", 60)?;
            let seconds = parse_bounded(s, "seconds", 60)?;
            parse_field(h, "hours")?
                .checked_mul(SECS_PER_HOUR)
                .and_then(|h| h.checked_add(minutes * SECS_PER_MINUTE + seconds))
        }
        _ => {
            return Err(FormatError::new(
                FORMAT,
                spec,
                "too many ':' fields; expected MM, MM:SS or HH:MM:SS",
            ));
        }
    };
    total.ok_or_else(|| too_large(spec))
}

/// Splits `clock` on `:`, refusing empty fields (naming the whole `spec`).
fn split_fields<'a>(spec: &str, clock: &'a str, shape: &str) -> Result<Vec<&'a str>, FormatError> {
    let fields: Vec<&str> = clock.split(':').collect();
    if fields.iter().any(|f| f.is_empty()) {
        return Err(FormatError::new(
            FORMAT,
            spec,
            format!("empty field; {shape}"),
        ));
    }
    Ok(fields)
}

/// Parses one field of decimal digits.
fn parse_field(field: &str, what: &str) -> Result<u64, FormatError> {
    if field.is_empty() {
        return Err(FormatError::new(
            FORMAT,
            field,
            format!("empty {what} field"),
        ));
    }
    if !field.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FormatError::new(
            FORMAT,
            field,
            format!("{what} must be decimal digits"),
        ));
    }
    field
        .parse::<u64>()
        .map_err(|_| FormatError::new(FORMAT, field, format!("{what} value is too large")))
}

/// Parses a field that must be below `limit`.
fn parse_bounded(field: &str, what: &str, limit: u64) -> Result<u64, FormatError> {
    let value = parse_field(field, what)?;
    if value >= limit {
        return Err(FormatError::new(
            FORMAT,
            field,
            format!("{what} must be below {limit}"),
        ));
    }
    Ok(value)
}

fn too_large(spec: &str) -> FormatError {
    FormatError::new(FORMAT, spec, "too large to represent")
}

/// Splits seconds into days, hours, minutes and seconds.
fn split_seconds(total: u64) -> (u64, u64, u64, u64) {
    (
        total / SECS_PER_DAY,
        total % SECS_PER_DAY / SECS_PER_HOUR,
        total % SECS_PER_HOUR / SECS_PER_MINUTE,
        total % SECS_PER_MINUTE,
    )
}

/// Prints a limit as Slurm does: `UNLIMITED`, or `[D-]HH:MM:SS`.
pub fn format_time_limit(limit: TimeLimit) -> String {
    match limit {
        TimeLimit::Unlimited => "UNLIMITED".to_string(),
        TimeLimit::Seconds(total) => {
            let (d, h, m, s) = split_seconds(total);
            if d > 0 {
                format!("{d}-{h:02}:{m:02}:{s:02}")
            } else {
                format!("{h:02}:{m:02}:{s:02}")
            }
        }
    }
}

/// Prints elapsed seconds as squeue's TIME column does: `M:SS`, `H:MM:SS`, `D-HH:MM:SS`.
pub fn format_elapsed(seconds: u64) -> String {
    let (d, h, m, s) = split_seconds(seconds);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn unlimited_is_longer_than_any_finite_limit() {
        assert!(super::TimeLimit::Unlimited > super::TimeLimit::Seconds(u64::MAX));
        assert!(super::TimeLimit::Seconds(60) < super::TimeLimit::Seconds(61));
    }

    use super::*;
    use proptest::prelude::*;

    fn secs(spec: &str) -> u64 {
        match parse_time_limit(spec).unwrap() {
            TimeLimit::Seconds(s) => s,
            TimeLimit::Unlimited => panic!("{spec} parsed as unlimited"),
        }
    }

    fn err_token(spec: &str) -> String {
        parse_time_limit(spec).unwrap_err().token
    }

    #[test]
    fn minutes_only() {
        assert_eq!(secs("1"), 60);
        assert_eq!(secs("30"), 1800);
        assert_eq!(secs("90"), 5400);
        assert_eq!(secs("0010"), 600);
    }

    #[test]
    fn minutes_seconds_round_up_to_whole_minutes() {
        assert_eq!(secs("1:30"), 120);
        assert_eq!(secs("45:30"), 46 * 60);
        assert_eq!(secs("0:05"), 60);
        assert_eq!(secs("90:00"), 5400);
        assert_eq!(parse_duration("0:05"), Ok(TimeLimit::Seconds(5)));
        // Rounding up must not wrap past the largest number of seconds.
        assert!(parse_time_limit(&format!("{}:01", u64::MAX / 60)).is_err());
        assert_eq!(
            parse_duration("-1").map_err(|e| e.token),
            Err("-1".to_string())
        );
    }

    #[test]
    fn hours_minutes_seconds() {
        assert_eq!(secs("1:02:03"), 3780);
        assert_eq!(secs("48:00:00"), 2 * 86_400);
        assert_eq!(secs("00:00:01"), 60);
    }

    #[test]
    fn day_forms() {
        assert_eq!(secs("1-0"), 86_400);
        assert_eq!(secs("2-12"), 2 * 86_400 + 12 * 3600);
        assert_eq!(secs("1-02:30"), 86_400 + 2 * 3600 + 30 * 60);
        assert_eq!(secs("2-00:00:00"), 2 * 86_400);
        assert_eq!(secs("0-00:00:30"), 60);
        assert_eq!(secs("3-23:59:59"), 4 * 86_400);
    }

    #[test]
    fn unlimited_spellings_and_zero() {
        for spec in [
            "UNLIMITED",
            "unlimited",
            "Infinite",
            "INFINITE",
            "-1",
            "0",
            "00",
            "0:00",
            "0:0:0",
            "0-0",
            "0-00:00:00",
        ] {
            assert_eq!(parse_time_limit(spec), Ok(TimeLimit::Unlimited), "{spec}");
        }
    }

    #[test]
    fn out_of_range_fields_name_the_field() {
        assert_eq!(err_token("1-25"), "25");
        assert_eq!(err_token("1-24:00"), "24");
        assert_eq!(err_token("1-00:60"), "60");
        assert_eq!(err_token("1-00:00:61"), "61");
        assert_eq!(err_token("10:61"), "61");
        assert_eq!(err_token("1:60:00"), "60");
        assert_eq!(err_token("1:00:99"), "99");
    }

    #[test]
    fn malformed_input_is_refused() {
        assert_eq!(err_token(""), "");
        assert_eq!(err_token("-5"), "-5");
        assert_eq!(err_token("1:2:3:4"), "1:2:3:4");
        assert_eq!(err_token("1-1:2:3:4"), "1-1:2:3:4");
        assert_eq!(err_token("1::2"), "1::2");
        assert_eq!(err_token("1:"), "1:");
        assert_eq!(err_token(":30"), ":30");
        assert_eq!(err_token("-"), "-");
        assert_eq!(err_token("1-"), "1-");
        assert_eq!(err_token("1-2-3"), "2-3");
        assert_eq!(err_token("10m"), "10m");
        assert_eq!(err_token("1:3x"), "3x");
        assert_eq!(err_token("x-1"), "x");
        assert_eq!(err_token(" 10"), " 10");
        assert_eq!(err_token("+10"), "+10");
        assert_eq!(err_token("1.5"), "1.5");
        assert_eq!(err_token("unlimitedx"), "unlimitedx");
    }

    #[test]
    fn overflow_is_refused() {
        assert_eq!(err_token("99999999999999999999"), "99999999999999999999");
        assert_eq!(err_token("999999999999999999"), "999999999999999999");
        assert_eq!(
            err_token("999999999999999-00:00:00"),
            "999999999999999-00:00:00"
        );
        assert!(parse_time_limit("18446744073709551615:00:00").is_err());
    }

    #[test]
    fn error_names_the_format() {
        let err = parse_time_limit("1-25").unwrap_err();
        assert_eq!(err.format, "time limit");
        assert!(err.reason.contains("24"), "{}", err.reason);
    }

    #[test]
    fn formats_limits() {
        assert_eq!(format_time_limit(TimeLimit::Unlimited), "UNLIMITED");
        assert_eq!(format_time_limit(TimeLimit::Seconds(59)), "00:00:59");
        assert_eq!(format_time_limit(TimeLimit::Seconds(5400)), "01:30:00");
        assert_eq!(format_time_limit(TimeLimit::Seconds(86_399)), "23:59:59");
        assert_eq!(format_time_limit(TimeLimit::Seconds(86_400)), "1-00:00:00");
        assert_eq!(
            format_time_limit(TimeLimit::Seconds(2 * 86_400 + 3723)),
            "2-01:02:03"
        );
    }

    #[test]
    fn formats_elapsed() {
        assert_eq!(format_elapsed(0), "0:00");
        assert_eq!(format_elapsed(7), "0:07");
        assert_eq!(format_elapsed(307), "5:07");
        assert_eq!(format_elapsed(3599), "59:59");
        assert_eq!(format_elapsed(3600), "1:00:00");
        assert_eq!(format_elapsed(3723), "1:02:03");
        assert_eq!(format_elapsed(86_399), "23:59:59");
        assert_eq!(
            format_elapsed(2 * 86_400 + 3 * 3600 + 4 * 60 + 5),
            "2-03:04:05"
        );
        assert_eq!(format_elapsed(u64::MAX), "213503982334601-07:00:15");
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(minutes in 1u64..(u64::MAX / 3600)) {
            let s = minutes * 60;
            prop_assert_eq!(parse_time_limit(&format_time_limit(TimeLimit::Seconds(s))), Ok(TimeLimit::Seconds(s)));
        }

        #[test]
        fn any_time_rounds_up_to_the_next_whole_minute(s in 1u64..(u64::MAX / 3600)) {
            prop_assert_eq!(
                parse_time_limit(&format_time_limit(TimeLimit::Seconds(s))),
                Ok(TimeLimit::Seconds(s.div_ceil(60) * 60))
            );
        }

        #[test]
        fn parse_never_panics(spec in "\\PC{0,24}") {
            let _ = parse_time_limit(&spec);
        }

        #[test]
        fn parse_never_panics_on_time_like_input(spec in "[0-9:\\-]{0,24}") {
            if let Ok(TimeLimit::Seconds(s)) = parse_time_limit(&spec) {
                prop_assert!(s > 0);
            }
        }

        #[test]
        fn minutes_only_is_minutes(m in 1u64..1_000_000) {
            prop_assert_eq!(parse_time_limit(&m.to_string()), Ok(TimeLimit::Seconds(m * 60)));
        }
    }
}
