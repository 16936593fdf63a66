//! `--begin`'s time forms, as Slurm 22.05's `parse_time` reads them, in UTC
//! (corral's times are UTC everywhere): `now[+|-COUNT[seconds|minutes|hours|
//! days|weeks]]` (seconds without a unit); a time of day `HH:MM[:SS]`
//! (optionally `AM`/`PM`), or `midnight`, `noon`, `fika` (15:00), `teatime`
//! (16:00); a date `YYYY-MM-DD`, `MM/DD[/YY]`, `MM.DD[.YY]`, `MMDD[YY]`,
//! `today`, `tomorrow`; a date and a time together (`2026-12-01T08:00`,
//! `tomorrow noon`). A time without a date is the soonest such time (today's,
//! else tomorrow's); a date without a time is its midnight.
//!
//! Parsing checks the form; [`BeginSpec::resolve`] gives the instant against
//! the submission's time.

use serde::{Deserialize, Serialize};

use super::error::FormatError;
use crate::civil::{Civil, SECS_PER_DAY, civil_from_timestamp, timestamp_from_civil};
use crate::time::Timestamp;

const FORMAT: &str = "--begin time";

/// The date part of a `--begin` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Day {
    /// `today`.
    Today,
    /// `tomorrow`.
    Tomorrow,
    /// Year (`None`: this year), month, day.
    Date(Option<u64>, u32, u32),
}

/// A parsed `--begin` value, not yet tied to a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BeginSpec {
    /// `now`, moved by this many seconds.
    Now(i64),
    /// A date, a time of day, or both.
    At {
        /// The date, if given.
        day: Option<Day>,
        /// Hour, minute, second, if given.
        time: Option<(u32, u32, u32)>,
    },
}

/// The units `now+COUNT` takes, longest names first (Slurm's table).
const UNITS: [(&str, i64); 10] = [
    ("seconds", 1),
    ("second", 1),
    ("minutes", 60),
    ("minute", 60),
    ("hours", 3600),
    ("hour", 3600),
    ("days", 86_400),
    ("day", 86_400),
    ("weeks", 604_800),
    ("week", 604_800),
];

/// Parses a `--begin` value.
pub fn parse_begin(text: &str) -> Result<BeginSpec, FormatError> {
    let bad = |why: &str| {
        FormatError::new(
            FORMAT,
            text,
            format!(
                "Invalid --begin specification: {why}; e.g. now+1hour, 16:00, tomorrow, 2026-12-01T08:00"
            ),
        )
    };
    let lower = text.trim().to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("now") {
        return parse_delta(rest.trim()).map(BeginSpec::Now).ok_or_else(|| {
            bad("a count and a unit (seconds, minutes, hours, days or weeks) follow now+ or now-")
        });
    }
    let mut day = None;
    let mut time = None;
    // `2026-12-01T08:00` and `12/01/26-08:00` are a date and a time.
    let words = lower.split_ascii_whitespace().flat_map(split_date_and_time);
    for word in words {
        let mut set_time = |value| {
            if time.replace(value).is_some() {
                return Err(bad("it gives two times of day"));
            }
            Ok(())
        };
        match word {
            "today" | "tomorrow" => {
                let value = if word == "today" {
                    Day::Today
                } else {
                    Day::Tomorrow
                };
                if day.replace(value).is_some() {
                    return Err(bad("it gives two dates"));
                }
            }
            "midnight" => set_time((0, 0, 0))?,
            "noon" => set_time((12, 0, 0))?,
            "fika" => set_time((15, 0, 0))?,
            "teatime" => set_time((16, 0, 0))?,
            "am" | "pm" => {
                let Some((hour, minute, second)) = time else {
                    return Err(bad("AM or PM follows a time of day"));
                };
                let hour = twelve_hour(word, hour).ok_or_else(|| bad(TWELVE_HOURS))?;
                time = Some((hour, minute, second));
            }
            _ if word.contains(':') => {
                let (clock, suffix) = split_suffix(word);
                set_time(parse_clock(clock).ok_or_else(|| bad("a time of day is HH:MM[:SS]"))?)?;
                if let Some(suffix) = suffix {
                    let (hour, minute, second) = time.unwrap_or_default();
                    let hour = twelve_hour(suffix, hour).ok_or_else(|| bad(TWELVE_HOURS))?;
                    time = Some((hour, minute, second));
                }
            }
            _ => {
                let value = parse_date(word)
                    .ok_or_else(|| bad("a date is YYYY-MM-DD, MM/DD[/YY] or MMDD[YY]"))?;
                if day.replace(value).is_some() {
                    return Err(bad("it gives two dates"));
                }
            }
        }
    }
    if day.is_none() && time.is_none() {
        return Err(bad("it gives no time"));
    }
    Ok(BeginSpec::At { day, time })
}

