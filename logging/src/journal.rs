//! Lines for the systemd journal. A daemon whose standard error systemd
//! connected to the journal (`JOURNAL_STREAM` set) writes each line with its
//! syslog priority as a `<N>` prefix (sd-daemon(3)), so `journalctl -p err`
//! finds its errors, and without a timestamp or colours: the journal stamps
//! every line itself.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The syslog priority of a tracing level (3 err, 4 warning, 6 info, 7
/// debug).
pub fn priority(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// True when systemd connected this process's standard error to the
/// journal.
pub fn stderr_is_journal() -> bool {
    std::env::var_os("JOURNAL_STREAM").is_some()
}

/// Prefixes every line `inner` formats with its priority.
pub struct WithPriority<F>(pub F);

impl<S, N, F> FormatEvent<S, N> for WithPriority<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        write!(writer, "<{}>", priority(event.metadata().level()))?;
        self.0.format_event(ctx, writer, event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_map_to_syslog_priorities() {
        assert_eq!(priority(&Level::ERROR), 3);
        assert_eq!(priority(&Level::WARN), 4);
        assert_eq!(priority(&Level::INFO), 6);
        assert_eq!(priority(&Level::TRACE), 7);
    }
}
