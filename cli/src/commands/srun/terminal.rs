//! `srun --pty` on srun's side: the size of the terminal srun runs on, and
//! that terminal in raw mode while the step lasts, so every key goes to the
//! task's pseudo-terminal as typed (Ctrl-C interrupts the task's foreground
//! program there, Ctrl-D ends its input) and the task's terminal alone
//! echoes and edits.

use std::io::IsTerminal;

use corral_proto::step::TerminalSize;
use nix::sys::termios::{SetArg, Termios, cfmakeraw, tcgetattr, tcsetattr};

/// The size of the terminal on srun's standard input, or 24x80 when it is
/// not a terminal (or cannot say).
pub fn size() -> TerminalSize {
    let stdin = std::io::stdin();
    match rustix::termios::tcgetwinsize(&stdin) {
        Ok(size) if size.ws_row > 0 && size.ws_col > 0 => TerminalSize {
            rows: size.ws_row,
            cols: size.ws_col,
        },
        _ => TerminalSize::default(),
    }
}

/// srun's terminal in raw mode; its settings come back when dropped.
pub struct RawTerminal {
    saved: Termios,
}

impl RawTerminal {
    /// Puts the terminal on standard input in raw mode; `None` when standard
    /// input is no terminal (its bytes are passed on as they come anyway).
    pub fn enter() -> Option<RawTerminal> {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return None;
        }
        let saved = tcgetattr(&stdin).ok()?;
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        tcsetattr(&stdin, SetArg::TCSANOW, &raw).ok()?;
        Some(RawTerminal { saved })
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        let _ = tcsetattr(std::io::stdin(), SetArg::TCSADRAIN, &self.saved);
    }
}