/// A word holding a date and a time (`2026-12-01T08:00`, `12/01-08:00`) as
/// two words; any other word as it is.
fn split_date_and_time(word: &str) -> Vec<&str> {
    if !word.starts_with(|c: char| c.is_ascii_digit()) {
        return vec![word];
    }
    if let Some((date, time)) = word.split_once('t') {
        return vec![date, time];
    }
    // `MM/DD[/YY]-HH:MM`: the dash before the clock time separates them.
    if word.contains(['/', '.'])
        && let Some((date, time)) = word.split_once('-')
        && time.contains(':')
    {
        return vec![date, time];
    }
    vec![word]
}

/// Why a 12-hour time is refused.
const TWELVE_HOURS: &str = "a 12-hour time runs from 1 to 12";

/// `hour` (1 to 12) followed by `am` or `pm`, on the 24-hour clock; `None`
/// outside 1 to 12.
fn twelve_hour(suffix: &str, hour: u32) -> Option<u32> {
    if !(1..=12).contains(&hour) {
        return None;
    }
    Some(match (suffix, hour) {
        ("am", 12) => 0,
        ("pm", h) if h < 12 => h + 12,
        (_, h) => h,
    })
}

/// `13:00am` → (`13:00`, `am`).
fn split_suffix(word: &str) -> (&str, Option<&str>) {
    for suffix in ["am", "pm"] {
        if let Some(clock) = word.strip_suffix(suffix) {
            return (clock, Some(suffix));
        }
    }
    (word, None)
}

/// `+90`, `+2hours`, `-1day`, or nothing (zero).
fn parse_delta(text: &str) -> Option<i64> {
    if text.is_empty() {
        return Some(0);
    }
    let (sign, rest) = match text.as_bytes().first()? {
        b'+' => (1, &text[1..]),
        b'-' => (-1, &text[1..]),
        _ => return None,
    };
    let rest = rest.trim();
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let count: i64 = rest[..digits].parse().ok()?;
    let unit = rest[digits..].trim();
    let multiplier = if unit.is_empty() {
        1
    } else {
        UNITS.iter().find(|(name, _)| *name == unit)?.1
    };
    count.checked_mul(multiplier)?.checked_mul(sign)
}

/// `HH:MM[:SS]`.
fn parse_clock(text: &str) -> Option<(u32, u32, u32)> {
    let parts: Vec<&str> = text.split(':').collect();
    let number = |s: &str, max: u32| -> Option<u32> {
        if s.is_empty() || s.len() > 2 || !s.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        s.parse().ok().filter(|n| *n <= max)
    };
    match parts.as_slice() {
        [h, m] => Some((number(h, 23)?, number(m, 59)?, 0)),
        [h, m, s] => Some((number(h, 23)?, number(m, 59)?, number(s, 59)?)),
        _ => None,
    }
}

