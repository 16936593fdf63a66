//! corral-logging: how the daemons (`corrald`, `corral-agent`) log. Lines go
//! to standard error (which `corral local` writes to files and systemd to the
//! journal), filtered by `RUST_LOG`, and a line that repeats is rate-limited
//! per call site with a count of what was suppressed ([`repeat_limit`]): a
//! fault that lasts minutes costs a few lines a minute, not megabytes.

pub mod repeat_limit;

use std::time::Duration;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

pub use repeat_limit::{RepeatBudget, RepeatLimit};

/// Lines one call site may write per window before the rest are counted.
pub const LINES_PER_WINDOW: u32 = 5;
/// The window.
pub const WINDOW: Duration = Duration::from_secs(10);

/// Installs the daemon's logger: `RUST_LOG` or `default_filter`, to standard
/// error, with repeated lines limited to [`LINES_PER_WINDOW`] per call site
/// every [`WINDOW`].
pub fn init_daemon(default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| default_filter.into());
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .finish()
        .with(RepeatLimit::to_stderr(LINES_PER_WINDOW, WINDOW))
        .init();
}
