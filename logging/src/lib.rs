//! corral-logging: how the daemons (`corrald`, `corral-agent`) log. Lines go
//! to standard error, filtered by `RUST_LOG`, and a line that repeats is
//! rate-limited per call site with a count of what was suppressed
//! ([`repeat_limit`]): a fault that lasts minutes costs a few lines a minute,
//! not megabytes. Where standard error goes decides the rest:
//!
//! - a file (`corral local` sets `CORRAL_LOG_FILE` to it): rotated past
//!   `CORRAL_LOG_MAX_BYTES` (64 MiB), keeping `CORRAL_LOG_KEEP` (3) old files
//!   ([`capped_file`]);
//! - the systemd journal (`JOURNAL_STREAM` set): each line carries its
//!   syslog priority and no timestamp ([`journal`]);
//! - a terminal: colours.
//!
//! `CORRAL_LOG_FORMAT=json` writes one JSON object per line instead (to the
//! capped file when there is one), for a log shipper.
//!
//! Lines logged, by level, and those suppressed are counted
//! ([`line_counts`]) for the daemons' metrics.

pub mod capped_file;
pub mod journal;
pub mod line_counts;
pub mod repeat_limit;

use std::path::PathBuf;
use std::time::Duration;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

pub use capped_file::{CappedStderr, LogCap};
pub use repeat_limit::{RepeatBudget, RepeatLimit};

/// Lines one call site may write per window before the rest are counted.
pub const LINES_PER_WINDOW: u32 = 5;
/// The window.
pub const WINDOW: Duration = Duration::from_secs(10);

/// A log file's cap unless `CORRAL_LOG_MAX_BYTES` says otherwise.
pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Rotated files kept unless `CORRAL_LOG_KEEP` says otherwise.
pub const DEFAULT_KEEP: u32 = 3;

/// The cap the environment asks for: `CORRAL_LOG_FILE` (the file standard
/// error writes to), `CORRAL_LOG_MAX_BYTES`, `CORRAL_LOG_KEEP`; `None`
/// without a file. A value that does not parse is said on standard error
/// and the default used.
pub fn cap_from_env() -> Option<LogCap> {
    let path = PathBuf::from(std::env::var_os("CORRAL_LOG_FILE")?);
    let number = |name: &str, default: u64| match std::env::var(name) {
        Ok(text) => text.trim().parse().unwrap_or_else(|_| {
            eprintln!("{name}={text:?} is not a number of bytes or files; using {default}");
            default
        }),
        Err(_) => default,
    };
    Some(LogCap {
        path,
        max_bytes: number("CORRAL_LOG_MAX_BYTES", DEFAULT_MAX_BYTES).max(1),
        keep: u32::try_from(number("CORRAL_LOG_KEEP", u64::from(DEFAULT_KEEP)))
            .unwrap_or(DEFAULT_KEEP),
    })
}

/// True when `CORRAL_LOG_FORMAT=json` asks for JSON lines.
fn json_asked() -> bool {
    match std::env::var("CORRAL_LOG_FORMAT") {
        Ok(format) if format.eq_ignore_ascii_case("json") => true,
        Ok(format) if format.is_empty() || format.eq_ignore_ascii_case("text") => false,
        Ok(format) => {
            eprintln!("CORRAL_LOG_FORMAT={format:?} is neither text nor json; logging text");
            false
        }
        Err(_) => false,
    }
}

/// Installs the daemon's logger: `RUST_LOG` or `default_filter`, to standard
/// error (JSON lines with `CORRAL_LOG_FORMAT=json`; capped and rotated, or
/// for the journal, as the environment says),
/// with repeated lines limited to [`LINES_PER_WINDOW`] per call site every
/// [`WINDOW`].
pub fn init_daemon(default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| default_filter.into());
    let limit = RepeatLimit::to_stderr(LINES_PER_WINDOW, WINDOW);
    if json_asked() {
        // One JSON object per line, for a log shipper; to the capped file
        // when there is one.
        let builder = tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .with_ansi(false);
        match cap_from_env() {
            Some(cap) => builder
                .with_writer(CappedStderr::new(cap))
                .finish()
                .with(limit)
                .init(),
            None => builder
                .with_writer(std::io::stderr)
                .finish()
                .with(limit)
                .init(),
        }
    } else if journal::stderr_is_journal() {
        let format = tracing_subscriber::fmt::format()
            .without_time()
            .with_ansi(false);
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .event_format(journal::WithPriority(format))
            .finish()
            .with(limit)
            .init();
    } else if let Some(cap) = cap_from_env() {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(CappedStderr::new(cap))
            .with_ansi(false)
            .finish()
            .with(limit)
            .init();
    } else {
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .finish()
            .with(limit)
            .init();
    }
}
