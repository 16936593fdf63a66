//! Times as users type them to `sacct -S/-E`: `now`, `now-2hours`, `now+30min`,
//! `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS]` (UTC), or milliseconds since the epoch.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::bail;

/// Now in ms since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Parses `text` relative to `now` (ms).
pub fn parse(text: &str, now: u64) -> anyhow::Result<u64> {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix("now") {
        if rest.is_empty() {
            return Ok(now);
        }
        let (sign, amount) = rest.split_at(1);
        let offset = offset_ms(amount)?;
        return match sign {
            "+" => Ok(now.saturating_add(offset)),
            "-" => Ok(now.saturating_sub(offset)),
            _ => bail!("'{text}': use now+N or now-N with a unit (min, hours, days)"),
        };
    }
    if let Ok(ms) = text.parse::<u64>() {
        return Ok(ms);
    }
    parse_civil(text).ok_or_else(|| {
        anyhow::anyhow!("'{text}' is not a time; use YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS] (UTC), now, or now-2hours")
    })
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

fn parse_civil(text: &str) -> Option<u64> {
    let (date, time) = text.split_once('T').unwrap_or((text, "00:00:00"));
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    if d.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let mut t = time.split(':').map(|p| p.parse::<i64>().ok());
    let (h, min) = (t.next()??, t.next()??);
    let s = t.next().unwrap_or(Some(0))?;
    if h > 23 || min > 59 || s > 59 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + min * 60 + s;
    u64::try_from(secs).ok().map(|s| s * 1000)
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
