//! TOML date-times (with an offset) into the state machine's timestamps.

use corral_state::Timestamp;
use toml::value::{Datetime, Offset};

use super::values::Checked;
use crate::config::error::Refusal;

/// Milliseconds since the epoch of a full date-time with an offset.
pub(crate) fn timestamp(key: &str, value: &Datetime) -> Checked<Timestamp> {
    let (Some(date), Some(time), Some(offset)) = (value.date, value.time, value.offset) else {
        return Err(Refusal::new(
            key,
            format!("{value} needs a date, a time and an offset; write e.g. 2030-01-01T08:00:00Z"),
        ));
    };
    let offset_minutes = match offset {
        Offset::Z => 0,
        Offset::Custom { minutes } => i64::from(minutes),
    };
    let days = days_from_civil(
        i64::from(date.year),
        i64::from(date.month),
        i64::from(date.day),
    );
    let seconds = days * 86_400
        + i64::from(time.hour) * 3_600
        + i64::from(time.minute) * 60
        + i64::from(time.second)
        - offset_minutes * 60;
    let ms = seconds * 1_000 + i64::from(time.nanosecond / 1_000_000);
    match u64::try_from(ms) {
        Ok(ms) if Timestamp(ms) <= Timestamp::LATEST_ACCEPTED => Ok(Timestamp(ms)),
        _ => Err(Refusal::new(
            key,
            format!("{value} is outside the years 1970 to 2499"),
        )),
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Checked<Timestamp> {
        timestamp("k", &text.parse::<Datetime>().unwrap())
    }

    #[test]
    fn date_times_become_epoch_milliseconds() {
        assert_eq!(at("1970-01-01T00:00:00Z"), Ok(Timestamp(0)));
        assert_eq!(
            at("2000-03-01T00:00:00Z"),
            Ok(Timestamp::from_secs(951_868_800))
        );
        assert_eq!(
            at("2030-01-01T08:00:00.250Z"),
            Ok(Timestamp(1_893_484_800_250))
        );
        assert_eq!(at("2030-01-01T10:00:00+02:00"), at("2030-01-01T08:00:00Z"));
    }

    #[test]
    fn local_and_out_of_range_times_are_refused() {
        assert!(at("2030-01-01T08:00:00").is_err());
        assert!(at("2030-01-01").is_err());
        assert!(at("1969-12-31T23:59:59Z").is_err());
        assert!(at("2600-01-01T00:00:00Z").is_err());
    }
}