/// `YYYY-MM-DD`, `MM/DD[/YY]`, `MM.DD[.YY]`, `MMDD[YY]`.
fn parse_date(text: &str) -> Option<Day> {
    let number = |s: &str| -> Option<u32> {
        (!s.is_empty() && s.chars().all(|c| c.is_ascii_digit())).then(|| s.parse().ok())?
    };
    let two_digit_year = |y: u32| u64::from(2000 + y);
    let parts: Vec<&str> = text.split(['-', '/', '.']).collect();
    let day = match (text.contains('-'), parts.as_slice()) {
        (true, [y, m, d]) if y.len() == 4 => {
            Day::Date(Some(u64::from(number(y)?)), number(m)?, number(d)?)
        }
        (false, [m, d]) => Day::Date(None, number(m)?, number(d)?),
        (false, [m, d, y]) if y.len() == 2 => {
            Day::Date(Some(two_digit_year(number(y)?)), number(m)?, number(d)?)
        }
        (false, [digits]) if digits.len() == 4 => {
            Day::Date(None, number(&digits[..2])?, number(&digits[2..])?)
        }
        (false, [digits]) if digits.len() == 6 => Day::Date(
            Some(two_digit_year(number(&digits[4..])?)),
            number(&digits[..2])?,
            number(&digits[2..4])?,
        ),
        _ => return None,
    };
    let Day::Date(_, month, day_of_month) = day else {
        return None;
    };
    ((1..=12).contains(&month) && (1..=31).contains(&day_of_month)).then_some(day)
}

impl BeginSpec {
    /// The instant this names for a job submitted at `now`; `None` for a date
    /// that does not exist (31 April) or is past the year 2500.
    pub fn resolve(&self, now: Timestamp) -> Option<Timestamp> {
        self.resolve_unbounded(now)
            .filter(|at| *at <= Timestamp::LATEST_ACCEPTED)
    }

