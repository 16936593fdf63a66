//! The controller's clock: wall time in milliseconds as a `Timestamp`. The leader
//! stamps commands with it; the state machine never reads a clock itself.

use std::time::{SystemTime, UNIX_EPOCH};

use corral_state::time::Timestamp;

/// Now, as leader time.
pub fn now() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    Timestamp(ms)
}
