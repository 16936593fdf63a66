//! Calendar time for people: timestamps printed as Slurm prints them
//! (`2026-11-21T08:00:00`, and C's `ctime`), always in UTC. The calendar
//! arithmetic is `corral_state::civil`'s.

use corral_state::Timestamp;
pub use corral_state::civil::{Civil, civil_from_timestamp, timestamp_from_civil};

/// Prints `at` as Slurm does, `YYYY-MM-DDTHH:MM:SS`, in UTC (milliseconds dropped).
pub fn format_timestamp(at: Timestamp) -> String {
    let c = civil_from_timestamp(at);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

/// `at` as C's `ctime` prints it (in UTC), without the newline: `Thu Nov 26
/// 11:27:53 2026`, the date line squeue and sinfo print above `--long`.
pub fn ctime(at: Timestamp) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let c = civil_from_timestamp(at);
    let weekday = DAYS[(at.as_secs() / 86_400 % 7) as usize];
    let month = MONTHS[(c.month as usize).saturating_sub(1) % 12];
    format!(
        "{weekday} {month} {:>2} {:02}:{:02}:{:02} {}",
        c.day, c.hour, c.minute, c.second, c.year
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_known_instants() {
        assert_eq!(format_timestamp(Timestamp(0)), "1970-01-01T00:00:00");
        assert_eq!(
            format_timestamp(Timestamp(1_795_248_000_999)),
            "2026-11-21T08:00:00"
        );
        assert_eq!(
            format_timestamp(Timestamp::from_secs(951_782_400)),
            "2000-02-29T00:00:00"
        );
        assert_eq!(
            format_timestamp(Timestamp::LATEST_ACCEPTED),
            "2500-01-01T00:00:00"
        );
    }

    #[test]
    fn ctime_pads_the_day() {
        assert_eq!(ctime(Timestamp::from_secs(0)), "Thu Jan  1 00:00:00 1970");
        assert_eq!(
            ctime(Timestamp::from_secs(1_795_252_600)),
            "Sat Nov 21 09:16:40 2026"
        );
    }
}
