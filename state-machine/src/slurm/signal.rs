//! Signals by name or number, and the `--signal=[{R|B}:]SIG[@SECS]` spec.

use serde::{Deserialize, Serialize};

use super::FormatError;

/// A POSIX signal by its Linux number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Signal(pub u8);

impl Signal {
    /// SIGHUP.
    pub const HUP: Signal = Signal(1);
    /// SIGINT.
    pub const INT: Signal = Signal(2);
    /// SIGKILL.
    pub const KILL: Signal = Signal(9);
    /// SIGUSR1, Slurm's default for preemption and `--signal`.
    pub const USR1: Signal = Signal(10);
    /// SIGUSR2.
    pub const USR2: Signal = Signal(12);
    /// SIGTERM.
    pub const TERM: Signal = Signal(15);
    /// SIGCONT.
    pub const CONT: Signal = Signal(18);
    /// SIGSTOP.
    pub const STOP: Signal = Signal(19);

    /// The name without the `SIG` prefix (`USR1`), or the number for unnamed signals.
    pub fn name(self) -> String {
        todo!()
    }
}

/// Parses `USR1`, `SIGUSR1`, `usr1` or `10`.
pub fn parse_signal(spec: &str) -> Result<Signal, FormatError> {
    let _ = spec;
    todo!()
}

/// A parsed `--signal` value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SignalSpec {
    /// The signal to send.
    pub signal: Signal,
    /// Seconds before the time limit to send it (Slurm's default is 60).
    pub seconds_before: u32,
    /// `B:` — signal only the batch shell, not the job's steps.
    pub batch_only: bool,
    /// `R:` — also signal when the job's reservation ends.
    pub on_reservation_end: bool,
}

/// Parses a `--signal` value.
pub fn parse_signal_spec(spec: &str) -> Result<SignalSpec, FormatError> {
    let _ = spec;
    todo!()
}
