//! Times as users type them to `sacct -S/-E`: `now`, `now-2hours`, `now+30min`,
//! `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS]` (UTC), or milliseconds since the epoch.
//! One parser for every time a user types: reservations use the same forms.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::bail;
use corral_state::time::Timestamp;

/// Now in ms since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Parses `text` relative to `now` (ms): `now-N[UNIT]` here, every other form by
/// the parser reservations use (`admin_args::parse_when`).
pub fn parse(text: &str, now: u64) -> anyhow::Result<u64> {
    let trimmed = text.trim();
    if let Some(amount) = trimmed.strip_prefix("now-") {
        return Ok(now.saturating_sub(offset_ms(amount)?));
    }
    if let Ok(ms) = trimmed.parse::<u64>() {
        return Ok(ms);
    }
    let at = crate::admin_args::parse_when("time", trimmed, Timestamp(now))?;
    Ok(at.as_ms())
}

fn offset_ms(amount: &str) -> anyhow::Result<u64> {
    let digits: String = amount.chars().take_while(char::is_ascii_digit).collect();
    let unit = &amount[digits.len()..];
    let n: u64 = digits
        .parse()
        .map_err(|_| anyhow::anyhow!("'{amount}' needs a number then a unit, e.g. 2hours"))?;
    let unit_ms = match unit {
        "" | "s" | "sec" | "secs" | "seconds" => 1_000,
        "m" | "min" | "mins" | "minutes" => 60_000,
        "h" | "hour" | "hours" => 3_600_000,
        "d" | "day" | "days" => 86_400_000,
        "w" | "week" | "weeks" => 604_800_000,
        _ => bail!("unknown time unit '{unit}'; use seconds, minutes, hours, days or weeks"),
    };
    Ok(n.saturating_mul(unit_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_and_civil_times() {
        assert_eq!(parse("now", 5_000).unwrap(), 5_000);
        assert_eq!(parse("now-1min", 120_000).unwrap(), 60_000);
        assert_eq!(parse("now+2hours", 0).unwrap(), 7_200_000);
        assert_eq!(parse("1970-01-02", 0).unwrap(), 86_400_000);
        assert_eq!(parse("2026-11-21T08:00:00", 0).unwrap(), 1_795_248_000_000);
        assert!(parse("2026-13-01", 0).is_err());
        assert!(parse("yesterday", 0).is_err());
    }
}