    fn resolve_unbounded(&self, now: Timestamp) -> Option<Timestamp> {
        match *self {
            BeginSpec::Now(delta) => {
                let ms = delta.checked_mul(1000)?;
                let at = i128::from(now.as_ms()) + i128::from(ms);
                Some(Timestamp(u64::try_from(at.max(0)).ok()?))
            }
            BeginSpec::At { day, time } => {
                let today = civil_from_timestamp(now);
                let date_of = |d: Day| -> Option<Civil> {
                    let base = |at: Timestamp| civil_from_timestamp(at);
                    Some(match d {
                        Day::Today => base(now),
                        Day::Tomorrow => base(now.plus_secs(SECS_PER_DAY)),
                        Day::Date(year, month, day) => Civil {
                            year: year.unwrap_or(today.year),
                            month,
                            day,
                            ..today
                        },
                    })
                };
                let (hour, minute, second) = time.unwrap_or((0, 0, 0));
                let at = |date: Civil| {
                    timestamp_from_civil(Civil {
                        hour,
                        minute,
                        second,
                        ..date
                    })
                };
                match day {
                    // A date without a year that has passed is next year's,
                    // as Slurm's parse_time rolls it.
                    Some(d @ Day::Date(None, ..)) => {
                        let date = date_of(d)?;
                        match at(date) {
                            Some(this_year) if this_year > now => Some(this_year),
                            _ => at(Civil {
                                year: date.year + 1,
                                ..date
                            }),
                        }
                    }
                    Some(d) => at(date_of(d)?),
                    // A time alone: today's if still ahead (to the minute, as
                    // Slurm), else tomorrow's.
                    None => {
                        let ahead = (hour, minute) > (today.hour, today.minute);
                        let date = if ahead {
                            today
                        } else {
                            civil_from_timestamp(now.plus_secs(SECS_PER_DAY))
                        };
                        at(date)
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-21T08:00:00Z.
    const NOW: Timestamp = Timestamp(1_795_248_000_000);

    fn at(text: &str) -> Timestamp {
        parse_begin(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .resolve(NOW)
            .unwrap_or_else(|| panic!("{text}: no such time"))
    }

    fn utc(date_time: &str) -> Timestamp {
        let spec = parse_begin(date_time).unwrap();
        spec.resolve(NOW).unwrap()
    }

    #[test]
    fn relative_times_move_from_now_in_slurms_units() {
        assert_eq!(at("now"), NOW);
        assert_eq!(at("now+90"), NOW.plus_secs(90));
        assert_eq!(at("now+1hour"), NOW.plus_secs(3600));
        assert_eq!(at("now+2days"), NOW.plus_secs(2 * 86_400));
        assert_eq!(at("NOW+1week"), NOW.plus_secs(604_800));
        assert_eq!(at("now-10minutes"), Timestamp(NOW.as_ms() - 600_000));
        // Slurm knows no abbreviations.
        assert!(parse_begin("now+30min").is_err());
        assert!(parse_begin("now+").is_err());
    }

    #[test]
    fn a_time_alone_is_the_soonest_and_a_date_alone_its_midnight() {
        assert_eq!(at("16:00"), utc("2026-11-21T16:00:00"));
        assert_eq!(at("07:30"), utc("2026-11-22T07:30:00"));
        assert_eq!(
            at("08:00"),
            utc("2026-11-22T08:00:00"),
            "not ahead to the minute"
        );
        assert_eq!(at("midnight"), utc("2026-11-22T00:00:00"));
        assert_eq!(at("noon"), utc("2026-11-21T12:00:00"));
        assert_eq!(at("fika"), utc("2026-11-21T15:00:00"));
        assert_eq!(at("teatime"), utc("2026-11-21T16:00:00"));
        assert_eq!(at("4:30pm"), utc("2026-11-21T16:30:00"));
        assert_eq!(at("12:15 AM"), utc("2026-11-22T00:15:00"));
        assert_eq!(at("tomorrow"), utc("2026-11-22T00:00:00"));
        assert_eq!(at("today"), utc("2026-11-21T00:00:00"));
        assert_eq!(at("tomorrow noon"), utc("2026-11-22T12:00:00"));
        assert_eq!(at("2026-12-01"), Timestamp::from_secs(1_796_083_200));
        assert_eq!(
            at("2026-12-01T08:30"),
            Timestamp::from_secs(1_796_083_200 + 8 * 3600 + 1800)
        );
        assert_eq!(at("12/01"), at("2026-12-01"));
        assert_eq!(at("12/01/27"), at("2027-12-01"));
        assert_eq!(at("1201"), at("2026-12-01"));
        assert_eq!(at("120127"), at("2027-12-01"));
        assert_eq!(at("12.01.27"), at("2027-12-01"));
        assert_eq!(at("12/01-08:30"), at("2026-12-01T08:30"));
        assert_eq!(at("12/01/27-08:30:15"), at("2027-12-01T08:30:15"));
        // A date without a year that has passed is next year's.
        assert_eq!(at("01/15"), at("2027-01-15"));
        assert_eq!(at("1121"), at("2027-11-21"), "today's midnight has passed");
        assert_eq!(
            at("11/21-09:00"),
            at("2026-11-21T09:00"),
            "still ahead today"
        );
        assert_eq!(
            at("2026-01-15"),
            Timestamp::from_secs(1_768_435_200),
            "a past date with a year stays"
        );
        assert_eq!(parse_begin("2600-01-01").unwrap().resolve(NOW), None);
    }

    #[test]
    fn malformed_values_are_refused_with_slurms_words() {
        for text in [
            "",
            "soon",
            "25:00",
            "12:60",
            "13:00pm",
            "2026-13-01",
            "12/32",
            "now*2",
            "noon midnight",
        ] {
            let err = parse_begin(text).unwrap_err();
            assert!(
                err.reason.starts_with("Invalid --begin specification"),
                "{text}: {err}"
            );
        }
        // A date the calendar does not have parses, but names no time.
        assert_eq!(parse_begin("2026-04-31").unwrap().resolve(NOW), None);
    }
}
