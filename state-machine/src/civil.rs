//! UTC calendar dates and times of day, and the timestamps they name: the
//! civil-date arithmetic (Howard Hinnant's `days_from_civil` and
//! `civil_from_days`, over the proleptic Gregorian calendar) that times typed
//! by users (`--begin`, `sacct -S`) and printed for them need.

use crate::time::Timestamp;

/// Seconds in a day.
pub const SECS_PER_DAY: u64 = 86_400;
/// Days from 0000-03-01 to 1970-01-01.
const EPOCH_SHIFT_DAYS: u64 = 719_468;
const DAYS_PER_ERA: u64 = 146_097;

/// A UTC date and time of day, to the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Civil {
    /// Year, e.g. 2026.
    pub year: u64,
    /// Month, 1-12.
    pub month: u32,
    /// Day of the month, 1-31.
    pub day: u32,
    /// Hour, 0-23.
    pub hour: u32,
    /// Minute, 0-59.
    pub minute: u32,
    /// Second, 0-59.
    pub second: u32,
}

/// `at` as a UTC calendar date and time.
pub fn civil_from_timestamp(at: Timestamp) -> Civil {
    let secs = at.as_secs();
    let (year, month, day) = civil_from_days(secs / SECS_PER_DAY);
    let of_day = secs % SECS_PER_DAY;
    // Each field is below 86400, so the narrowing conversions cannot fail.
    let field = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    Civil {
        year,
        month,
        day,
        hour: field(of_day / 3600),
        minute: field(of_day % 3600 / 60),
        second: field(of_day % 60),
    }
}

/// The timestamp of a UTC calendar date and time, or `None` when a field is out
/// of range (month 13, 31 April, 29 February of a common year, hour 24) or the
/// date is before 1970.
pub fn timestamp_from_civil(c: Civil) -> Option<Timestamp> {
    if c.year < 1970
        || !(1..=12).contains(&c.month)
        || c.day == 0
        || c.day > days_in_month(c.year, c.month)
        || c.hour > 23
        || c.minute > 59
        || c.second > 59
    {
        return None;
    }
    let days = days_from_civil(c.year, c.month, c.day);
    let secs = days
        .checked_mul(SECS_PER_DAY)?
        .checked_add(u64::from(c.hour) * 3600 + u64::from(c.minute) * 60 + u64::from(c.second))?;
    Some(Timestamp(secs.checked_mul(1000)?))
}

fn is_leap(year: u64) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_month(year: u64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a date in 1970 or later.
fn days_from_civil(year: u64, month: u32, day: u32) -> u64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let year_of_era = year % 400;
    let month = u64::from(month);
    let shifted_month = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * shifted_month + 2) / 5 + u64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * DAYS_PER_ERA + day_of_era - EPOCH_SHIFT_DAYS
}

/// The date `days` days after 1970-01-01.
fn civil_from_days(days: u64) -> (u64, u32, u32) {
    let z = days + EPOCH_SHIFT_DAYS;
    let era = z / DAYS_PER_ERA;
    let day_of_era = z % DAYS_PER_ERA;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    // day <= 31 and month <= 12.
    let small = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    (year, small(month), small(day))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn civil(year: u64, month: u32, day: u32, hour: u32, minute: u32, second: u32) -> Civil {
        Civil {
            year,
            month,
            day,
            hour,
            minute,
            second,
        }
    }

    #[test]
    fn civil_round_trips() {
        for secs in (0..20_000_000_000u64).step_by(7_654_321) {
            let at = Timestamp::from_secs(secs);
            assert_eq!(timestamp_from_civil(civil_from_timestamp(at)), Some(at));
        }
    }

    #[test]
    fn refuses_impossible_dates() {
        assert_eq!(timestamp_from_civil(civil(2026, 2, 29, 0, 0, 0)), None);
        assert!(timestamp_from_civil(civil(2028, 2, 29, 0, 0, 0)).is_some());
        assert_eq!(timestamp_from_civil(civil(2026, 4, 31, 0, 0, 0)), None);
        assert_eq!(timestamp_from_civil(civil(2026, 13, 1, 0, 0, 0)), None);
        assert_eq!(timestamp_from_civil(civil(2026, 1, 1, 24, 0, 0)), None);
        assert_eq!(timestamp_from_civil(civil(1969, 12, 31, 0, 0, 0)), None);
        assert_eq!(
            timestamp_from_civil(civil(2026, 11, 21, 8, 0, 0)),
            Some(Timestamp::from_secs(1_795_248_000))
        );
    }
}
